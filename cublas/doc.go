// Package cublas binds cuBLAS (dense linear algebra on the GPU) for Go.
//
// # The idiomatic API
//
// Typed operations on the cuda package's memory, queued on a cuda.Stream:
//
//	Gemm[T], GemmRowMajor[T], GemmStridedBatched[T]   C = alpha·op(A)·op(B) + beta·C
//	GemmMixed[In, Out]                               the same in mixed precision
//	Gemv[T]                                          y = alpha·op(A)·x + beta·y
//	Axpy[T], Scal[T]                                 y = alpha·x + y, x = alpha·x
//	Dot[T], Nrm2[T] (DotTo, Nrm2To into GPU memory)  x·y, ‖x‖
//
// T is float32, float64, complex64 or complex128 (Gemm also cuda.Float16; Dot and
// Nrm2: float32, float64). GemmMixed is cublasGemmEx: half, bfloat16, float32,
// float64 or int8 inputs, with a compute type (Compute32F, Compute32FFastTF32, …);
// memory is any cuda.Memory (device buffers and their views, unified memory), of
// element type T if it has one. There is no handle to manage and no unsafe: each
// call takes a cuBLAS handle of the stream's context from a cache, binds it to the
// stream, and makes the context current itself, so any goroutine can call, and none
// needs runtime.LockOSThread. Calls take part in the cuda package's hand-off: they
// wait on the GPU for their operands' conflicting uses on other streams (inputs are
// read, outputs written). Arguments are checked before any CUDA call. Each handle
// has a workspace from the device's pool (DefaultWorkspaceSize, or SetWorkspaceSize
// per context), which shows in cuda.MemoryStatus and is ordered by the hand-off
// when a handle moves between streams.
//
//	s := cuda.StreamFromContext(ctx) // or any *cuda.Stream
//	err := cublas.GemmRowMajor[float32](s, cublas.NoTrans, cublas.NoTrans, m, n, k,
//		1, a, k, b, n, 0, c, n)
//
// # Level 3 and fused GEMMs
//
// | routine | cuBLAS | example |
// |---|---|---|
// | Trsm | cublas{S,D,C,Z}trsm | ExampleTrsm |
// | Syrk | cublas{S,D,C,Z}syrk | ExampleSyrk |
// | Herk | cublas{C,Z}herk | ExampleHerk |
// | Geam | cublas{S,D,C,Z}geam | ExampleGeam |
// | GemmBatched | cublas{S,D,C,Z}gemmBatched (pointer arrays) | ExampleGemmBatched |
// | Matmul | cublasLtMatmul with an epilogue (bias, ReLU, GELU, DRELU, DGELU, BGRAD) | ExampleMatmul |
//
// Matmul runs on cuBLASLt (package cublaslt/cublasltraw; libcublasLt.so.13,
// $GOCUDA_CUBLASLT_LIB overrides it): D = act(alpha·op(A)·op(B) + beta·C + bias)
// in one call, its handles cached like cuBLAS's and its descriptors kept per shape.
//
// # The raw layer
//
// Package cublasraw binds every function of cuBLAS's headers, with C names, for what this
// package does not cover; queue its calls with cuda.Enqueue, which orders them with
// the memory's other uses. libcublas.so.13 is opened at first use ($GOCUDA_CUBLAS_LIB overrides it);
// without it, calls return a *dl.LibraryError, and a function the installed library
// lacks returns a *dl.SymbolError.
package cublas
