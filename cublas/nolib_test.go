package cublas_test

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cublas"
	"github.com/gocuda/gocuda/dl"
)

// These tests need no GPU and no cuBLAS library: they run in CI.

// TestNoLibrary checks that, where libcublas.so.13 cannot be loaded, calling a
// binding returns a *dl.LibraryError matching dl.ErrLibraryNotFound that
// names the library, its soname and the environment variable, and does not
// panic. Where the library is present (the GPU machine) there is nothing to
// check: it skips.
func TestNoLibrary(t *testing.T) {
	lib := cublas.Library()
	assert.Equal(t, "cublas", lib.Name())
	assert.Equal(t, "libcublas.so.13", lib.Soname())
	assert.Equal(t, "GOCUDA_CUBLAS_LIB", lib.EnvVar())
	openErr := lib.Open()
	if openErr == nil {
		t.Skip("library present: the not-found path is tested where it is absent (CI)")
	}
	assert.False(t, lib.Loaded())

	var h cublas.CublasHandle
	err := cublas.Create(&h)
	require.Error(t, err)
	assert.True(t, errors.Is(err, dl.ErrLibraryNotFound), "got %T %v", err, err)
	assert.False(t, errors.Is(err, dl.ErrSymbolNotFound))
	var le *dl.LibraryError
	require.True(t, errors.As(err, &le), "got %T %v", err, err)
	assert.Equal(t, "cublas", le.Library)
	assert.Equal(t, "libcublas.so.13", le.Soname)
	assert.Equal(t, "GOCUDA_CUBLAS_LIB", le.Env)
	if os.Getenv("GOCUDA_CUBLAS_LIB") == "" {
		assert.Equal(t, "libcublas.so.13", le.Tried)
		assert.False(t, le.FromEnv)
	}
	assert.NotEmpty(t, le.Err, "dlerror text")
	assert.Contains(t, err.Error(), "libcublas.so.13")
	assert.Contains(t, err.Error(), "GOCUDA_CUBLAS_LIB")
	var st cublas.Status
	assert.False(t, errors.As(err, &st), "a load failure is not a Status")

	// The open is tried once: every call returns the same error.
	var le0 *dl.LibraryError
	require.True(t, errors.As(openErr, &le0))
	assert.Same(t, le0, le)
	owned, err2 := cublas.NewOwnedHandle()
	assert.Nil(t, owned)
	var le2 *dl.LibraryError
	require.True(t, errors.As(err2, &le2), "got %T %v", err2, err2)
	assert.Same(t, le0, le2)
}

// TestStatusErrors checks the Status error values, whose names and descriptions
// come from tables in the package and need no library.
func TestStatusErrors(t *testing.T) {
	e := cublas.CUBLAS_STATUS_NOT_INITIALIZED
	assert.Contains(t, e.Error(), "CUBLAS_STATUS_NOT_INITIALIZED")
	assert.Contains(t, e.Error(), "(1)")
	assert.Contains(t, e.Error(), "not initialized")
	assert.Equal(t, "CUBLAS_STATUS_NOT_INITIALIZED", e.String())
	assert.Equal(t, "not initialized", e.Description())

	wrapped := fmt.Errorf("x: %w", cublas.CUBLAS_STATUS_NOT_INITIALIZED)
	assert.True(t, errors.Is(wrapped, cublas.ErrNotInitialized))
	assert.False(t, errors.Is(wrapped, cublas.ErrAllocFailed))
	var got cublas.Status
	require.True(t, errors.As(wrapped, &got))
	assert.Equal(t, cublas.CUBLAS_STATUS_NOT_INITIALIZED, got)

	unknown := cublas.Status(123456)
	assert.Equal(t, "Status(123456)", unknown.String())
	assert.Equal(t, "unknown status", unknown.Description())
	assert.Contains(t, unknown.Error(), "123456")

	assert.Equal(t, "CUBLAS_STATUS_SUCCESS", cublas.CUBLAS_STATUS_SUCCESS.String())
	assert.Equal(t, "success", cublas.CUBLAS_STATUS_SUCCESS.Description())
}
