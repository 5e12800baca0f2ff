package cusolver_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/cusolver"
	"github.com/gocuda/gocuda/cusolver/cusolverraw"
	"github.com/gocuda/gocuda/dl"
	"github.com/gocuda/gocuda/resource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Bad arguments fail before any CUDA call (on the fake driver, in CI, where a call
// into cuSOLVER would fail with its *dl.LibraryError instead).
func TestArgumentChecks(t *testing.T) {
	_, s := cudatest.Stream(t)
	a := cudatest.AllocFrom(t, s, make([]float64, 16))  // 4×4
	f := cudatest.AllocFrom(t, s, make([]float32, 16))  // another element type
	ip := cudatest.AllocFrom(t, s, make([]int32, 4))    // pivots
	ipf := cudatest.AllocFrom(t, s, make([]float32, 4)) // pivots of the wrong type
	short := cudatest.AllocFrom(t, s, make([]int32, 3))
	untyped, err := s.Context().Alloc(s, 16*8)
	require.NoError(t, err)
	defer untyped.Close()
	for name, err := range map[string]error{
		"potrf fill":           cusolver.Potrf[float64](s, 7, 4, a, 4),
		"potrf negative n":     cusolver.Potrf[float64](s, cusolver.Lower, -1, a, 4),
		"potrf lda":            cusolver.Potrf[float64](s, cusolver.Lower, 4, a, 3),
		"potrf short":          cusolver.Potrf[float64](s, cusolver.Lower, 5, a, 5),
		"potrf type":           cusolver.Potrf[float64](s, cusolver.Lower, 4, f, 4),
		"potrf nil":            cusolver.Potrf[float64](s, cusolver.Lower, 4, nil, 4),
		"potrf huge lda":       cusolver.Potrf[float64](s, cusolver.Lower, 1, a, math.MaxInt32+1),
		"potrf nil stream":     cusolver.Potrf[float64](nil, cusolver.Lower, 4, a, 4),
		"potrs fill":           cusolver.Potrs[float64](s, 7, 4, 1, a, 4, a, 4),
		"potrs nrhs":           cusolver.Potrs[float64](s, cusolver.Lower, 4, -1, a, 4, a, 4),
		"potrs ldb":            cusolver.Potrs[float64](s, cusolver.Lower, 4, 1, a, 4, a, 2),
		"potrs short B":        cusolver.Potrs[float64](s, cusolver.Lower, 4, 5, a, 4, a, 4),
		"potrs B type":         cusolver.Potrs[float64](s, cusolver.Lower, 4, 1, a, 4, f, 4),
		"getrf m":              cusolver.Getrf[float64](s, -2, 4, a, 4, ip),
		"getrf lda":            cusolver.Getrf[float64](s, 4, 4, a, 2, ip),
		"getrf short pivots":   cusolver.Getrf[float64](s, 4, 4, a, 4, short),
		"getrf pivot type":     cusolver.Getrf[float64](s, 4, 4, a, 4, ipf),
		"getrf nil pivots":     cusolver.Getrf[float64](s, 4, 4, a, 4, nil),
		"getrf type":           cusolver.Getrf[float32](s, 4, 4, a, 4, ip),
		"getrs trans":          cusolver.Getrs[float64](s, 9, 4, 1, a, 4, ip, a, 4),
		"getrs short pivots":   cusolver.Getrs[float64](s, cusolver.NoTrans, 4, 1, a, 4, short, a, 4),
		"getrs ldb":            cusolver.Getrs[float64](s, cusolver.NoTrans, 4, 1, a, 4, ip, a, 3),
		"getrs complex on f64": cusolver.Getrs[complex128](s, cusolver.NoTrans, 4, 1, a, 4, ip, a, 4),
		"untyped too small":    cusolver.Getrf[complex128](s, 4, 4, untyped, 4, ip),
	} {
		require.ErrorIs(t, err, cuda.ErrInvalidArgument, name)
		assert.NotErrorIs(t, err, dl.ErrLibraryNotFound, name)
		assert.Contains(t, err.Error(), "cusolver: ", name)
	}
	// Untyped memory of the right size passes the checks (a zero matrix: on a GPU,
	// Getrf reports it singular; in CI, cuSOLVER is missing).
	require.NoError(t, untyped.Memset8Async(s, 0))
	err = cusolver.Getrf[float64](s, 4, 4, untyped, 4, ip)
	assert.NotErrorIs(t, err, cuda.ErrInvalidArgument)
	assert.Error(t, err)
}

