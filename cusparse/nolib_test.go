package cusparse_test

import (
	"testing"

	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/cusparse/cusparseraw"
)

// These tests need no GPU and no cuSPARSE library: they run in CI.

// TestNoLibrary: where the library (cusparse.Soname) cannot be loaded (CI), calls return its typed error.
func TestNoLibrary(t *testing.T) {
	cudatest.NoLibrary(t, cusparseraw.Library(), "cusparse", cusparseraw.Soname, cusparseraw.SonameEnv,
		func() error { var h cusparseraw.CusparseHandle; return cusparseraw.Create(&h) },
		func() error { _, err := cusparseraw.NewOwnedHandle(); return err },
	)
}

// TestStatusErrors checks the Status error values, which need no library.
func TestStatusErrors(t *testing.T) {
	cudatest.StatusErrors(t, cusparseraw.CUSPARSE_STATUS_NOT_INITIALIZED, "CUSPARSE_STATUS_NOT_INITIALIZED", 1, "not initialized", cusparseraw.ErrNotInitialized, cusparseraw.ErrAllocFailed, cusparseraw.Status(123456), cusparseraw.CUSPARSE_STATUS_SUCCESS, "Status")
}
