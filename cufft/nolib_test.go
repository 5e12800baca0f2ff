package cufft_test

import (
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/cufft"
	"github.com/gocuda/gocuda/cufft/cufftraw"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests need no GPU and no cuFFT library: they run in CI.

// TestNoLibrary: where the library (cufft.Soname) cannot be loaded (CI), calls return its typed error.
func TestNoLibrary(t *testing.T) {
	cudatest.NoLibrary(t, cufftraw.Library(), "cufft", cufftraw.Soname, cufftraw.SonameEnv,
		func() error { var v int32; return cufftraw.GetVersion(&v) },
		func() error { _, err := cufftraw.NewOwnedPlan(); return err },
	)
}

// TestStatusErrors checks the Result error values, which need no library.
func TestStatusErrors(t *testing.T) {
	cudatest.StatusErrors(t, cufftraw.CUFFT_INVALID_PLAN, "CUFFT_INVALID_PLAN", 1, "invalid plan", cufftraw.ErrInvalidPlan, cufftraw.ErrAllocFailed, cufftraw.Result(123456), cufftraw.CUFFT_SUCCESS, "Result")
}

// Without the library, a transform returns its typed error too (from making the
// plan's handle, after the arguments' checks), and no plan is cached.
func TestNoLibraryTransform(t *testing.T) {
	ctx, s := cudatest.Stream(t)
	b, err := cuda.AllocFor[complex64](s, 8)
	require.NoError(t, err)
	defer b.Close()
	re, err := ctx.Alloc(s, 64) // untyped: read as float32
	require.NoError(t, err)
	defer re.Close()
	cudatest.NoLibrary(t, cufftraw.Library(), "cufft", cufftraw.Soname, cufftraw.SonameEnv,
		func() error { return cufft.FFT[complex64](s, []int{8}, 1, b, b, false) },
		func() error { return cufft.RealToComplex[float32, complex64](s, []int{4}, 1, re, b) },
	)
	assert.Zero(t, cufft.IdlePlansForTest(ctx))
	assert.Zero(t, cufft.StreamPlansForTest(ctx))
}
