// Package cusparse binds cuSPARSE (sparse linear algebra on the GPU) for Go.
//
// # The idiomatic API
//
//	a := &cusparse.CSR{Rows: m, Cols: n, NNZ: nnz, RowOffsets: ro, ColIndices: ci, Values: v}
//	err := cusparse.MulVec[float64](s, cusparse.NoTrans, 1, a, x, 0, y) // SpMV
//	err = cusparse.MulMat[float64](s, 1, a, k, b, ldb, 0, c, ldc)      // SpMM
//
//	a, err := cusparse.NewCSR(s, m, n, rowOffsets, colIndices, values) // from Go slices
//	a, err = cusparse.DenseToCSR[float64](s, m, n, dense, lda)          // DenseToSparse
//	err = cusparse.ToDense[float64](s, a, dense, lda)                    // SparseToDense
//	c, err := cusparse.MulSparse(s, 1.0, a, b)                          // SpGEMM
//	sv, err := cusparse.NewTriangularSolve[float64](s, cusparse.NoTrans, l, cusparse.Lower, cusparse.NonUnit)
//	err = sv.Solve(s, x, y)                                              // SpSV (SpSM: NewTriangularSolveMat)
//
// | routine | cuSPARSE | example |
// | --- | --- | --- |
// | NewCSR, NewCOO, NewCSC | (copies) | ExampleNewCSR |
// | DenseToCSR, DenseToCOO, DenseToCSC | cusparseDenseToSparse | ExampleDenseToCSR |
// | ToDense | cusparseSparseToDense | ExampleNewCSR |
// | MulSparse | cusparseSpGEMM | ExampleMulSparse |
// | TriangularSolve | cusparseSpSV | ExampleNewTriangularSolve |
// | TriangularSolveMat | cusparseSpSM | ExampleNewTriangularSolveMat |
//
// Matrices made by the package own their device memory (Close frees it); the
// triangular solves keep their analysis (descriptors and work buffer) until Close,
// with a finalizer as fallback.
//
// Sparse matrices (CSR, COO, CSC; 0-based int32 indices) and dense vectors and
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
