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
// # The raw layer
//
// The raw layer (zz_generated_*.go) has every function of cublas_api.h as a Go
// function named after it without the cublas prefix and _v2 suffix: cublasSgemm_v2 is
// Sgemm, cublasSgemm_v2_64 is Sgemm64. C types keep their spelling (CublasHandle,
// CublasOperation), constants their C names (CUBLAS_OP_N). Functions return nil on
// success or a Status, which matches the Err* sentinels with errors.Is. Streams are
// the driver's: a cuda.CUstream passes to SetStream as is. Raw calls run in the
// thread's current context: wrap them in cuda.Context.Locked, take typed pointers
// with cuda.DevicePtr, and queue them with cuda.Enqueue to order them with the
// memory's other uses.
//
// libcublas.so.13 is opened at first use ($GOCUDA_CUBLAS_LIB overrides it); without
// it, calls return a *dl.LibraryError. OwnedHandle owns a raw handle: Close destroys
// it, and one dropped without Close is destroyed by resource.Reclaim (cublasDestroy
// waits for the GPU, so never on the finalizer path). The idiomatic layer's cached
// handles are OwnedHandles too: a handle the cache drops (it keeps MaxIdleHandles per
// context, and drops them all at every Reclaim) is destroyed in Reclaim.
package cublas
