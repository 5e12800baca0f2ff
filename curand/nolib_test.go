package curand_test

import (
	"testing"

	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/curand"
	"github.com/gocuda/gocuda/curand/curandraw"
	"github.com/stretchr/testify/assert"
)

// These tests need no GPU and no cuRAND library: they run in CI.

// TestNoLibrary: where the library (curand.Soname) cannot be loaded (CI), calls return its typed error.
func TestNoLibrary(t *testing.T) {
	cudatest.NoLibrary(t, curandraw.Library(), "curand", curandraw.Soname, curandraw.SonameEnv,
		func() error { var v int32; return curandraw.GetVersion(&v) },
		func() error {
			var g curandraw.CurandGenerator
			return curandraw.CreateGenerator(&g, curandraw.CURAND_RNG_PSEUDO_DEFAULT)
		},
	)
}

// TestStatusErrors checks the Status error values, which need no library.
func TestStatusErrors(t *testing.T) {
	cudatest.StatusErrors(t, curandraw.CURAND_STATUS_NOT_INITIALIZED, "CURAND_STATUS_NOT_INITIALIZED", 101, "not initialized", curandraw.ErrNotInitialized, curandraw.ErrAllocationFailed, curandraw.Status(123456), curandraw.CURAND_STATUS_SUCCESS, "Status")
}

// Without the library, NewGenerator returns its typed error too (from making the raw
// generator), and no generator is cached.
func TestNoLibraryGenerator(t *testing.T) {
	ctx, _ := cudatest.Stream(t)
	cudatest.NoLibrary(t, curandraw.Library(), "curand", curandraw.Soname, curandraw.SonameEnv,
		func() error { _, err := curand.NewGenerator(ctx, curand.Philox, 1); return err },
	)
	assert.Zero(t, curand.IdleGeneratorsForTest(ctx))
}
