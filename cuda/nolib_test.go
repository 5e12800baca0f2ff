package cuda_test

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/dl"
)

// These tests need no GPU and no CUDA driver library: they run in CI.

// TestNoLibrary checks that, where libcuda.so.1 cannot be loaded, calling a
// binding returns a *dl.LibraryError matching dl.ErrLibraryNotFound that
// names the library, its soname and the environment variable, and does not
// panic. Where the library is present (the GPU machine) there is nothing to
// check: it skips.
func TestNoLibrary(t *testing.T) {
	lib := cuda.Library()
	assert.Equal(t, "cuda", lib.Name())
	assert.Equal(t, "libcuda.so.1", lib.Soname())
	assert.Equal(t, "GOCUDA_CUDA_LIB", lib.EnvVar())
	openErr := lib.Open()
	if openErr == nil {
		t.Skip("library present: the not-found path is tested where it is absent (CI)")
	}
	assert.False(t, lib.Loaded())

	err := cuda.Init(0)
	require.Error(t, err)
	assert.True(t, errors.Is(err, dl.ErrLibraryNotFound), "got %T %v", err, err)
	assert.False(t, errors.Is(err, dl.ErrSymbolNotFound))
	var le *dl.LibraryError
	require.True(t, errors.As(err, &le), "got %T %v", err, err)
	assert.Equal(t, "cuda", le.Library)
	assert.Equal(t, "libcuda.so.1", le.Soname)
	assert.Equal(t, "GOCUDA_CUDA_LIB", le.Env)
	if os.Getenv("GOCUDA_CUDA_LIB") == "" {
		assert.Equal(t, "libcuda.so.1", le.Tried)
		assert.False(t, le.FromEnv)
	}
	assert.NotEmpty(t, le.Err, "dlerror text")
	assert.Contains(t, err.Error(), "libcuda.so.1")
	assert.Contains(t, err.Error(), "GOCUDA_CUDA_LIB")
	var st cuda.Result
	assert.False(t, errors.As(err, &st), "a load failure is not a Result")

	// The open is tried once: every call returns the same error.
	var le0 *dl.LibraryError
	require.True(t, errors.As(openErr, &le0))
	assert.Same(t, le0, le)
	var n int32
	err2 := cuda.DeviceGetCount(&n)
	var le2 *dl.LibraryError
	require.True(t, errors.As(err2, &le2), "got %T %v", err2, err2)
	assert.Same(t, le0, le2)
}

// TestStatusErrors checks the Result error values, whose names and descriptions
// come from tables in the package and need no library.
func TestStatusErrors(t *testing.T) {
	e := cuda.CUDA_ERROR_OUT_OF_MEMORY
	assert.Contains(t, e.Error(), "CUDA_ERROR_OUT_OF_MEMORY")
	assert.Contains(t, e.Error(), "(2)")
	assert.Contains(t, e.Error(), "out of memory")
	assert.Equal(t, "CUDA_ERROR_OUT_OF_MEMORY", e.String())
	assert.Equal(t, "out of memory", e.Description())

	wrapped := fmt.Errorf("x: %w", cuda.CUDA_ERROR_OUT_OF_MEMORY)
	assert.True(t, errors.Is(wrapped, cuda.ErrOutOfMemory))
	assert.False(t, errors.Is(wrapped, cuda.ErrInvalidValue))
	var got cuda.Result
	require.True(t, errors.As(wrapped, &got))
	assert.Equal(t, cuda.CUDA_ERROR_OUT_OF_MEMORY, got)

	unknown := cuda.Result(123456)
	assert.Equal(t, "Result(123456)", unknown.String())
	assert.Equal(t, "unknown status", unknown.Description())
	assert.Contains(t, unknown.Error(), "123456")

	assert.Equal(t, "CUDA_SUCCESS", cuda.CUDA_SUCCESS.String())
	assert.Equal(t, "success", cuda.CUDA_SUCCESS.Description())
}
