package cufft_test

import (
	"testing"

	"github.com/gocuda/gocuda/cufft"
	"github.com/gocuda/gocuda/internal/libtest"
)

// These tests need no GPU and no cuFFT library: they run in CI.

// TestNoLibrary: where the library (cufft.Soname) cannot be loaded (CI), calls return its typed error.
func TestNoLibrary(t *testing.T) {
	libtest.NoLibrary(t, cufft.Library(), "cufft", cufft.Soname, cufft.SonameEnv,
		func() error { var v int32; return cufft.GetVersion(&v) },
		func() error { _, err := cufft.NewOwnedPlan(); return err },
	)
}

// TestStatusErrors checks the Result error values, which need no library.
func TestStatusErrors(t *testing.T) {
	libtest.StatusErrors(t, cufft.CUFFT_INVALID_PLAN, "CUFFT_INVALID_PLAN", 1, "invalid plan", cufft.ErrInvalidPlan, cufft.ErrAllocFailed, cufft.Result(123456), cufft.CUFFT_SUCCESS, "Result")
}
