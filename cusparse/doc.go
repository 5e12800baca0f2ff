// Package cusparse binds cuSPARSE (sparse linear algebra on the GPU) for Go.
//
// # The idiomatic API
//
//	a := &cusparse.CSR{Rows: m, Cols: n, NNZ: nnz, RowOffsets: ro, ColIndices: ci, Values: v}
//	err := cusparse.MulVec[float64](s, cusparse.NoTrans, 1, a, x, 0, y) // SpMV
//	err = cusparse.MulMat[float64](s, 1, a, k, b, ldb, 0, c, ldc)      // SpMM
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
// Package cusparseraw binds every function of cuSPARSE's headers, with C names, for what this
// package does not cover; queue its calls with cuda.Enqueue, which orders them with
// the memory's other uses. libcusparse.so.12 is opened at first use ($GOCUDA_CUSPARSE_LIB overrides it);
// without it, calls return a *dl.LibraryError, and a function the installed library
// lacks returns a *dl.SymbolError.
package cusparse
