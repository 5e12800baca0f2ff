package cusparse_test

import (
	"testing"

	"github.com/gocuda/gocuda/cusparse"
	"github.com/gocuda/gocuda/internal/libtest"
)

// These tests need no GPU and no cuSPARSE library: they run in CI.

// TestNoLibrary: where the library (cusparse.Soname) cannot be loaded (CI), calls return its typed error.
func TestNoLibrary(t *testing.T) {
	libtest.NoLibrary(t, cusparse.Library(), "cusparse", cusparse.Soname, cusparse.SonameEnv,
		func() error { var h cusparse.CusparseHandle; return cusparse.Create(&h) },
		func() error { _, err := cusparse.NewOwnedHandle(); return err },
	)
}

// TestStatusErrors checks the Status error values, which need no library.
func TestStatusErrors(t *testing.T) {
	libtest.StatusErrors(t, cusparse.CUSPARSE_STATUS_NOT_INITIALIZED, "CUSPARSE_STATUS_NOT_INITIALIZED", 1, "not initialized", cusparse.ErrNotInitialized, cusparse.ErrAllocFailed, cusparse.Status(123456), cusparse.CUSPARSE_STATUS_SUCCESS, "Status")
}
