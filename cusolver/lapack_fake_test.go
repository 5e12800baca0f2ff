package cusolver_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/cusolver"
	"github.com/gocuda/gocuda/cusolver/cusolverraw"
	"github.com/gocuda/gocuda/dl"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Bad arguments of the QR, SVD, eigen, least-squares and inverse operations fail
// before any CUDA call, with errors matching cuda.ErrInvalidArgument (on the fake
// driver in CI, where a call into cuSOLVER would fail with its *dl.LibraryError).
func TestArgumentChecksLapack(t *testing.T) {
	_, s := cudatest.Stream(t)
	a := cudatest.AllocFrom(t, s, make([]float64, 16))   // 4×4
	tau := cudatest.AllocFrom(t, s, make([]float64, 4))  // reflectors' scalars, singular values
	f := cudatest.AllocFrom(t, s, make([]float32, 16))   // another element type
	z := cudatest.AllocFrom(t, s, make([]complex64, 16)) // complex
	zw := cudatest.AllocFrom(t, s, make([]float32, 4))   // its real values
	short := cudatest.AllocFrom(t, s, make([]float64, 3))
	nan := &cusolver.Jacobi{Tolerance: math.NaN()}
	for name, err := range map[string]error{
		"geqrf m":                cusolver.Geqrf[float64](s, -1, 4, a, 4, tau),
		"geqrf lda":              cusolver.Geqrf[float64](s, 4, 4, a, 3, tau),
		"geqrf short tau":        cusolver.Geqrf[float64](s, 4, 4, a, 4, short),
		"geqrf tau type":         cusolver.Geqrf[float64](s, 4, 4, a, 4, zw),
		"geqrf A type":           cusolver.Geqrf[float32](s, 4, 4, a, 4, zw),
		"geqrf nil stream":       cusolver.Geqrf[float64](nil, 4, 4, a, 4, tau),
		"ormqr side":             cusolver.Ormqr[float64](s, 9, cusolver.NoTrans, 4, 4, 4, a, 4, tau, a, 4),
		"ormqr trans":            cusolver.Ormqr[float64](s, cusolver.Left, 7, 4, 4, 4, a, 4, tau, a, 4),
		"ormqr complex Trans":    cusolver.Ormqr[complex64](s, cusolver.Left, cusolver.Trans, 4, 4, 4, z, 4, z, z, 4),
		"ormqr k > m":            cusolver.Ormqr[float64](s, cusolver.Left, cusolver.NoTrans, 3, 4, 4, a, 4, tau, a, 4),
		"ormqr k > n right":      cusolver.Ormqr[float64](s, cusolver.Right, cusolver.NoTrans, 4, 3, 4, a, 4, tau, a, 4),
		"ormqr short tau":        cusolver.Ormqr[float64](s, cusolver.Left, cusolver.Trans, 4, 4, 4, a, 4, short, a, 4),
		"ormqr ldc":              cusolver.Ormqr[float64](s, cusolver.Left, cusolver.Trans, 4, 4, 4, a, 4, tau, a, 2),
		"orgqr n > m":            cusolver.Orgqr[float64](s, 3, 4, 2, a, 4, tau),
		"orgqr k > n":            cusolver.Orgqr[float64](s, 4, 2, 3, a, 4, tau),
		"orgqr short":            cusolver.Orgqr[float64](s, 5, 4, 4, a, 5, tau),
		"gels m < n":             cusolver.Gels[float64](s, 3, 4, 1, a, 4, a, 4),
		"gels short B":           cusolver.Gels[float64](s, 4, 4, 5, a, 4, tau, 4),
		"gels nrhs":              cusolver.Gels[float64](s, 4, 4, -1, a, 4, a, 4),
		"gels type":              cusolver.Gels[complex128](s, 2, 2, 1, f, 2, f, 2),
		"gels nil stream":        cusolver.Gels[float64](nil, 4, 4, 1, a, 4, tau, 4),
		"inverse short inv":      cusolver.Inverse[float64](s, 4, a, 4, short),
		"inverse lda":            cusolver.Inverse[float64](s, 4, a, 3, a),
		"inverse nil":            cusolver.Inverse[float64](s, 4, a, 4, nil),
		"inverse nil stream":     cusolver.Inverse[float64](nil, 2, a, 2, tau),
		"gesvd job":              cusolver.Gesvd[float64](s, 'X', cusolver.SVDNone, 4, 4, a, 4, tau, nil, 4, nil, 4),
		"gesvd m < n":            cusolver.Gesvd[float64](s, cusolver.SVDNone, cusolver.SVDNone, 2, 4, a, 2, tau, nil, 1, nil, 1),
		"gesvd S type":           cusolver.Gesvd[complex64](s, cusolver.SVDNone, cusolver.SVDNone, 4, 4, z, 4, tau, nil, 1, nil, 1),
		"gesvd short S":          cusolver.Gesvd[float64](s, cusolver.SVDNone, cusolver.SVDNone, 4, 4, a, 4, short, nil, 1, nil, 1),
		"gesvd nil U":            cusolver.Gesvd[float64](s, cusolver.SVDAll, cusolver.SVDNone, 4, 4, a, 4, tau, nil, 4, nil, 1),
		"gesvd ldvt":             cusolver.Gesvd[float64](s, cusolver.SVDNone, cusolver.SVDThin, 4, 4, a, 4, tau, nil, 1, a, 3),
		"gesvdj mode":            cusolver.GesvdjBatched[float64](s, 5, 2, 2, a, 2, tau, a, 2, a, 2, 1, nil),
		"gesvdj too big":         cusolver.GesvdjBatched[float64](s, cusolver.NoVectors, 33, 1, a, 33, tau, nil, 1, nil, 1, 1, nil),
		"gesvdj batch":           cusolver.GesvdjBatched[float64](s, cusolver.NoVectors, 2, 2, a, 2, tau, nil, 1, nil, 1, 0, nil),
		"gesvdj short A":         cusolver.GesvdjBatched[float64](s, cusolver.NoVectors, 2, 2, a, 2, tau, nil, 1, nil, 1, 5, nil),
		"gesvdj short S":         cusolver.GesvdjBatched[float64](s, cusolver.NoVectors, 2, 2, a, 2, short, nil, 1, nil, 1, 2, nil),
		"gesvdj short V":         cusolver.GesvdjBatched[float64](s, cusolver.Vectors, 2, 2, a, 2, tau, a, 2, short, 2, 2, nil),
		"gesvdj tolerance":       cusolver.GesvdjBatched[float64](s, cusolver.NoVectors, 2, 2, a, 2, tau, nil, 1, nil, 1, 1, nan),
		"gesvdj sweeps":          cusolver.GesvdjBatched[float64](s, cusolver.NoVectors, 2, 2, a, 2, tau, nil, 1, nil, 1, 1, &cusolver.Jacobi{MaxSweeps: -1}),
		"gesvdj nil stream":      cusolver.GesvdjBatched[float64](nil, cusolver.NoVectors, 2, 2, a, 2, tau, nil, 1, nil, 1, 1, nil),
		"syevd mode":             cusolver.Syevd[float64](s, 3, cusolver.Lower, 4, a, 4, tau),
		"syevd fill":             cusolver.Syevd[float64](s, cusolver.Vectors, 9, 4, a, 4, tau),
		"syevd short W":          cusolver.Syevd[float64](s, cusolver.Vectors, cusolver.Lower, 4, a, 4, short),
		"syevd W type":           cusolver.Syevd[complex64](s, cusolver.Vectors, cusolver.Lower, 4, z, 4, z),
		"syevd lda":              cusolver.Syevd[float64](s, cusolver.Vectors, cusolver.Lower, 4, a, 2, tau),
		"syevj too big":          cusolver.SyevjBatched[float64](s, cusolver.Vectors, cusolver.Lower, 33, a, 33, tau, 1, nil),
		"syevj short A":          cusolver.SyevjBatched[float64](s, cusolver.Vectors, cusolver.Lower, 2, a, 2, tau, 5, nil),
		"syevj short W":          cusolver.SyevjBatched[float64](s, cusolver.Vectors, cusolver.Lower, 2, a, 2, short, 2, nil),
		"syevj batch":            cusolver.SyevjBatched[float64](s, cusolver.Vectors, cusolver.Lower, 2, a, 2, tau, -1, nil),
		"syevj tolerance":        cusolver.SyevjBatched[float64](s, cusolver.Vectors, cusolver.Lower, 2, a, 2, tau, 1, &cusolver.Jacobi{Tolerance: math.Inf(1)}),
		"syevj huge batch":       cusolver.SyevjBatched[float64](s, cusolver.Vectors, cusolver.Lower, 2, a, 2, tau, math.MaxInt32+1, nil),
		"syevj fill":             cusolver.SyevjBatched[float64](s, cusolver.Vectors, 5, 2, a, 2, tau, 1, nil),
		"syevd complex on float": cusolver.Syevd[complex128](s, cusolver.Vectors, cusolver.Lower, 2, a, 2, tau),
	} {
		require.ErrorIs(t, err, cuda.ErrInvalidArgument, name)
		assert.NotErrorIs(t, err, dl.ErrLibraryNotFound, name)
		assert.Contains(t, err.Error(), "cusolver: ", name)
	}
}

