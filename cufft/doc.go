// Package cufft binds cuFFT (fast Fourier transforms on the GPU) for Go.
//
// The raw layer (zz_generated_*.go) has every function of cufft.h as a Go function named
// after it without the cufft prefix and version suffix. C types keep their spelling,
// constants their C names. Functions return nil on success or a Result, which matches the
// Err* sentinels with errors.Is. Types shared with other libraries (streams, data types,
// complex numbers) are package cuda's.
//
// libcufft.so.12 is opened at first use ($GOCUDA_CUFFT_LIB overrides it); without it, calls return a
// *dl.LibraryError, and a function the installed library lacks returns a *dl.SymbolError.
// OwnedPlan owns a plan: Close destroys it; one dropped without Close is destroyed by
// resource.Reclaim (cufftDestroy waits for the GPU, so never on the finalizer path).
package cufft
