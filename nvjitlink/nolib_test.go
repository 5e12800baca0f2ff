package nvjitlink_test

import (
	"testing"

	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/nvjitlink"
	"github.com/gocuda/gocuda/nvjitlink/nvjitlinkraw"
)

// These tests need no GPU and no nvJitLink library: they run in CI.

// TestNoLibrary: where the library (nvjitlinkraw.Soname) cannot be loaded (CI), calls
// return its typed error naming the library, its soname and the variable; the
// idiomatic Link's and Version's too.
func TestNoLibrary(t *testing.T) {
	cudatest.NoLibrary(t, nvjitlinkraw.Library(), "nvjitlink", nvjitlinkraw.Soname, nvjitlinkraw.SonameEnv,
		func() error { var major, minor uint32; return nvjitlinkraw.Version(&major, &minor) },
		func() error {
			_, err := nvjitlink.Link(nvjitlink.Options{Arch: "sm_90"}, nvjitlink.Input{Kind: nvjitlink.PTX, Data: []byte(".version 8.0\n")})
			return err
		},
		func() error { _, _, err := nvjitlink.Version(); return err },
	)
}

// TestStatusErrors checks the Result error values, which need no library.
func TestStatusErrors(t *testing.T) {
	cudatest.StatusErrors(t, nvjitlinkraw.NVJITLINK_ERROR_NVVM_COMPILE, "NVJITLINK_ERROR_NVVM_COMPILE", 5, "nvvm compile",
		nvjitlinkraw.ErrNvvmCompile, nvjitlinkraw.ErrPtxCompile, nvjitlinkraw.Result(123456), nvjitlinkraw.NVJITLINK_SUCCESS, "Result")
}
