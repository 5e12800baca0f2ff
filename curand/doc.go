// Package curand binds cuRAND (random number generation on the GPU, host API) for Go.
//
// # The idiomatic API
//
//	g, err := curand.NewGenerator(ctx, curand.Philox, seed)
//	defer g.Close()
//	err = curand.Normal[float32](g, s, buf, n, 0, 1) // on stream s, into a cuda buffer
//
// NewGenerator makes a pseudo- or quasi-random generator of a context (from a cache of
// raw generators); Uniform, Normal, LogNormal (float32, float64, cuda.Float16), Poisson and Uint32
// (uint32) fill any cuda.Memory of the element type on a stream; NewUniform,
// NewNormal, NewLogNormal, NewPoisson and NewUint32 return a new buffer instead
// (ExampleNewNormal). cuda.Float16 is drawn as float32 and converted on the GPU (see
// Float). Calls make the
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
// Package curandraw binds every function of cuRAND's headers, with C names, for what this
// package does not cover; queue its calls with cuda.Enqueue, which orders them with
// the memory's other uses. libcurand.so.10 is opened at first use ($GOCUDA_CURAND_LIB overrides it);
// without it, calls return a *dl.LibraryError, and a function the installed library
// lacks returns a *dl.SymbolError.
package curand
