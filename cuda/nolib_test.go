package cuda_test

import (
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/internal/fakecuda"
	"github.com/gocuda/gocuda/internal/libtest"
)

// These tests need no GPU and no CUDA driver library: they run in CI.

// TestNoLibrary: where the library (cuda.Soname) cannot be loaded (CI), calls return its typed
// error. On the fake driver the test runs again in a process without any driver.
func TestNoLibrary(t *testing.T) {
	if fakecuda.Active() {
		fakecuda.RunWithoutDriver(t)
		return
	}
	libtest.NoLibrary(t, cuda.Library(), "cuda", cuda.Soname, cuda.SonameEnv,
		func() error { return cuda.Init(0) },
		func() error { var n int32; return cuda.DeviceGetCount(&n) },
	)
}

// TestStatusErrors checks the Result error values, which need no library.
func TestStatusErrors(t *testing.T) {
	libtest.StatusErrors(t, cuda.CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", 2, "out of memory", cuda.ErrOutOfMemory, cuda.ErrInvalidValue, cuda.Result(123456), cuda.CUDA_SUCCESS, "Result")
}
