// Package curand binds cuRAND (random number generation on the GPU, host API) for Go.
//
// # The idiomatic API
//
//	g, err := curand.NewGenerator(ctx, curand.CURAND_RNG_PSEUDO_PHILOX4_32_10, seed)
//	defer g.Close()
//	err = curand.Normal[float32](g, s, buf, n, 0, 1) // on stream s, into a cuda buffer
//
// NewGenerator makes a pseudo- or quasi-random generator of a context (from a cache of
// raw generators); Uniform, Normal, LogNormal (float32, float64), Poisson and Uint32
// (uint32) fill any cuda.Memory of the element type on a stream. Calls make the
// context current themselves and take part in the cuda package's hand-off; a
// generator's calls are one sequence, ordered on the GPU whatever streams they use.
// Arguments are checked before any CUDA call.
//
// In a graph (cuda.Context.Capture), a generation is captured as the kernels it
// queues, with the generator's state at the capture: every replay writes the same
// numbers. Make the generator (which seeds it) before the capture: seeding waits for
// the device, which a capture does not allow.
//
// # The raw layer
//
// The raw layer (zz_generated_*.go) has every function of curand.h as a Go function named
// after it without the curand prefix and version suffix. C types keep their spelling,
// constants their C names. Functions return nil on success or a Status, which matches the
// Err* sentinels with errors.Is. Types shared with other libraries (streams, data types,
// complex numbers) are package cuda's.
//
// libcurand.so.10 is opened at first use ($GOCUDA_CURAND_LIB overrides it); without it, calls return a
// *dl.LibraryError, and a function the installed library lacks returns a *dl.SymbolError.
// OwnedGenerator owns a generator: Close destroys it; one dropped without Close is
// destroyed by resource.Reclaim (curandDestroyGenerator waits for the GPU and stalls other
// threads' launches, so never on the finalizer path). The idiomatic Generator's raw
// generators are OwnedGenerators: one its cache drops is destroyed in Reclaim.
package curand
