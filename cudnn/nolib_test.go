package cudnn_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/cudnn"
	"github.com/gocuda/gocuda/cudnn/cudnnraw"
	"github.com/gocuda/gocuda/dl"
)

// These tests need no GPU and no cuDNN library: they run in CI.

// TestNoLibrary: where the library (cudnn.Soname) cannot be loaded (CI), calls return its typed error.
func TestNoLibrary(t *testing.T) {
	cudatest.NoLibrary(t, cudnnraw.Library(), "cudnn", cudnnraw.Soname, cudnnraw.SonameEnv,
		func() error { _, err := cudnnraw.GetVersion(); return err },
		func() error { _, err := cudnnraw.NewOwnedHandle(); return err },
	)
}

// TestStatusErrors checks the Status error values, which need no library.
func TestStatusErrors(t *testing.T) {
	cudatest.StatusErrors(t, cudnnraw.CUDNN_STATUS_BAD_PARAM, "CUDNN_STATUS_BAD_PARAM", 2000, "bad param", cudnnraw.ErrBadParam, cudnnraw.ErrNotInitialized, cudnnraw.Status(123456), cudnnraw.CUDNN_STATUS_SUCCESS, "Status")
}

// symbolChildEnv marks the child process of TestSymbolErrorFromGeneratedCall.
const symbolChildEnv = "GOCUDA_TEST_CUDNN_SYMBOL_CHILD"

// TestSymbolErrorFromGeneratedCall calls generated functions with the cuDNN
// library replaced by one that exports none of their symbols (libm.so.6,
// through GOCUDA_CUDNN_LIB, in a child process since the library is opened
// once per process). Each call must return a *dl.SymbolError naming the
// library, its soname, the symbol and the file loaded, before reaching C:
// this is what a binding newer than the installed cuDNN does. It needs no GPU.
func TestSymbolErrorFromGeneratedCall(t *testing.T) {
	if os.Getenv(symbolChildEnv) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSymbolErrorFromGeneratedCall$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), symbolChildEnv+"=1", cudnnraw.SonameEnv+"=libm.so.6")
		out, err := cmd.CombinedOutput()
		t.Logf("child process:\n%s", out)
		require.NoError(t, err, "child process failed")
		require.Contains(t, string(out), "--- PASS: TestSymbolErrorFromGeneratedCall")
		return
	}

	lib := cudnnraw.Library()
	require.NoError(t, lib.Open(), "libm.so.6 opens as the cuDNN library")
	path, err := lib.Path()
	require.NoError(t, err)
	assert.Contains(t, path, "libm")

	check := func(err error, symbol string) {
		t.Helper()
		require.Error(t, err, symbol)
		assert.True(t, errors.Is(err, dl.ErrSymbolNotFound), "%s: %T %v", symbol, err, err)
		assert.False(t, errors.Is(err, dl.ErrLibraryNotFound))
		var se *dl.SymbolError
		require.True(t, errors.As(err, &se), "%s: %T %v", symbol, err, err)
		assert.Equal(t, "cudnn", se.Library)
		assert.Equal(t, cudnnraw.Soname, se.Soname)
		assert.Equal(t, symbol, se.Symbol)
		assert.Equal(t, path, se.Path)
		assert.NotEmpty(t, se.Err, "dlerror text")
		assert.Contains(t, err.Error(), symbol)
		assert.Contains(t, err.Error(), cudnnraw.Soname)
		assert.Contains(t, err.Error(), path)
		var st cudnnraw.Status
		assert.False(t, errors.As(err, &st), "a missing symbol is not a Status")
	}

	ver, err := cudnnraw.GetVersion() // value-returning form
	assert.Zero(t, ver)
	check(err, "cudnnGetVersion")
	var h cudnnraw.CudnnHandle
	check(cudnnraw.Create(&h), "cudnnCreate")
	owned, err := cudnnraw.NewOwnedHandle()
	assert.Nil(t, owned)
	check(err, "cudnnCreate")
	s, err := cudnnraw.GetErrorString(cudnnraw.CUDNN_STATUS_BAD_PARAM)
	assert.Empty(t, s)
	check(err, "cudnnGetErrorString")
	check(cudnnraw.ActivationForward(0, 0, nil, 0, nil, nil, 0, nil), "cudnnActivationForward")
	check(cudnnraw.GetCTCLossDescriptorV9(0, nil, nil, nil, nil), "cudnnGetCTCLossDescriptor_v9")
	check(cudnnraw.BackendPopulateCudaGraph(0, 0, 0, 0), "cudnnBackendPopulateCudaGraph")
	t.Logf("e.g. %v", cudnnraw.GraphVersionCheck())

	// The idiomatic layer passes the error on, wrapped with the operation's name
	// (its first cuDNN call makes a descriptor). It needs a driver, real or fake.
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		t.Logf("no CUDA driver (%v): the operations' symbol errors are not checked", err)
		return
	}
	stream, err := ctx.NewStream()
	require.NoError(t, err)
	defer stream.Close()
	xs, ws := cudnn.Tensor4D{N: 1, C: 1, H: 3, W: 3}, cudnn.Filter{K: 1, C: 1, R: 3, S: 3}
	x, err := cuda.AllocFor[float32](stream, 9)
	require.NoError(t, err)
	defer x.Close()
	y, err := cuda.AllocFor[float32](stream, 9)
	require.NoError(t, err)
	defer y.Close()
	err = cudnn.Convolve[float32](stream, cudnn.Conv{}, 1, x, xs, x, ws, 0, y)
	check(err, "cudnnCreateTensorDescriptor")
	assert.True(t, strings.HasPrefix(err.Error(), "cudnn: convolution forward: "), err.Error())
	err = cudnn.Activate[float32](stream, cudnn.Activation{Mode: cudnn.ReLU}, xs, 1, x, 0, y)
	check(err, "cudnnCreateActivationDescriptor")
	assert.True(t, strings.HasPrefix(err.Error(), "cudnn: activation forward: "), err.Error())
	t.Logf("e.g. %v", err)
}