// A closed stream or closed memory fails with cuda.ErrClosed, having run nothing on
// the GPU. (cuda.CheckEnqueue does not see closed streams and memory, which Enqueue
// then reports: without cuSOLVER, the handle's creation fails first.)
func TestClosedOperands(t *testing.T) {
	ctx, s := cudatest.Stream(t)
	cudatest.RequireLibrary(t, cusolverraw.Library())
	a := cudatest.AllocFrom(t, s, make([]float64, 4))
	ip := cudatest.AllocFrom(t, s, make([]int32, 2))
	closed, err := cuda.AllocFor[float64](s, 4)
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	s2, err := ctx.NewStream()
	require.NoError(t, err)
	require.NoError(t, s2.Close())
	for name, err := range map[string]error{
		"closed stream": cusolver.Getrf[float64](s2, 2, 2, a, 2, ip),
		"closed A":      cusolver.Potrf[float64](s, cusolver.Lower, 2, closed, 2),
		"closed B":      cusolver.Getrs[float64](s, cusolver.NoTrans, 2, 1, a, 2, ip, closed, 2),
	} {
		require.ErrorIs(t, err, cuda.ErrClosed, name)
	}
}

// InfoError's text and the sentinels it matches, by operation and sign.
func TestInfoError(t *testing.T) {
	for _, c := range []struct {
		e       cusolver.InfoError
		matches error
		text    string
	}{
		{cusolver.InfoError{Op: "potrf", Info: 3}, cusolver.ErrNotPositiveDefinite, "leading minor of order 3 is not positive definite"},
		{cusolver.InfoError{Op: "getrf", Info: 2}, cusolver.ErrSingular, "U(2,2) is exactly zero"},
		{cusolver.InfoError{Op: "getrs", Info: -4}, cuda.ErrInvalidArgument, "parameter 4 had an illegal value"},
		{cusolver.InfoError{Op: "potrf", Info: -1}, cuda.ErrInvalidArgument, "parameter 1 had an illegal value"},
	} {
		err := fmt.Errorf("solving: %w", &c.e)
		assert.ErrorIs(t, err, c.matches, "%+v", c.e)
		assert.Contains(t, err.Error(), c.text)
		assert.Contains(t, err.Error(), "cusolver: "+c.e.Op)
		for _, other := range []error{cusolver.ErrNotPositiveDefinite, cusolver.ErrSingular, cuda.ErrInvalidArgument} {
			if other != c.matches {
				assert.NotErrorIs(t, err, other, "%+v", c.e)
			}
		}
		var got *cusolver.InfoError
		require.True(t, errors.As(err, &got))
		assert.Equal(t, c.e, *got)
	}
}

// A nil Info: Close reports the second-Close error, Check an invalid argument.
func TestNilInfo(t *testing.T) {
	var i *cusolver.Info
	err := i.Close()
	assert.ErrorIs(t, err, cuda.ErrClosed)
	assert.ErrorIs(t, err, resource.ErrReleased)
	assert.ErrorIs(t, i.Check(), cuda.ErrInvalidArgument)
}

// scalar converts a complex128 test value to T (the real part for real types).
func scalar[T cusolver.Scalar](v complex128) T {
	var z T
	switch any(z).(type) {
	case float32:
		return any(float32(real(v))).(T)
	case float64:
		return any(real(v)).(T)
	case complex64:
		return any(complex64(v)).(T)
	default:
		return any(v).(T)
	}
}

// wide converts a T back to complex128.
func wide[T cusolver.Scalar](v T) complex128 {
	switch x := any(v).(type) {
	case float32:
		return complex(float64(x), 0)
	case float64:
		return complex(x, 0)
	case complex64:
		return complex128(x)
	default:
		return x.(complex128)
	}
}

func isComplex[T cusolver.Scalar]() bool {
	switch any(*new(T)).(type) {
	case complex64, complex128:
		return true
	}
	return false
}

// tolerance is the bound on the relative residual for T's precision.
func tolerance[T cusolver.Scalar]() float64 {
	switch any(*new(T)).(type) {
	case float32, complex64:
		return 1e-4
	}
	return 1e-11
}

