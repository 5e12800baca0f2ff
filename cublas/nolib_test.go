package cublas_test

import (
	"testing"

	"github.com/gocuda/gocuda/cublas"
	"github.com/gocuda/gocuda/internal/libtest"
)

// These tests need no GPU and no cuBLAS library: they run in CI.

// TestNoLibrary: where the library (cublas.Soname) cannot be loaded (CI), calls return its typed error.
func TestNoLibrary(t *testing.T) {
	libtest.NoLibrary(t, cublas.Library(), "cublas", cublas.Soname, cublas.SonameEnv,
		func() error { var h cublas.CublasHandle; return cublas.Create(&h) },
		func() error { _, err := cublas.NewOwnedHandle(); return err },
	)
}

// TestStatusErrors checks the Status error values, which need no library.
func TestStatusErrors(t *testing.T) {
	libtest.StatusErrors(t, cublas.CUBLAS_STATUS_NOT_INITIALIZED, "CUBLAS_STATUS_NOT_INITIALIZED", 1, "not initialized", cublas.ErrNotInitialized, cublas.ErrAllocFailed, cublas.Status(123456), cublas.CUBLAS_STATUS_SUCCESS, "Status")
}
