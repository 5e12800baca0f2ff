// Package cusparse binds cuSPARSE (sparse linear algebra on the GPU) for Go.
//
// # The idiomatic API
//
//	a := &cusparse.CSR{Rows: m, Cols: n, NNZ: nnz, RowOffsets: ro, ColIndices: ci, Values: v}
//	err := cusparse.MulVec[float64](s, cusparse.CUSPARSE_OPERATION_NON_TRANSPOSE, 1, a, x, 0, y) // SpMV
//	err = cusparse.MulMat[float64](s, 1, a, k, b, ldb, 0, c, ldc)                               // SpMM
//
// Sparse matrices (CSR, COO; 0-based int32 indices) and dense vectors and
// column-major matrices are the cuda package's memory; products are queued on a
// stream with a handle of its context from a cache, the work buffer cuSPARSE asks
// for comes from the device's pool (freed after the product, on the stream), and the
// memory takes part in the cuda package's hand-off. Arguments are checked before any
// CUDA call.
//
// # The raw layer
//
// The raw layer (zz_generated_*.go) has every function of cusparse.h as a Go function named
// after it without the cusparse prefix and version suffix. C types keep their spelling,
// constants their C names. Functions return nil on success or a Status, which matches the
// Err* sentinels with errors.Is. Types shared with other libraries (streams, data types,
// complex numbers) are package cuda's.
//
// libcusparse.so.12 is opened at first use ($GOCUDA_CUSPARSE_LIB overrides it); without it, calls return a
// *dl.LibraryError, and a function the installed library lacks returns a *dl.SymbolError.
// OwnedHandle, OwnedSpMat, OwnedDnVec and the other owners release their handle on
// Close; one dropped without Close is released promptly on an ordinary goroutine
// (cusparseDestroy returns in microseconds).
package cusparse