// random returns a value with real (and, for complex T, imaginary) parts in [-1, 1).
func random[T cusolver.Scalar](r *rand.Rand) complex128 {
	if isComplex[T]() {
		return complex(2*r.Float64()-1, 2*r.Float64()-1)
	}
	return complex(2*r.Float64()-1, 0)
}

// randomSPD returns an n×n Hermitian positive definite matrix (column-major, leading
// dimension lda): M·Mᴴ + n·I, rounded to T.
func randomSPD[T cusolver.Scalar](r *rand.Rand, n, lda int) []complex128 {
	m := make([]complex128, n*n)
	for i := range m {
		m[i] = random[T](r)
	}
	a := make([]complex128, lda*n)
	for j := range n {
		for i := range n {
			var s complex128
			for k := range n {
				s += m[i+k*n] * cmplx.Conj(m[j+k*n])
			}
			if i == j {
				s = complex(real(s)+float64(n), 0)
			}
			a[i+j*lda] = wide(scalar[T](s))
		}
	}
	return a
}

// randomMatrix returns an r×c matrix with leading dimension ld, rounded to T.
func randomMatrix[T cusolver.Scalar](r *rand.Rand, rows, cols, ld int) []complex128 {
	a := make([]complex128, ld*cols)
	for j := range cols {
		for i := range rows {
			a[i+j*ld] = wide(scalar[T](random[T](r)))
		}
	}
	return a
}

func toT[T cusolver.Scalar](v []complex128) []T {
	out := make([]T, len(v))
	for i, x := range v {
		out[i] = scalar[T](x)
	}
	return out
}

// residual returns ‖op(A)·X − B‖_F / (‖A‖_F·‖X‖_F + ‖B‖_F) for n×n A and n×nrhs X
// and B (column-major), computed in float64: the solve's backward error.
func residual(trans cublasraw.CublasOperation, n, nrhs int, a []complex128, lda int, x []complex128, ldx int, b []complex128, ldb int) float64 {
	var num, na, nx, nb float64
	for j := range nrhs {
		for i := range n {
			var s complex128
			for k := range n {
				var aik complex128
				switch trans {
				case cusolver.NoTrans:
					aik = a[i+k*lda]
				case cusolver.Trans:
					aik = a[k+i*lda]
				default:
					aik = cmplx.Conj(a[k+i*lda])
				}
				s += aik * x[k+j*ldx]
			}
			d := cmplx.Abs(s - b[i+j*ldb])
			num += d * d
			nx += math.Pow(cmplx.Abs(x[i+j*ldx]), 2)
			nb += math.Pow(cmplx.Abs(b[i+j*ldb]), 2)
		}
	}
	for j := range n {
		for i := range n {
			na += math.Pow(cmplx.Abs(a[i+j*lda]), 2)
		}
	}
	return math.Sqrt(num) / (math.Sqrt(na)*math.Sqrt(nx) + math.Sqrt(nb))
}

// download copies n elements of T back and widens them.
func download[T cusolver.Scalar](t *testing.T, b *cuda.DeviceBuffer, n int) []complex128 {
	t.Helper()
	h := make([]T, n)
	require.NoError(t, cuda.CopyFromDevice(h, b))
	out := make([]complex128, n)
	for i, v := range h {
		out[i] = wide(v)
	}
	return out
}

// testCholesky solves a random Hermitian positive definite system with Potrf and
// Potrs, in both triangles, with padded leading dimensions, and checks the residual
// against the matrix in float64. The triangle Potrf does not read holds garbage.
func testCholesky[T cusolver.Scalar](t *testing.T) {
	_, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cusolverraw.Library())
	r := cudatest.Rand(21)
	const n, nrhs, lda, ldb = 67, 5, 70, 69
	for _, uplo := range []cublasraw.CublasFillMode{cusolver.Lower, cusolver.Upper} {
		a := randomSPD[T](r, n, lda)
		host := append([]complex128(nil), a...)
		for j := range n { // garbage in the triangle that is not referenced
			for i := range n {
				if (uplo == cusolver.Lower && i < j) || (uplo == cusolver.Upper && i > j) {
					host[i+j*lda] = wide(scalar[T](complex(1e6, 0)))
				}
			}
		}
		b := randomMatrix[T](r, n, nrhs, ldb)
		da, db := cudatest.AllocFrom(t, s, toT[T](host)), cudatest.AllocFrom(t, s, toT[T](b))
		require.NoError(t, cusolver.Potrf[T](s, uplo, n, da, lda), "uplo %v", uplo)
		require.NoError(t, cusolver.Potrs[T](s, uplo, n, nrhs, da, lda, db, ldb), "uplo %v", uplo)
		x := download[T](t, db, ldb*nrhs)
		res := residual(cusolver.NoTrans, n, nrhs, a, lda, x, ldb, b, ldb)
		t.Logf("%T uplo %v: relative residual %.3g", *new(T), uplo, res)
		assert.Less(t, res, tolerance[T](), "uplo %v", uplo)
	}
}

