// Package gonumblas is a gonum BLAS implementation (gonum.org/v1/gonum/blas) that
// runs the large calls of its most used routines with cuBLAS.
//
//	impl, err := gonumblas.New(ctx, opts...)   // ctx: a *cuda.Context
//	blas64.Use(impl); blas32.Use(impl)         // or pass impl where a blas.Float64 goes
//	impl.Register(bufs...)                     // *cuda.ManagedBuffer: used in place
//	impl.Err()                                 // why a call fell back to gonum's code
//	impl.Stats()                               // how many calls ran on the GPU, natively, fell back
//	WithStream(s), WithStaged(t), WithManaged(t)   // options; Thresholds, Never
//
// On the GPU: Ddot, Dnrm2, Daxpy, Dscal (Level 1), Dgemv (Level 2), Dgemm (Level 3)
// and their float32 forms Sdot, Snrm2, Saxpy, Sscal, Sgemv, Sgemm. Everything
// else is gonum's native implementation (gonum.org/v1/gonum/blas/gonum), which
// Implementation embeds.
//
// # Semantics
//
// The routines keep gonum's: row-major matrices with leading dimensions (cuBLAS's
// column-major view of one is its transpose, as in cublas.GemmRowMajor), vector
// increments, beta = 0 not reading y or C (NaNs there are overwritten), and the
// same panics for bad arguments: a call that gonum would reject never goes to the
// GPU, and gonum rejects it. Calls are synchronous: the result is in the slice
// when the call returns. Results differ from gonum's by rounding (cuBLAS sums in
// another order).
//
// # Which calls go to the GPU
//
// A call runs on the GPU when its size reaches a threshold (Thresholds: vector
// length for Level 1, m·n for Level 2, the harmonic mean of m, n, k for Level 3),
// and natively otherwise. Negative increments, alpha = 0 and empty sizes stay
// native too, and so does every call where cuBLAS cannot be loaded.
//
// Operands are ordinary Go slices, or slices of unified memory that the cuda
// package allocated (cuda.Context.AllocManaged, cuda.HostSlice). An ordinary slice
// is staged: copied into a device buffer from the pool, computed on, and copied
// back (a sub-matrix whose rows have gaps is packed first, so that the gaps are not
// touched; strided vectors are gathered and scattered). A slice that starts a
// registered ManagedBuffer is handed to cuBLAS as is: no copy, and a call whose
// operands all are in place uses the lower managed thresholds (DefaultManaged
// against DefaultStaged), since nothing crosses PCIe. The GPU work on managed
// memory takes part in the cuda package's hand-off; staged slices are read as host
// memory, so finish GPU work that writes them first.
//
// Each call takes a stream from the context's pool (WithStream: one stream for
// all) and waits for its work before returning. A failure before the call wrote
// its output sends it to gonum's code (Err reports it); a failure after that
// panics, since the output is lost.
package gonumblas
