// Package cufft binds cuFFT (fast Fourier transforms on the GPU) for Go.
//
// # The idiomatic API
//
//	err := cufft.FFT[complex64](s, []int{ny, nx}, batch, in, out, false)   // C2C, Z2Z
//	err = cufft.RealToComplex[float32, complex64](s, sizes, batch, re, half) // R2C, D2Z
//	err = cufft.ComplexToReal[complex64, float32](s, sizes, batch, half, re) // C2R, Z2D
//
// Transforms of rank 1 to 3, batched, on any cuda.Memory of the element type, queued
// on a stream. Plans come from a per-context cache keyed by the transform (made once
// with cufftMakePlanMany, bound to the caller's stream per call), with their work
// area from the device's pool (it shows in cuda.MemoryStatus); calls make the
// context current themselves and take part in the cuda package's hand-off (inputs
// read, outputs written, and the plan's work area written). Arguments are checked
// before any CUDA call. Transforms are unnormalized, as in cuFFT, unless given a Norm
// (Backward, Ortho, Forward, as NumPy and CuPy name them; ExampleNorm); a Layout
// (cufftMakePlanMany's embed, stride and distance; ExampleLayout) transforms strided
// and batched data; Stats counts the plans made and reused.
//
// # The raw layer
//
// Package cufftraw binds every function of cuFFT's headers, with C names, for what this
// package does not cover; queue its calls with cuda.Enqueue, which orders them with
// the memory's other uses. libcufft.so.12 is opened at first use ($GOCUDA_CUFFT_LIB overrides it);
// without it, calls return a *dl.LibraryError, and a function the installed library
// lacks returns a *dl.SymbolError.
package cufft
