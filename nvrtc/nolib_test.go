package nvrtc_test

import (
	"testing"

	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/nvrtc"
	"github.com/gocuda/gocuda/nvrtc/nvrtcraw"
)

// These tests need no GPU and no NVRTC library: they run in CI.

// TestNoLibrary: where the library (nvrtc.Soname) cannot be loaded (CI), calls return its typed
// error, the idiomatic Compile's too.
func TestNoLibrary(t *testing.T) {
	cudatest.NoLibrary(t, nvrtcraw.Library(), "nvrtc", nvrtcraw.Soname, nvrtcraw.SonameEnv,
		func() error { var major, minor int32; return nvrtcraw.Version(&major, &minor) },
		func() error {
			_, err := nvrtc.Compile(`extern "C" __global__ void k() {}`, "k.cu", nvrtc.Options{})
			return err
		},
		func() error { _, err := nvrtc.SupportedArchs(); return err },
	)
}

// TestStatusErrors checks the Result error values, which need no library.
func TestStatusErrors(t *testing.T) {
	cudatest.StatusErrors(t, nvrtcraw.NVRTC_ERROR_OUT_OF_MEMORY, "NVRTC_ERROR_OUT_OF_MEMORY", 1, "out of memory",
		nvrtcraw.ErrOutOfMemory, nvrtcraw.ErrCompilation, nvrtcraw.Result(123456), nvrtcraw.NVRTC_SUCCESS, "Result")
}
