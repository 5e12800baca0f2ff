// Package curand binds cuRAND (random number generation on the GPU, host API) for Go.
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
// threads' launches, so never on the finalizer path).
package curand