// TestNoLibraryLapack: the new operations, whose arguments are good, return the
// library's typed error where cuSOLVER is missing, having queued nothing and left
// no workspace, info, tau, pivots or identity behind.
func TestNoLibraryLapack(t *testing.T) {
	if cusolverraw.Library().Open() == nil {
		t.Skip("library present: the not-found path is tested where it is absent (CI)")
	}
	_, s := cudatest.Stream(t)
	a := cudatest.AllocFrom(t, s, make([]float64, 4))
	b := cudatest.AllocFrom(t, s, make([]float64, 4))
	v := cudatest.AllocFrom(t, s, make([]float64, 2))
	z := cudatest.AllocFrom(t, s, make([]complex128, 4))
	require.NoError(t, s.Synchronize())
	before := cudatest.DeviceBytes(t)
	for name, err := range map[string]error{
		"geqrf":         cusolver.Geqrf[float64](s, 2, 2, a, 2, v),
		"ormqr":         cusolver.Ormqr[float64](s, cusolver.Left, cusolver.Trans, 2, 2, 2, a, 2, v, b, 2),
		"orgqr":         cusolver.Orgqr[float64](s, 2, 2, 2, a, 2, v),
		"gels":          cusolver.Gels[float64](s, 2, 2, 2, a, 2, b, 2),
		"inverse":       cusolver.Inverse[float64](s, 2, a, 2, b),
		"gesvd":         cusolver.Gesvd[complex128](s, cusolver.SVDThin, cusolver.SVDThin, 2, 2, z, 2, v, z, 2, z, 2),
		"gesvdjBatched": cusolver.GesvdjBatched[float64](s, cusolver.NoVectors, 1, 2, a, 1, v, nil, 1, nil, 1, 2, nil),
		"syevd":         cusolver.Syevd[complex128](s, cusolver.Vectors, cusolver.Upper, 2, z, 2, v),
		"syevjBatched":  cusolver.SyevjBatched[float64](s, cusolver.Vectors, cusolver.Lower, 1, a, 1, v, 2, &cusolver.Jacobi{MaxSweeps: 3}),
	} {
		require.ErrorIs(t, err, dl.ErrLibraryNotFound, name)
		var le *dl.LibraryError
		assert.True(t, errors.As(err, &le), name)
		assert.Contains(t, err.Error(), "cusolver: ", name)
	}
	require.NoError(t, s.Synchronize())
	assert.Equal(t, before, cudatest.DeviceBytes(t), "nothing left allocated")
}

