package cusolver_test

import (
	"errors"
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/cusolver"
	"github.com/gocuda/gocuda/cusolver/cusolverraw"
	"github.com/gocuda/gocuda/dl"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests need no GPU and no cuSOLVER library: they run in CI.

// TestNoLibrary: where the library (cusolver.Soname) cannot be loaded (CI), calls return its typed error.
func TestNoLibrary(t *testing.T) {
	cudatest.NoLibrary(t, cusolverraw.Library(), "cusolver", cusolverraw.Soname, cusolverraw.SonameEnv,
		func() error { var v int32; return cusolverraw.GetVersion(&v) },
		func() error { var h cusolverraw.CusolverDnHandle; return cusolverraw.DnCreate(&h) },
		func() error { _, err := cusolverraw.NewOwnedDnHandle(); return err },
	)
}

// TestNoLibraryDense: the dense operations, whose arguments are good, return the
// library's typed error too, having queued nothing and left no workspace behind.
func TestNoLibraryDense(t *testing.T) {
	if cusolverraw.Library().Open() == nil {
		t.Skip("library present: the not-found path is tested where it is absent (CI)")
	}
	_, s := cudatest.Stream(t)
	a, err := cuda.AllocFor[float64](s, 4)
	require.NoError(t, err)
	defer a.Close()
	ipiv, err := cuda.AllocFor[int32](s, 2)
	require.NoError(t, err)
	defer ipiv.Close()
	before := cudatest.DeviceBytes(t)
	for name, err := range map[string]error{
		"potrf": cusolver.Potrf[float64](s, cusolver.Lower, 2, a, 2),
		"potrs": cusolver.Potrs[float64](s, cusolver.Lower, 2, 1, a, 2, a, 2),
		"getrf": cusolver.Getrf[float64](s, 2, 2, a, 2, ipiv),
		"getrs": cusolver.Getrs[float64](s, cusolver.NoTrans, 2, 1, a, 2, ipiv, a, 2),
	} {
		require.ErrorIs(t, err, dl.ErrLibraryNotFound, name)
		var le *dl.LibraryError
		assert.True(t, errors.As(err, &le), name)
		assert.Contains(t, err.Error(), "cusolver: "+name, name)
	}
	require.NoError(t, s.Synchronize())
	assert.Equal(t, before, cudatest.DeviceBytes(t), "no workspace or info left allocated")
}

// TestStatusErrors checks the Status error values, which need no library.
func TestStatusErrors(t *testing.T) {
	cudatest.StatusErrors(t, cusolverraw.CUSOLVER_STATUS_NOT_INITIALIZED, "CUSOLVER_STATUS_NOT_INITIALIZED", 1, "not initialized",
		cusolverraw.ErrNotInitialized, cusolverraw.ErrAllocFailed, cusolverraw.Status(123456), cusolverraw.CUSOLVER_STATUS_SUCCESS, "Status")
}
