package cudatest

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/gocuda/gocuda/dl"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// NoLibrary checks that, where lib cannot be loaded, each call fails with the same
// *dl.LibraryError (matching dl.ErrLibraryNotFound) naming the library, its soname
// and its environment variable, and that nothing panics. Where the library is
// present (the GPU machine) there is nothing to check: it skips.
func NoLibrary(t *testing.T, lib *dl.Library, name, soname, env string, calls ...func() error) {
	t.Helper()
	assert.Equal(t, name, lib.Name())
	assert.Equal(t, soname, lib.Soname())
	assert.Equal(t, env, lib.EnvVar())
	openErr := lib.Open()
	if openErr == nil {
		t.Skip("library present: the not-found path is tested where it is absent (CI)")
	}
	assert.False(t, lib.Loaded())
	var first *dl.LibraryError
	require.True(t, errors.As(openErr, &first), "got %T %v", openErr, openErr)
	require.NotEmpty(t, calls)
	for i, call := range calls {
		err := call()
		require.Error(t, err, "call %d", i)
		assert.ErrorIs(t, err, dl.ErrLibraryNotFound)
		assert.NotErrorIs(t, err, dl.ErrSymbolNotFound)
		var le *dl.LibraryError
		require.True(t, errors.As(err, &le), "call %d: got %T %v", i, err, err)
		assert.Same(t, first, le, "the open is tried once: every call returns the same error")
		assert.Equal(t, name, le.Library)
		assert.Equal(t, soname, le.Soname)
		assert.Equal(t, env, le.Env)
		if os.Getenv(env) == "" {
			assert.Equal(t, soname, le.Tried)
			assert.False(t, le.FromEnv)
		}
		assert.NotEmpty(t, le.Err, "dlerror text")
		assert.Contains(t, err.Error(), soname)
		assert.Contains(t, err.Error(), env)
	}
}

// Status is what every library's generated status type provides.
type Status interface {
	error
	fmt.Stringer
	Description() string
}

// StatusErrors checks a failing status value e (C name cname, number code, short
// description desc), its sentinel, another sentinel it must not match, the type's
// text for an unknown number, and that success is described as such. The table of
// names needs no library.
func StatusErrors[S Status](t *testing.T, e S, cname string, code int, desc string, sentinel, other error, unknown, success S, typeName string) {
	t.Helper()
	assert.Equal(t, cname, e.String())
	assert.Equal(t, desc, e.Description())
	assert.Contains(t, e.Error(), cname)
	assert.Contains(t, e.Error(), "("+strconv.Itoa(code)+")")
	assert.Contains(t, e.Error(), desc)

	wrapped := fmt.Errorf("x: %w", e)
	assert.ErrorIs(t, wrapped, sentinel)
	assert.NotErrorIs(t, wrapped, other)
	var got S
	require.True(t, errors.As(wrapped, &got))
	assert.Equal(t, e, got)

	assert.Regexp(t, `^`+typeName+`\(\d+\)$`, unknown.String())
	assert.Equal(t, "unknown status", unknown.Description())
	assert.Equal(t, "success", success.Description())
}
