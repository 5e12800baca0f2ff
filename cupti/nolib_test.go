package cupti_test

import (
	"testing"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/cupti/cuptiraw"
)

// TestNoLibrary: where libcupti.so.13 cannot be loaded (CI), calls return its typed
// error, naming library, soname and variable; where it is present, this skips.
func TestNoLibrary(t *testing.T) {
	cudatest.NoLibrary(t, cuptiraw.Library(), "cupti", cuptiraw.Soname, cuptiraw.SonameEnv,
		func() error { var v cudaraw.Cuuint32; return cuptiraw.GetVersion(&v) },
		func() error { var ts cudaraw.Cuuint64; return cuptiraw.GetTimestamp(&ts) },
		func() error { return cuptiraw.ActivityFlushAll(0) },
	)
}

// TestStatusErrors checks the Result error values, which need no library.
func TestStatusErrors(t *testing.T) {
	cudatest.StatusErrors(t, cuptiraw.CUPTI_ERROR_NOT_INITIALIZED, "CUPTI_ERROR_NOT_INITIALIZED", 15, "not initialized",
		cuptiraw.ErrNotInitialized, cuptiraw.ErrInvalidParameter, cuptiraw.Result(123456), cuptiraw.CUPTI_SUCCESS, "Result")
}
