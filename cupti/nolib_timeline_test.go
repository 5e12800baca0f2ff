package cupti_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cupti"
	"github.com/gocuda/gocuda/cupti/cuptiraw"
	"github.com/gocuda/gocuda/dl"
	"github.com/gocuda/gocuda/internal/calltrace"
)

// TestStartNoLibrary: without libcupti, Start returns the library's typed error and
// leaves the cuda package's hook unset.
func TestStartNoLibrary(t *testing.T) {
	if cuptiraw.Library().Open() == nil {
		t.Skip("libcupti present: the not-found path is tested where it is absent (CI)")
	}
	tl, err := cupti.Start()
	require.Error(t, err)
	assert.Nil(t, tl)
	assert.ErrorIs(t, err, dl.ErrLibraryNotFound)
	var le *dl.LibraryError
	require.True(t, errors.As(err, &le))
	assert.Equal(t, cuptiraw.Soname, le.Soname)
	assert.Equal(t, cuptiraw.SonameEnv, le.Env)
	assert.Nil(t, calltrace.Load())
}