// The infos of the new operations: no convergence, and a batched operation's
// matrix index in the text.
func TestInfoErrorLapack(t *testing.T) {
	for _, c := range []struct {
		e       cusolver.InfoError
		matches error
		text    string
	}{
		{cusolver.InfoError{Op: "gesvd", Info: 2}, cusolver.ErrNoConvergence, "2 superdiagonals of the bidiagonal form did not converge"},
		{cusolver.InfoError{Op: "syevd", Info: 1}, cusolver.ErrNoConvergence, "1 off-diagonal elements of the tridiagonal form did not converge"},
		{cusolver.InfoError{Op: "syevjBatched", Info: 5, Matrix: 3}, cusolver.ErrNoConvergence, "syevjBatched: matrix 3 of the batch: the Jacobi method did not converge"},
		{cusolver.InfoError{Op: "gesvdjBatched", Info: -4, Matrix: 0}, cuda.ErrInvalidArgument, "gesvdjBatched: matrix 0 of the batch: parameter 4 had an illegal value"},
		{cusolver.InfoError{Op: "geqrf", Info: -2}, cuda.ErrInvalidArgument, "geqrf: parameter 2 had an illegal value"},
		{cusolver.InfoError{Op: "ormqr", Info: 1}, nil, "ormqr: info 1"},
	} {
		err := fmt.Errorf("solving: %w", &c.e)
		if c.matches != nil {
			assert.ErrorIs(t, err, c.matches, "%+v", c.e)
		}
		assert.Contains(t, err.Error(), c.text)
		for _, other := range []error{cusolver.ErrNotPositiveDefinite, cusolver.ErrSingular, cusolver.ErrNoConvergence, cuda.ErrInvalidArgument} {
			if other != c.matches {
				assert.NotErrorIs(t, err, other, "%+v", c.e)
			}
		}
	}
}