func TestCholesky(t *testing.T) {
	t.Run("float32", testCholesky[float32])
	t.Run("float64", testCholesky[float64])
	t.Run("complex64", testCholesky[complex64])
	t.Run("complex128", testCholesky[complex128])
}

// testLU solves a random general system with Getrf and Getrs, plain, transposed and
// conjugate-transposed, and checks the residual in float64 and the pivots' range.
func testLU[T cusolver.Scalar](t *testing.T) {
	_, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cusolverraw.Library())
	r := cudatest.Rand(22)
	const n, nrhs, lda, ldb = 61, 3, 64, 61
	a := randomMatrix[T](r, n, n, lda)
	da := cudatest.AllocFrom(t, s, toT[T](a))
	ip, err := cuda.AllocFor[int32](s, n)
	require.NoError(t, err)
	defer ip.Close()
	require.NoError(t, cusolver.Getrf[T](s, n, n, da, lda, ip))
	piv := make([]int32, n)
	require.NoError(t, cuda.CopyFromDevice(piv, ip))
	for i, p := range piv {
		require.True(t, int(p) >= i+1 && int(p) <= n, "pivot %d is %d: LAPACK's are 1-based, at or below the row", i, p)
	}
	trans := []cublasraw.CublasOperation{cusolver.NoTrans, cusolver.Trans}
	if isComplex[T]() {
		trans = append(trans, cusolver.ConjTrans)
	}
	for _, tr := range trans {
		b := randomMatrix[T](r, n, nrhs, ldb)
		db := cudatest.AllocFrom(t, s, toT[T](b))
		require.NoError(t, cusolver.Getrs[T](s, tr, n, nrhs, da, lda, ip, db, ldb), "trans %v", tr)
		x := download[T](t, db, ldb*nrhs)
		res := residual(tr, n, nrhs, a, lda, x, ldb, b, ldb)
		t.Logf("%T trans %v: relative residual %.3g", *new(T), tr, res)
		assert.Less(t, res, tolerance[T](), "trans %v", tr)
	}
}

func TestLU(t *testing.T) {
	t.Run("float32", testLU[float32])
	t.Run("float64", testLU[float64])
	t.Run("complex64", testLU[complex64])
	t.Run("complex128", testLU[complex128])
}

// A symmetric matrix that is not positive definite: the leading minor of order 2 of
// diag(4, -1, 9) is negative, so Potrf's info is 2, as an *InfoError.
func TestNotPositiveDefinite(t *testing.T) {
	_, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cusolverraw.Library())
	const n = 3
	a := cudatest.AllocFrom(t, s, []float64{4, 0, 0, 0, -1, 0, 0, 0, 9})
	err := cusolver.Potrf[float64](s, cusolver.Lower, n, a, n)
	require.ErrorIs(t, err, cusolver.ErrNotPositiveDefinite)
	var ie *cusolver.InfoError
	require.True(t, errors.As(err, &ie))
	assert.Equal(t, "potrf", ie.Op)
	assert.Equal(t, 2, ie.Info, "the order of the first leading minor that is not positive")
	assert.NotErrorIs(t, err, cusolver.ErrSingular)
}

