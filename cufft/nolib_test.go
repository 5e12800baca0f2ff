package cufft_test

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cufft"
	"github.com/gocuda/gocuda/dl"
)

// These tests need no GPU and no cuFFT library: they run in CI.

// TestNoLibrary checks that, where libcufft.so.12 cannot be loaded, calling a
// binding returns a *dl.LibraryError matching dl.ErrLibraryNotFound that
// names the library, its soname and the environment variable, and does not
// panic. Where the library is present (the GPU machine) there is nothing to
// check: it skips.
func TestNoLibrary(t *testing.T) {
	lib := cufft.Library()
	assert.Equal(t, "cufft", lib.Name())
	assert.Equal(t, "libcufft.so.12", lib.Soname())
	assert.Equal(t, "GOCUDA_CUFFT_LIB", lib.EnvVar())
	openErr := lib.Open()
	if openErr == nil {
		t.Skip("library present: the not-found path is tested where it is absent (CI)")
	}
	assert.False(t, lib.Loaded())

	var v int32
	err := cufft.GetVersion(&v)
	require.Error(t, err)
	assert.True(t, errors.Is(err, dl.ErrLibraryNotFound), "got %T %v", err, err)
	assert.False(t, errors.Is(err, dl.ErrSymbolNotFound))
	var le *dl.LibraryError
	require.True(t, errors.As(err, &le), "got %T %v", err, err)
	assert.Equal(t, "cufft", le.Library)
	assert.Equal(t, "libcufft.so.12", le.Soname)
	assert.Equal(t, "GOCUDA_CUFFT_LIB", le.Env)
	if os.Getenv("GOCUDA_CUFFT_LIB") == "" {
		assert.Equal(t, "libcufft.so.12", le.Tried)
		assert.False(t, le.FromEnv)
	}
	assert.NotEmpty(t, le.Err, "dlerror text")
	assert.Contains(t, err.Error(), "libcufft.so.12")
	assert.Contains(t, err.Error(), "GOCUDA_CUFFT_LIB")
	var st cufft.Result
	assert.False(t, errors.As(err, &st), "a load failure is not a Result")

	// The open is tried once: every call returns the same error.
	var le0 *dl.LibraryError
	require.True(t, errors.As(openErr, &le0))
	assert.Same(t, le0, le)
	owned, err2 := cufft.NewOwnedPlan()
	assert.Nil(t, owned)
	var le2 *dl.LibraryError
	require.True(t, errors.As(err2, &le2), "got %T %v", err2, err2)
	assert.Same(t, le0, le2)
}

// TestStatusErrors checks the Result error values, whose names and descriptions
// come from tables in the package and need no library.
func TestStatusErrors(t *testing.T) {
	e := cufft.CUFFT_INVALID_PLAN
	assert.Contains(t, e.Error(), "CUFFT_INVALID_PLAN")
	assert.Contains(t, e.Error(), "(1)")
	assert.Contains(t, e.Error(), "invalid plan")
	assert.Equal(t, "CUFFT_INVALID_PLAN", e.String())
	assert.Equal(t, "invalid plan", e.Description())

	wrapped := fmt.Errorf("x: %w", cufft.CUFFT_INVALID_PLAN)
	assert.True(t, errors.Is(wrapped, cufft.ErrInvalidPlan))
	assert.False(t, errors.Is(wrapped, cufft.ErrAllocFailed))
	var got cufft.Result
	require.True(t, errors.As(wrapped, &got))
	assert.Equal(t, cufft.CUFFT_INVALID_PLAN, got)

	unknown := cufft.Result(123456)
	assert.Equal(t, "Result(123456)", unknown.String())
	assert.Equal(t, "unknown status", unknown.Description())
	assert.Contains(t, unknown.Error(), "123456")

	assert.Equal(t, "CUFFT_SUCCESS", cufft.CUFFT_SUCCESS.String())
	assert.Equal(t, "success", cufft.CUFFT_SUCCESS.Description())
}
