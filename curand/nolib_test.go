package curand_test

import (
	"testing"

	"github.com/gocuda/gocuda/curand"
	"github.com/gocuda/gocuda/internal/libtest"
)

// These tests need no GPU and no cuRAND library: they run in CI.

// TestNoLibrary: where the library (curand.Soname) cannot be loaded (CI), calls return its typed error.
func TestNoLibrary(t *testing.T) {
	libtest.NoLibrary(t, curand.Library(), "curand", curand.Soname, curand.SonameEnv,
		func() error { var v int32; return curand.GetVersion(&v) },
		func() error {
			var g curand.CurandGenerator
			return curand.CreateGenerator(&g, curand.CURAND_RNG_PSEUDO_DEFAULT)
		},
	)
}

// TestStatusErrors checks the Status error values, which need no library.
func TestStatusErrors(t *testing.T) {
	libtest.StatusErrors(t, curand.CURAND_STATUS_NOT_INITIALIZED, "CURAND_STATUS_NOT_INITIALIZED", 101, "not initialized", curand.ErrNotInitialized, curand.ErrAllocationFailed, curand.Status(123456), curand.CURAND_STATUS_SUCCESS, "Status")
}
