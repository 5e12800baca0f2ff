package cublas_test

import (
	"testing"

	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
)

// These tests need no GPU and no cuBLAS library: they run in CI.

// TestNoLibrary: where the library (cublas.Soname) cannot be loaded (CI), calls return its typed error.
func TestNoLibrary(t *testing.T) {
	cudatest.NoLibrary(t, cublasraw.Library(), "cublas", cublasraw.Soname, cublasraw.SonameEnv,
		func() error { var h cublasraw.CublasHandle; return cublasraw.Create(&h) },
		func() error { _, err := cublasraw.NewOwnedHandle(); return err },
	)
}

// TestStatusErrors checks the Status error values, which need no library.
func TestStatusErrors(t *testing.T) {
	cudatest.StatusErrors(t, cublasraw.CUBLAS_STATUS_NOT_INITIALIZED, "CUBLAS_STATUS_NOT_INITIALIZED", 1, "not initialized", cublasraw.ErrNotInitialized, cublasraw.ErrAllocFailed, cublasraw.Status(123456), cublasraw.CUBLAS_STATUS_SUCCESS, "Status")
}
