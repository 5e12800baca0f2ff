// Package cusolver binds cuSOLVER's dense API (cusolverDn: LAPACK on the GPU) for Go.
//
// # The idiomatic API
//
// Factorizations and solves on the cuda package's memory, queued on a cuda.Stream:
//
//	Potrf[T], Potrs[T]             Cholesky: A = L·Lᴴ (or Uᴴ·U), then A·X = B
//	Getrf[T], Getrs[T]             LU with partial pivoting: P·A = L·U, then op(A)·X = B
//	Inverse[T]                     A⁻¹ through LU (getrf, then getrs of the identity)
//	Geqrf[T], Ormqr[T], Orgqr[T]   QR: A = Q·R, then op(Q)·C (unmqr for complex), or Q itself (ungqr)
//	Gels[T]                        least squares min‖A·X − B‖, m ≥ n, through QR and cuBLAS's trsm
//	Gesvd[T]                       SVD A = U·Σ·Vᴴ (m ≥ n)
//	GesvdjBatched[T]               SVDs of many small matrices (≤ 32×32), Jacobi
//	Syevd[T]                       eigenvalues and vectors of a symmetric (Hermitian: heevd) matrix
//	SyevjBatched[T]                the same for many small ones (≤ 32×32), Jacobi
//
// T is float32, float64, complex64 or complex128; memory is any cuda.Memory
// (device buffers and their views, unified memory) of element type T if it has one,
// pivots are int32 memory, and singular values and eigenvalues are memory of T's
// real type (float32 for float32 and complex64, float64 for the others). Matrices
// are column-major, as in LAPACK; a batch's matrices lie one after another.
//
// Each routine's example is its Example function: ExampleGeqrf, ExampleOrmqr,
// ExampleGels, ExampleInverse, ExampleGesvd, ExampleGesvdjBatched, ExampleSyevd
// and ExampleSyevjBatched (Example for Cholesky and LU).
//
//	err := cusolver.Potrf[float64](s, cusolver.Lower, n, a, n)           // waits
//	err = cusolver.Potrs[float64](s, cusolver.Lower, n, nrhs, a, n, b, n) // X in b
//	var e *cusolver.InfoError
//	if errors.As(err, &e) { ... }                                        // errors.Is(err, cusolver.ErrNotPositiveDefinite)
//
// cuSOLVER writes LAPACK's info on the GPU. The operations wait for the operation
// to read it, and return a nonzero one as an *InfoError (matching
// ErrNotPositiveDefinite, ErrSingular, ErrNoConvergence, or cuda.ErrInvalidArgument
// for an illegal parameter; a batched operation's say which matrix). Their Async forms return once the work is queued, with an *Info whose
// Check reads the info later: queue a factorization and its solves, then check.
//
// There is no handle to manage and no unsafe: each call takes a cuSOLVER handle of
// the stream's context from a cache, binds it to the stream, and makes the context
// current itself, so any goroutine can call, and none needs runtime.LockOSThread.
// Calls take part in the cuda package's hand-off: they wait on the GPU for their
// operands' conflicting uses on other streams (inputs are read, outputs written).
// Workspaces come from the device's pool (they show in cuda.MemoryStatus) and are
// freed after the operation on its stream. Arguments are checked before any CUDA
// call.
//
// # The raw layer
//
// Package cusolverraw binds every function of cuSOLVER's headers, with C names, for what this
// package does not cover; queue its calls with cuda.Enqueue, which orders them with
// the memory's other uses. libcusolver.so.12 is opened at first use ($GOCUDA_CUSOLVER_LIB overrides it);
// without it, calls return a *dl.LibraryError, and a function the installed library
// lacks returns a *dl.SymbolError.
package cusolver
