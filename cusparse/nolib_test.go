package cusparse_test

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cusparse"
	"github.com/gocuda/gocuda/dl"
)

// These tests need no GPU and no cuSPARSE library: they run in CI.

// TestNoLibrary checks that, where libcusparse.so.12 cannot be loaded, calling a
// binding returns a *dl.LibraryError matching dl.ErrLibraryNotFound that
// names the library, its soname and the environment variable, and does not
// panic. Where the library is present (the GPU machine) there is nothing to
// check: it skips.
func TestNoLibrary(t *testing.T) {
	lib := cusparse.Library()
	assert.Equal(t, "cusparse", lib.Name())
	assert.Equal(t, "libcusparse.so.12", lib.Soname())
	assert.Equal(t, "GOCUDA_CUSPARSE_LIB", lib.EnvVar())
	openErr := lib.Open()
	if openErr == nil {
		t.Skip("library present: the not-found path is tested where it is absent (CI)")
	}
	assert.False(t, lib.Loaded())

	var h cusparse.CusparseHandle
	err := cusparse.Create(&h)
	require.Error(t, err)
	assert.True(t, errors.Is(err, dl.ErrLibraryNotFound), "got %T %v", err, err)
	assert.False(t, errors.Is(err, dl.ErrSymbolNotFound))
	var le *dl.LibraryError
	require.True(t, errors.As(err, &le), "got %T %v", err, err)
	assert.Equal(t, "cusparse", le.Library)
	assert.Equal(t, "libcusparse.so.12", le.Soname)
	assert.Equal(t, "GOCUDA_CUSPARSE_LIB", le.Env)
	if os.Getenv("GOCUDA_CUSPARSE_LIB") == "" {
		assert.Equal(t, "libcusparse.so.12", le.Tried)
		assert.False(t, le.FromEnv)
	}
	assert.NotEmpty(t, le.Err, "dlerror text")
	assert.Contains(t, err.Error(), "libcusparse.so.12")
	assert.Contains(t, err.Error(), "GOCUDA_CUSPARSE_LIB")
	var st cusparse.Status
	assert.False(t, errors.As(err, &st), "a load failure is not a Status")

	// The open is tried once: every call returns the same error.
	var le0 *dl.LibraryError
	require.True(t, errors.As(openErr, &le0))
	assert.Same(t, le0, le)
	owned, err2 := cusparse.NewOwnedHandle()
	assert.Nil(t, owned)
	var le2 *dl.LibraryError
	require.True(t, errors.As(err2, &le2), "got %T %v", err2, err2)
	assert.Same(t, le0, le2)
}

// TestStatusErrors checks the Status error values, whose names and descriptions
// come from tables in the package and need no library.
func TestStatusErrors(t *testing.T) {
	e := cusparse.CUSPARSE_STATUS_NOT_INITIALIZED
	assert.Contains(t, e.Error(), "CUSPARSE_STATUS_NOT_INITIALIZED")
	assert.Contains(t, e.Error(), "(1)")
	assert.Contains(t, e.Error(), "not initialized")
	assert.Equal(t, "CUSPARSE_STATUS_NOT_INITIALIZED", e.String())
	assert.Equal(t, "not initialized", e.Description())

	wrapped := fmt.Errorf("x: %w", cusparse.CUSPARSE_STATUS_NOT_INITIALIZED)
	assert.True(t, errors.Is(wrapped, cusparse.ErrNotInitialized))
	assert.False(t, errors.Is(wrapped, cusparse.ErrAllocFailed))
	var got cusparse.Status
	require.True(t, errors.As(wrapped, &got))
	assert.Equal(t, cusparse.CUSPARSE_STATUS_NOT_INITIALIZED, got)

	unknown := cusparse.Status(123456)
	assert.Equal(t, "Status(123456)", unknown.String())
	assert.Equal(t, "unknown status", unknown.Description())
	assert.Contains(t, unknown.Error(), "123456")

	assert.Equal(t, "CUSPARSE_STATUS_SUCCESS", cusparse.CUSPARSE_STATUS_SUCCESS.String())
	assert.Equal(t, "success", cusparse.CUSPARSE_STATUS_SUCCESS.Description())
}
