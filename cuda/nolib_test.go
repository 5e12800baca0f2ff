package cuda_test

import (
	"testing"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
)

// These tests need no GPU and no CUDA driver library: they run in CI.

// TestNoLibrary: where the library (cuda.Soname) cannot be loaded (CI), calls return its typed
// error. On the fake driver the test runs again in a process without any driver.
func TestNoLibrary(t *testing.T) {
	if cudatest.Active() {
		cudatest.RunWithoutDriver(t)
		return
	}
	cudatest.NoLibrary(t, cudaraw.Library(), "cuda", cudaraw.Soname, cudaraw.SonameEnv,
		func() error { return cudaraw.Init(0) },
		func() error { var n int32; return cudaraw.DeviceGetCount(&n) },
	)
}

// TestStatusErrors checks the Result error values, which need no library.
func TestStatusErrors(t *testing.T) {
	cudatest.StatusErrors(t, cudaraw.CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", 2, "out of memory", cudaraw.ErrOutOfMemory, cudaraw.ErrInvalidValue, cudaraw.Result(123456), cudaraw.CUDA_SUCCESS, "Result")
}
