package cudnn_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cudnn"
	"github.com/gocuda/gocuda/dl"
)

// These tests need no GPU and no cuDNN library: they run in CI.

// TestNoLibrary checks that, where libcudnn.so.9 cannot be loaded, calling a
// binding returns a *dl.LibraryError matching dl.ErrLibraryNotFound that
// names the library, its soname and the environment variable, and does not
// panic. Where the library is present (the GPU machine) there is nothing to
// check: it skips.
func TestNoLibrary(t *testing.T) {
	lib := cudnn.Library()
	assert.Equal(t, "cudnn", lib.Name())
	assert.Equal(t, "libcudnn.so.9", lib.Soname())
	assert.Equal(t, "GOCUDA_CUDNN_LIB", lib.EnvVar())
	openErr := lib.Open()
	if openErr == nil {
		t.Skip("library present: the not-found path is tested where it is absent (CI)")
	}
	assert.False(t, lib.Loaded())

	_, err := cudnn.GetVersion()
	require.Error(t, err)
	assert.True(t, errors.Is(err, dl.ErrLibraryNotFound), "got %T %v", err, err)
	assert.False(t, errors.Is(err, dl.ErrSymbolNotFound))
	var le *dl.LibraryError
	require.True(t, errors.As(err, &le), "got %T %v", err, err)
	assert.Equal(t, "cudnn", le.Library)
	assert.Equal(t, "libcudnn.so.9", le.Soname)
	assert.Equal(t, "GOCUDA_CUDNN_LIB", le.Env)
	if os.Getenv("GOCUDA_CUDNN_LIB") == "" {
		assert.Equal(t, "libcudnn.so.9", le.Tried)
		assert.False(t, le.FromEnv)
	}
	assert.NotEmpty(t, le.Err, "dlerror text")
	assert.Contains(t, err.Error(), "libcudnn.so.9")
	assert.Contains(t, err.Error(), "GOCUDA_CUDNN_LIB")
	var st cudnn.Status
	assert.False(t, errors.As(err, &st), "a load failure is not a Status")

	// The open is tried once: every call returns the same error.
	var le0 *dl.LibraryError
	require.True(t, errors.As(openErr, &le0))
	assert.Same(t, le0, le)
	owned, err2 := cudnn.NewOwnedHandle()
	assert.Nil(t, owned)
	var le2 *dl.LibraryError
	require.True(t, errors.As(err2, &le2), "got %T %v", err2, err2)
	assert.Same(t, le0, le2)
}

// TestStatusErrors checks the Status error values, whose names and descriptions
// come from tables in the package and need no library.
func TestStatusErrors(t *testing.T) {
	e := cudnn.CUDNN_STATUS_BAD_PARAM
	assert.Contains(t, e.Error(), "CUDNN_STATUS_BAD_PARAM")
	assert.Contains(t, e.Error(), "(2000)")
	assert.Contains(t, e.Error(), "bad param")
	assert.Equal(t, "CUDNN_STATUS_BAD_PARAM", e.String())
	assert.Equal(t, "bad param", e.Description())

	wrapped := fmt.Errorf("x: %w", cudnn.CUDNN_STATUS_BAD_PARAM)
	assert.True(t, errors.Is(wrapped, cudnn.ErrBadParam))
	assert.False(t, errors.Is(wrapped, cudnn.ErrNotInitialized))
	var got cudnn.Status
	require.True(t, errors.As(wrapped, &got))
	assert.Equal(t, cudnn.CUDNN_STATUS_BAD_PARAM, got)

	unknown := cudnn.Status(123456)
	assert.Equal(t, "Status(123456)", unknown.String())
	assert.Equal(t, "unknown status", unknown.Description())
	assert.Contains(t, unknown.Error(), "123456")

	assert.Equal(t, "CUDNN_STATUS_SUCCESS", cudnn.CUDNN_STATUS_SUCCESS.String())
	assert.Equal(t, "success", cudnn.CUDNN_STATUS_SUCCESS.Description())
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
		cmd.Env = append(os.Environ(), symbolChildEnv+"=1", "GOCUDA_CUDNN_LIB=libm.so.6")
		out, err := cmd.CombinedOutput()
		t.Logf("child process:\n%s", out)
		require.NoError(t, err, "child process failed")
		require.Contains(t, string(out), "--- PASS: TestSymbolErrorFromGeneratedCall")
		return
	}

	lib := cudnn.Library()
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
		assert.Equal(t, "libcudnn.so.9", se.Soname)
		assert.Equal(t, symbol, se.Symbol)
		assert.Equal(t, path, se.Path)
		assert.NotEmpty(t, se.Err, "dlerror text")
		assert.Contains(t, err.Error(), symbol)
		assert.Contains(t, err.Error(), "libcudnn.so.9")
		assert.Contains(t, err.Error(), path)
		var st cudnn.Status
		assert.False(t, errors.As(err, &st), "a missing symbol is not a Status")
	}

	ver, err := cudnn.GetVersion() // value-returning form
	assert.Zero(t, ver)
	check(err, "cudnnGetVersion")
	var h cudnn.CudnnHandle
	check(cudnn.Create(&h), "cudnnCreate")
	owned, err := cudnn.NewOwnedHandle()
	assert.Nil(t, owned)
	check(err, "cudnnCreate")
	s, err := cudnn.GetErrorString(cudnn.CUDNN_STATUS_BAD_PARAM)
	assert.Empty(t, s)
	check(err, "cudnnGetErrorString")
	check(cudnn.ActivationForward(0, 0, nil, 0, nil, nil, 0, nil), "cudnnActivationForward")
	check(cudnn.GetCTCLossDescriptorV9(0, nil, nil, nil, nil), "cudnnGetCTCLossDescriptor_v9")
	check(cudnn.BackendPopulateCudaGraph(0, 0, 0, 0), "cudnnBackendPopulateCudaGraph")
	t.Logf("e.g. %v", cudnn.GraphVersionCheck())
}
