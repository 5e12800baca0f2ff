// Package cublas binds cuBLAS (dense linear algebra on the GPU) for Go.
//
// The raw layer (zz_generated_*.go) has every function of cublas_api.h as a Go
// function named after it without the cublas prefix and _v2 suffix: cublasSgemm_v2 is
// Sgemm, cublasSgemm_v2_64 is Sgemm64. C types keep their spelling (CublasHandle,
// CublasOperation), constants their C names (CUBLAS_OP_N). Functions return nil on
// success or a Status, which matches the Err* sentinels with errors.Is. Streams are
// the driver's: a cuda.CUstream passes to SetStream as is.
//
// libcublas.so.13 is opened at first use ($GOCUDA_CUBLAS_LIB overrides it); without
// it, calls return a *dl.LibraryError. OwnedHandle owns a handle: Close destroys it,
// and one dropped without Close is destroyed by resource.Reclaim (cublasDestroy waits
// for the GPU, so never on the finalizer path).
package cublas