// A singular matrix: its second column is twice its first, so elimination leaves
// U(2,2) exactly zero (the values are exact in binary), and Getrf's info is 2.
func TestSingular(t *testing.T) {
	_, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cusolverraw.Library())
	const n = 3
	a := cudatest.AllocFrom(t, s, []float32{1, 2, 4, 2, 4, 8, 1, 0, 3})
	ip := cudatest.AllocFrom(t, s, make([]int32, n))
	err := cusolver.Getrf[float32](s, n, n, a, n, ip)
	require.ErrorIs(t, err, cusolver.ErrSingular)
	var ie *cusolver.InfoError
	require.True(t, errors.As(err, &ie))
	assert.Equal(t, "getrf", ie.Op)
	assert.Equal(t, 2, ie.Info)
	assert.Contains(t, err.Error(), "U(2,2) is exactly zero")
}

// The Async forms queue a factorization and its solve, checked afterwards; an Info
// closes once, and is unusable after.
func TestAsync(t *testing.T) {
	_, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cusolverraw.Library())
	r := cudatest.Rand(23)
	const n = 40
	a := randomSPD[float64](r, n, n)
	b := randomMatrix[float64](r, n, 1, n)
	da, db := cudatest.AllocFrom(t, s, toT[float64](a)), cudatest.AllocFrom(t, s, toT[float64](b))
	f, err := cusolver.PotrfAsync[float64](s, cusolver.Upper, n, da, n)
	require.NoError(t, err)
	x, err := cusolver.PotrsAsync[float64](s, cusolver.Upper, n, 1, da, n, db, n)
	require.NoError(t, err)
	require.NoError(t, x.Check())
	require.NoError(t, f.Check(), "checked after a later operation: still its own info")
	got := download[float64](t, db, n)
	assert.Less(t, residual(cusolver.NoTrans, n, 1, a, n, got, n, b, n), tolerance[float64]())

	require.NoError(t, f.Close())
	err = f.Close()
	assert.ErrorIs(t, err, cuda.ErrClosed)
	assert.ErrorIs(t, err, resource.ErrReleased)
	assert.ErrorIs(t, f.Check(), cuda.ErrClosed)
	require.NoError(t, x.Close())

	// An Info dropped before its Check still reports its operation's info.
	bad := cudatest.AllocFrom(t, s, []float64{-1})
	info, err := cusolver.PotrfAsync[float64](s, cusolver.Lower, 1, bad, 1)
	require.NoError(t, err)
	defer info.Close()
	assert.ErrorIs(t, info.Check(), cusolver.ErrNotPositiveDefinite)
}

// Goroutines on pooled streams factor and solve at once: each gets a handle (more
// goroutines than the cache keeps), and every result is right.
func TestConcurrent(t *testing.T) {
	ctx, _ := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cusolverraw.Library())
	const goroutines, n = 16, 48
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			r := cudatest.Rand(uint64(100 + g))
			a := randomMatrix[float64](r, n, n, n)
			b := randomMatrix[float64](r, n, 2, n)
			err := ctx.WithStream(context.Background(), func(_ context.Context, s *cuda.Stream) error {
				da, err := cuda.AllocFor[float64](s, n*n)
				if err != nil {
					return err
				}
				defer da.Close()
				db, err := cuda.AllocFor[float64](s, 2*n)
				if err != nil {
					return err
				}
				defer db.Close()
				ip, err := cuda.AllocFor[int32](s, n)
				if err != nil {
					return err
				}
				defer ip.Close()
				if err := cuda.CopyToDeviceAsync(s, da, toT[float64](a)); err != nil {
					return err
				}
				if err := cuda.CopyToDeviceAsync(s, db, toT[float64](b)); err != nil {
					return err
				}
				if err := cusolver.Getrf[float64](s, n, n, da, n, ip); err != nil {
					return err
				}
				if err := cusolver.Getrs[float64](s, cusolver.NoTrans, n, 2, da, n, ip, db, n); err != nil {
					return err
				}
				x := make([]float64, 2*n)
				if err := cuda.CopyFromDevice(x, db); err != nil {
					return err
				}
				xc := make([]complex128, len(x))
				for i, v := range x {
					xc[i] = complex(v, 0)
				}
				if res := residual(cusolver.NoTrans, n, 2, a, n, xc, n, b, n); res > tolerance[float64]() {
					return fmt.Errorf("goroutine %d: residual %.3g", g, res)
				}
				return nil
			})
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, cusolver.IdleHandlesForTest(ctx), cusolver.MaxIdleHandles)
}
