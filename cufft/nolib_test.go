package cufft_test

import (
	"testing"

	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/cufft/cufftraw"
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
