package cusolver_test

import (
	"fmt"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"testing"

	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/cusolver"
	"github.com/gocuda/gocuda/cusolver/cusolverraw"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/mat"
)

// The GPU tests of QR, least squares, the inverse, SVD and eigen decompositions:
// each checks its results on the CPU, in float64, against the matrix (A = Q·R,
// A = U·Σ·Vᴴ, A·V = V·Λ, orthonormal factors) and against gonum: its QR, least
// squares (Dense.Solve), Inverse, SVD and EigenSym for real types; for complex
// types gonum's SVD and EigenSym of the real 2m×2n embedding [Re −Im; Im Re], whose
// singular values (eigenvalues, for a Hermitian A) are A's, each twice.

// Packed column-major matrices of complex128 (leading dimension = rows).

// sub returns the r×c top-left block of a (leading dimension ld), packed.
func sub(a []complex128, ld, r, c int) []complex128 {
	out := make([]complex128, r*c)
	for j := range c {
		copy(out[j*r:(j+1)*r], a[j*ld:j*ld+r])
	}
	return out
}

// mmul returns a·b for m×k a and k×n b.
func mmul(a []complex128, m, k int, b []complex128, n int) []complex128 {
	out := make([]complex128, m*n)
	for j := range n {
		for p := range k {
			if x := b[p+j*k]; x != 0 {
				for i := range m {
					out[i+j*m] += a[i+p*m] * x
				}
			}
		}
	}
	return out
}

// adj returns the conjugate transpose of the m×n a.
func adj(a []complex128, m, n int) []complex128 {
	out := make([]complex128, n*m)
	for j := range n {
		for i := range m {
			out[j+i*n] = cmplx.Conj(a[i+j*m])
		}
	}
	return out
}

// scaleCols returns a (m×n) with column j multiplied by d[j].
func scaleCols(a []complex128, m, n int, d []float64) []complex128 {
	out := append([]complex128(nil), a...)
	for j := range n {
		for i := range m {
			out[i+j*m] *= complex(d[j], 0)
		}
	}
	return out
}

func eye(n int) []complex128 {
	out := make([]complex128, n*n)
	for i := range n {
		out[i+i*n] = 1
	}
	return out
}

func fnorm(a []complex128) float64 {
	var s float64
	for _, x := range a {
		s += real(x)*real(x) + imag(x)*imag(x)
	}
	return math.Sqrt(s)
}

// relDiff returns ‖x − y‖_F / ‖y‖_F.
func relDiff(x, y []complex128) float64 {
	d := make([]complex128, len(x))
	for i := range x {
		d[i] = x[i] - y[i]
	}
	return fnorm(d) / fnorm(y)
}

// embed returns the real 2m×2n matrix [Re −Im; Im Re] of the m×n a (leading
// dimension ld), for gonum.
func embed(a []complex128, ld, m, n int) *mat.Dense {
	e := mat.NewDense(2*m, 2*n, nil)
	for i := range m {
		for j := range n {
			x := a[i+j*ld]
			e.Set(i, j, real(x))
			e.Set(i, j+n, -imag(x))
			e.Set(i+m, j, imag(x))
			e.Set(i+m, j+n, real(x))
		}
	}
	return e
}

// everyOther returns v[0], v[2], ...: the embedding's values, each A's twice.
func everyOther(v []float64) []float64 {
	out := make([]float64, len(v)/2)
	for i := range out {
		out[i] = v[2*i]
	}
	return out
}

// refSingular returns the singular values of a (m×n, leading dimension ld),
// descending, by gonum.
func refSingular(t *testing.T, a []complex128, ld, m, n int) []float64 {
	var svd mat.SVD
	require.True(t, svd.Factorize(embed(a, ld, m, n), mat.SVDNone))
	return everyOther(svd.Values(nil))
}

// refEigen returns the eigenvalues of the Hermitian n×n a, ascending, by gonum.
func refEigen(t *testing.T, a []complex128, ld, n int) []float64 {
	e := embed(a, ld, n, n)
	var es mat.EigenSym
	require.True(t, es.Factorize(mat.NewSymDense(2*n, e.RawMatrix().Data), false))
	return everyOther(es.Values(nil))
}

// realDense returns the real part of the m×n a (leading dimension ld) for gonum.
func realDense(a []complex128, ld, m, n int) *mat.Dense {
	d := mat.NewDense(m, n, nil)
	for i := range m {
		for j := range n {
			d.Set(i, j, real(a[i+j*ld]))
		}
	}
	return d
}

// fromDense returns gonum's m×n d as a packed matrix.
func fromDense(d mat.Matrix) []complex128 {
	m, n := d.Dims()
	out := make([]complex128, m*n)
	for j := range n {
		for i := range m {
			out[i+j*m] = complex(d.At(i, j), 0)
		}
	}
	return out
}

// maxAbsDiff returns max |x[i] − y[i]|.
func maxAbsDiff(x, y []float64) float64 {
	var d float64
	for i := range x {
		d = max(d, math.Abs(x[i]-y[i]))
	}
	return d
}

func single[T cusolver.Scalar]() bool {
	switch any(*new(T)).(type) {
	case float32, complex64:
		return true
	}
	return false
}

// realBuffer allocates n elements of T's real type and returns a function that
// reads them back as float64.
func realBuffer[T cusolver.Scalar](t *testing.T, s *cuda.Stream, n int) (*cuda.DeviceBuffer, func() []float64) {
	if single[T]() {
		return realBufferOf[float32](t, s, n)
	}
	return realBufferOf[float64](t, s, n)
}

func realBufferOf[R float32 | float64](t *testing.T, s *cuda.Stream, n int) (*cuda.DeviceBuffer, func() []float64) {
	b := cudatest.AllocFrom(t, s, make([]R, n))
	return b, func() []float64 {
		h := make([]R, n)
		require.NoError(t, cuda.CopyFromDevice(h, b))
		out := make([]float64, n)
		for i, v := range h {
			out[i] = float64(v)
		}
		return out
	}
}

// randomHermitian returns an n×n Hermitian (symmetric) matrix with leading
// dimension ld, rounded to T; with garbage in the triangle that uplo leaves out
// (the second result), the matrix the device gets.
func randomHermitian[T cusolver.Scalar](r *rand.Rand, n, ld int, uplo cublasraw.CublasFillMode) (a, dev []complex128) {
	a = make([]complex128, ld*n)
	for j := range n {
		for i := j; i < n; i++ {
			x := wide(scalar[T](random[T](r)))
			if i == j {
				x = complex(real(x), 0)
			}
			a[i+j*ld], a[j+i*ld] = x, cmplx.Conj(x)
		}
	}
	dev = append([]complex128(nil), a...)
	for j := range n {
		for i := range n {
			if (uplo == cusolver.Lower && i < j) || (uplo == cusolver.Upper && i > j) {
				dev[i+j*ld] = wide(scalar[T](complex(1e6, 0)))
			}
		}
	}
	return a, dev
}

// testQR factors a random m×n A (padded leading dimension) with Geqrf, forms the
// thin Q with Orgqr and applies Qᴴ with Ormqr, and checks A = Q·R, QᴴQ = I, Qᴴ·C
// and, for real T, |R(i,i)| against gonum's QR.
func testQR[T cusolver.Scalar](t *testing.T) {
	_, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cusolverraw.Library())
	r := cudatest.Rand(31)
	const m, n, lda, nc = 45, 30, 48, 3
	tol := tolerance[T]()
	a := randomMatrix[T](r, m, n, lda)
	da := cudatest.AllocFrom(t, s, toT[T](a))
	tau := cudatest.AllocFrom(t, s, make([]T, n))
	require.NoError(t, cusolver.Geqrf[T](s, m, n, da, lda, tau))
	f := download[T](t, da, lda*n)
	R := make([]complex128, n*n)
	for j := range n {
		for i := 0; i <= j; i++ {
			R[i+j*n] = f[i+j*lda]
		}
	}
	dq := cudatest.AllocFrom(t, s, toT[T](f))
	require.NoError(t, cusolver.Orgqr[T](s, m, n, n, dq, lda, tau))
	Q := sub(download[T](t, dq, lda*n), lda, m, n)
	res := relDiff(mmul(Q, m, n, R, n), sub(a, lda, m, n))
	orth := relDiff(mmul(adj(Q, m, n), n, m, Q, n), eye(n))
	t.Logf("%T: ‖QR−A‖/‖A‖ %.3g, ‖QᴴQ−I‖/‖I‖ %.3g", *new(T), res, orth)
	assert.Less(t, res, tol)
	assert.Less(t, orth, tol)

	c := randomMatrix[T](r, m, nc, m)
	dc := cudatest.AllocFrom(t, s, toT[T](c))
	require.NoError(t, cusolver.Ormqr[T](s, cusolver.Left, cusolver.ConjTrans, m, nc, n, da, lda, tau, dc, m))
	qc := sub(download[T](t, dc, m*nc), m, n, nc) // the first n rows of Qᴴ·C: Q's thin part
	d := relDiff(qc, mmul(adj(Q, m, n), n, m, c, nc))
	t.Logf("%T: ormqr against Qᴴ·C %.3g", *new(T), d)
	assert.Less(t, d, tol)

	if !isComplex[T]() {
		var qr mat.QR
		qr.Factorize(realDense(a, lda, m, n))
		var gr mat.Dense
		qr.RTo(&gr)
		var worst float64
		for i := range n {
			worst = max(worst, math.Abs(math.Abs(gr.At(i, i))-cmplx.Abs(R[i+i*n]))/math.Abs(gr.At(i, i)))
		}
		t.Logf("%T: |R(i,i)| against gonum's QR %.3g", *new(T), worst)
		assert.Less(t, worst, tol)
	}
}

func TestGPUQR(t *testing.T) {
	t.Run("float32", testQR[float32])
	t.Run("float64", testQR[float64])
	t.Run("complex64", testQR[complex64])
	t.Run("complex128", testQR[complex128])
}

// testGels solves a random overdetermined least-squares problem and checks the
// normal equations Aᴴ(A·X − B) = 0 and, for real T, X against gonum's Dense.Solve.
func testGels[T cusolver.Scalar](t *testing.T) {
	_, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cusolverraw.Library())
	r := cudatest.Rand(32)
	const m, n, nrhs, lda, ldb = 50, 20, 3, 52, 51
	tol := tolerance[T]()
	a := randomMatrix[T](r, m, n, lda)
	b := randomMatrix[T](r, m, nrhs, ldb)
	da, db := cudatest.AllocFrom(t, s, toT[T](a)), cudatest.AllocFrom(t, s, toT[T](b))
	require.NoError(t, cusolver.Gels[T](s, m, n, nrhs, da, lda, db, ldb))
	x := sub(download[T](t, db, ldb*nrhs), ldb, n, nrhs)
	A, B := sub(a, lda, m, n), sub(b, ldb, m, nrhs)
	ax := mmul(A, m, n, x, nrhs)
	for i := range ax {
		ax[i] -= B[i]
	}
	normal := fnorm(mmul(adj(A, m, n), n, m, ax, nrhs)) / (fnorm(A) * (fnorm(A)*fnorm(x) + fnorm(B)))
	t.Logf("%T: normal equations' relative residual %.3g", *new(T), normal)
	assert.Less(t, normal, tol)
	if !isComplex[T]() {
		var gx mat.Dense
		require.NoError(t, gx.Solve(realDense(a, lda, m, n), realDense(b, ldb, m, nrhs)))
		d := relDiff(x, fromDense(&gx))
		t.Logf("%T: X against gonum's least squares %.3g", *new(T), d)
		assert.Less(t, d, 10*tol)
	}
}

func TestGPUGels(t *testing.T) {
	t.Run("float32", testGels[float32])
	t.Run("float64", testGels[float64])
	t.Run("complex64", testGels[complex64])
	t.Run("complex128", testGels[complex128])
}

// testInverse inverts a random well-conditioned matrix and checks A·X = I and, for
// real T, X against gonum's Inverse.
func testInverse[T cusolver.Scalar](t *testing.T) {
	_, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cusolverraw.Library())
	r := cudatest.Rand(33)
	const n, lda = 40, 43
	tol := tolerance[T]()
	a := randomMatrix[T](r, n, n, lda)
	for i := range n {
		a[i+i*lda] = wide(scalar[T](a[i+i*lda] + 8))
	}
	da := cudatest.AllocFrom(t, s, toT[T](a))
	dinv := cudatest.AllocFrom(t, s, make([]T, n*n))
	require.NoError(t, cusolver.Inverse[T](s, n, da, lda, dinv))
	x := download[T](t, dinv, n*n)
	A := sub(a, lda, n, n)
	d := relDiff(mmul(A, n, n, x, n), eye(n))
	t.Logf("%T: ‖A·X − I‖/‖I‖ %.3g", *new(T), d)
	assert.Less(t, d, tol)
	if !isComplex[T]() {
		var gi mat.Dense
		require.NoError(t, gi.Inverse(realDense(a, lda, n, n)))
		d := relDiff(x, fromDense(&gi))
		t.Logf("%T: X against gonum's Inverse %.3g", *new(T), d)
		assert.Less(t, d, tol)
	}
}

func TestGPUInverse(t *testing.T) {
	t.Run("float32", testInverse[float32])
	t.Run("float64", testInverse[float64])
	t.Run("complex64", testInverse[complex64])
	t.Run("complex128", testInverse[complex128])
}

// An exactly singular matrix: Inverse reports getrf's info as ErrSingular.
func TestGPUInverseSingular(t *testing.T) {
	_, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cusolverraw.Library())
	a := cudatest.AllocFrom(t, s, []float64{1, 2, 2, 4})
	inv := cudatest.AllocFrom(t, s, make([]float64, 4))
	err := cusolver.Inverse[float64](s, 2, a, 2, inv)
	require.ErrorIs(t, err, cusolver.ErrSingular)
	assert.Contains(t, err.Error(), "cusolver: getrf")
}

// testGesvd decomposes a random m×n A with thin vectors and checks A = U·Σ·Vᴴ, UᴴU
// = I, VᴴV = I and the singular values against gonum; then values only, with all of
// U asked for, and the same values.
func testGesvd[T cusolver.Scalar](t *testing.T) {
	_, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cusolverraw.Library())
	r := cudatest.Rand(34)
	const m, n, lda, ldu, ldvt = 40, 25, 41, 42, 27
	tol := tolerance[T]()
	a := randomMatrix[T](r, m, n, lda)
	ref := refSingular(t, a, lda, m, n)
	da := cudatest.AllocFrom(t, s, toT[T](a))
	sv, read := realBuffer[T](t, s, n)
	du := cudatest.AllocFrom(t, s, make([]T, ldu*n))
	dvt := cudatest.AllocFrom(t, s, make([]T, ldvt*n))
	require.NoError(t, cusolver.Gesvd[T](s, cusolver.SVDThin, cusolver.SVDThin, m, n, da, lda, sv, du, ldu, dvt, ldvt))
	got := read()
	U, VT := sub(download[T](t, du, ldu*n), ldu, m, n), sub(download[T](t, dvt, ldvt*n), ldvt, n, n)
	A := sub(a, lda, m, n)
	res := relDiff(mmul(scaleCols(U, m, n, got), m, n, VT, n), A)
	vals := maxAbsDiff(got, ref) / ref[0]
	t.Logf("%T: ‖UΣVᴴ−A‖/‖A‖ %.3g, singular values against gonum %.3g", *new(T), res, vals)
	assert.Less(t, res, tol)
	assert.Less(t, vals, tol)
	assert.Less(t, relDiff(mmul(adj(U, m, n), n, m, U, n), eye(n)), tol)
	assert.Less(t, relDiff(mmul(VT, n, n, adj(VT, n, n), n), eye(n)), tol)

	da = cudatest.AllocFrom(t, s, toT[T](a))
	dU := cudatest.AllocFrom(t, s, make([]T, m*m))
	require.NoError(t, cusolver.Gesvd[T](s, cusolver.SVDAll, cusolver.SVDNone, m, n, da, lda, sv, dU, m, nil, 0))
	assert.Less(t, maxAbsDiff(read(), ref)/ref[0], tol)
	Uall := download[T](t, dU, m*m)
	assert.Less(t, relDiff(mmul(adj(Uall, m, m), m, m, Uall, m), eye(m)), tol, "all of U is unitary")
}

func TestGPUGesvd(t *testing.T) {
	t.Run("float32", testGesvd[float32])
	t.Run("float64", testGesvd[float64])
	t.Run("complex64", testGesvd[complex64])
	t.Run("complex128", testGesvd[complex128])
}

// testGesvdjBatched decomposes a batch of small matrices (tall and wide) and checks
// each A_i = U_i·Σ_i·V_iᴴ and its singular values against gonum.
func testGesvdjBatched[T cusolver.Scalar](t *testing.T) {
	_, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cusolverraw.Library())
	r := cudatest.Rand(35)
	const batch = 7
	tol := tolerance[T]()
	for _, sh := range []struct{ m, n, lda int }{{9, 6, 10}, {5, 8, 5}, {32, 32, 32}} {
		m, n, lda, k := sh.m, sh.n, sh.lda, min(sh.m, sh.n)
		a := randomMatrix[T](r, m, n*batch, lda) // batch matrices one after another
		da := cudatest.AllocFrom(t, s, toT[T](a))
		sv, read := realBuffer[T](t, s, k*batch)
		du := cudatest.AllocFrom(t, s, make([]T, m*m*batch))
		dv := cudatest.AllocFrom(t, s, make([]T, n*n*batch))
		require.NoError(t, cusolver.GesvdjBatched[T](s, cusolver.Vectors, m, n, da, lda, sv, du, m, dv, n, batch, nil))
		got, u, v := read(), download[T](t, du, m*m*batch), download[T](t, dv, n*n*batch)
		for i := range batch {
			ai := a[i*lda*n : (i+1)*lda*n]
			ref := refSingular(t, ai, lda, m, n)
			si := got[i*k : (i+1)*k]
			Ui := sub(u[i*m*m:], m, m, k)
			Vi := sub(v[i*n*n:], n, n, k)
			res := relDiff(mmul(scaleCols(Ui, m, k, si), m, k, adj(Vi, n, k), n), sub(ai, lda, m, n))
			vals := maxAbsDiff(si, ref) / ref[0]
			assert.Less(t, res, tol, "%d×%d matrix %d", m, n, i)
			assert.Less(t, vals, tol, "%d×%d matrix %d", m, n, i)
			if i == 0 {
				t.Logf("%T %d×%d: ‖UΣVᴴ−A‖/‖A‖ %.3g, values against gonum %.3g", *new(T), m, n, res, vals)
			}
		}
	}
	// Values only, with parameters: the same values, unsorted aside.
	const m, n = 6, 4
	a := randomMatrix[T](r, m, n*batch, m)
	da := cudatest.AllocFrom(t, s, toT[T](a))
	sv, read := realBuffer[T](t, s, n*batch)
	require.NoError(t, cusolver.GesvdjBatched[T](s, cusolver.NoVectors, m, n, da, m, sv, nil, 0, nil, 0, batch,
		&cusolver.Jacobi{Tolerance: 10 * tol * 1e-3, MaxSweeps: 50}))
	got := read()
	for i := range batch {
		ref := refSingular(t, a[i*m*n:], m, m, n)
		assert.Less(t, maxAbsDiff(got[i*n:(i+1)*n], ref)/ref[0], tol, "matrix %d", i)
	}
}

func TestGPUGesvdjBatched(t *testing.T) {
	t.Run("float32", testGesvdjBatched[float32])
	t.Run("float64", testGesvdjBatched[float64])
	t.Run("complex64", testGesvdjBatched[complex64])
	t.Run("complex128", testGesvdjBatched[complex128])
}

// testSyevd decomposes a random Hermitian matrix, from either triangle with garbage
// in the other, and checks A·V = V·Λ, VᴴV = I and the eigenvalues against gonum's
// EigenSym.
func testSyevd[T cusolver.Scalar](t *testing.T) {
	_, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cusolverraw.Library())
	r := cudatest.Rand(36)
	const n, lda = 37, 40
	tol := tolerance[T]()
	for _, uplo := range []cublasraw.CublasFillMode{cusolver.Lower, cusolver.Upper} {
		a, dev := randomHermitian[T](r, n, lda, uplo)
		ref := refEigen(t, a, lda, n)
		da := cudatest.AllocFrom(t, s, toT[T](dev))
		w, read := realBuffer[T](t, s, n)
		require.NoError(t, cusolver.Syevd[T](s, cusolver.Vectors, uplo, n, da, lda, w))
		got := read()
		V := sub(download[T](t, da, lda*n), lda, n, n)
		A := sub(a, lda, n, n)
		res := relDiff(mmul(A, n, n, V, n), scaleCols(V, n, n, got)) * fnorm(V) / fnorm(A)
		scale := math.Max(math.Abs(ref[0]), math.Abs(ref[n-1]))
		vals := maxAbsDiff(got, ref) / scale
		t.Logf("%T uplo %v: ‖AV−VΛ‖/‖A‖ %.3g, eigenvalues against gonum %.3g", *new(T), uplo, res, vals)
		assert.Less(t, res, tol)
		assert.Less(t, vals, tol)
		assert.Less(t, relDiff(mmul(adj(V, n, n), n, n, V, n), eye(n)), tol)

		da = cudatest.AllocFrom(t, s, toT[T](dev))
		require.NoError(t, cusolver.Syevd[T](s, cusolver.NoVectors, uplo, n, da, lda, w))
		assert.Less(t, maxAbsDiff(read(), ref)/scale, tol, "values only")
	}
}

func TestGPUSyevd(t *testing.T) {
	t.Run("float32", testSyevd[float32])
	t.Run("float64", testSyevd[float64])
	t.Run("complex64", testSyevd[complex64])
	t.Run("complex128", testSyevd[complex128])
}

// testSyevjBatched decomposes a batch of small Hermitian matrices and checks each
// A_i·V_i = V_i·Λ_i and its eigenvalues against gonum.
func testSyevjBatched[T cusolver.Scalar](t *testing.T) {
	_, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cusolverraw.Library())
	r := cudatest.Rand(37)
	const n, lda, batch = 12, 13, 9
	tol := tolerance[T]()
	all, dev := make([]complex128, 0, lda*n*batch), make([]complex128, 0, lda*n*batch)
	for range batch {
		a, d := randomHermitian[T](r, n, lda, cusolver.Lower)
		all, dev = append(all, a...), append(dev, d...)
	}
	da := cudatest.AllocFrom(t, s, toT[T](dev))
	w, read := realBuffer[T](t, s, n*batch)
	require.NoError(t, cusolver.SyevjBatched[T](s, cusolver.Vectors, cusolver.Lower, n, da, lda, w, batch, nil))
	got, v := read(), download[T](t, da, lda*n*batch)
	for i := range batch {
		ai := all[i*lda*n : (i+1)*lda*n]
		ref := refEigen(t, ai, lda, n)
		wi := got[i*n : (i+1)*n]
		V := sub(v[i*lda*n:], lda, n, n)
		A := sub(ai, lda, n, n)
		res := relDiff(mmul(A, n, n, V, n), scaleCols(V, n, n, wi)) * fnorm(V) / fnorm(A)
		vals := maxAbsDiff(wi, ref) / math.Max(math.Abs(ref[0]), math.Abs(ref[n-1]))
		assert.Less(t, res, tol, "matrix %d", i)
		assert.Less(t, vals, tol, "matrix %d", i)
		if i == 0 {
			t.Logf("%T: ‖AV−VΛ‖/‖A‖ %.3g, eigenvalues against gonum %.3g", *new(T), res, vals)
		}
	}
}

func TestGPUSyevjBatched(t *testing.T) {
	t.Run("float32", testSyevjBatched[float32])
	t.Run("float64", testSyevjBatched[float64])
	t.Run("complex64", testSyevjBatched[complex64])
	t.Run("complex128", testSyevjBatched[complex128])
}

// A batch with one sweep allowed: one matrix fails with ErrNoConvergence, named by
// its index, and the others do not. Measured on the GPU, cuSOLVER's batched Jacobi
// brings full 16×16 matrices within the tolerance in one sweep but reports an
// already diagonal one (no off-diagonal mass) as not converged, with any
// tolerance: the diagonal matrix is the one that fails, wherever it is in the batch.
func TestGPUSyevjBatchedNoConvergence(t *testing.T) {
	_, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cusolverraw.Library())
	const n, batch = 16, 3
	for _, diag := range []int{0, 2} {
		r := cudatest.Rand(38)
		a := make([]float64, 0, n*n*batch)
		for i := range batch {
			h, _ := randomHermitian[float64](r, n, n, cusolver.Lower)
			if i == diag {
				h = make([]complex128, n*n)
				for k := range n {
					h[k+k*n] = complex(float64(k+1), 0)
				}
			}
			a = append(a, toT[float64](h)...)
		}
		da := cudatest.AllocFrom(t, s, a)
		w := cudatest.AllocFrom(t, s, make([]float64, n*batch))
		err := cusolver.SyevjBatched[float64](s, cusolver.Vectors, cusolver.Lower, n, da, n, w, batch,
			&cusolver.Jacobi{Tolerance: 1e-300, MaxSweeps: 1})
		require.ErrorIs(t, err, cusolver.ErrNoConvergence)
		t.Log(err)
		var failed []int
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			ie, ok := e.(*cusolver.InfoError)
			require.True(t, ok, "%v", e)
			assert.Equal(t, "syevjBatched", ie.Op)
			assert.Equal(t, n+1, ie.Info, "cuSOLVER's code for no convergence")
			failed = append(failed, ie.Matrix)
		}
		assert.Equal(t, []int{diag}, failed)
		assert.Contains(t, err.Error(), fmt.Sprintf("matrix %d of the batch", diag))

		// With sweeps enough, every matrix converges.
		da = cudatest.AllocFrom(t, s, a)
		require.NoError(t, cusolver.SyevjBatched[float64](s, cusolver.Vectors, cusolver.Lower, n, da, n, w, batch,
			&cusolver.Jacobi{Tolerance: 1e-300, MaxSweeps: 100}))
	}
}

// The Async forms of Gels and Inverse queue every step, and their Info covers each:
// checked after both are queued, and closed once.
func TestGPUCompositeAsync(t *testing.T) {
	_, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cusolverraw.Library())
	r := cudatest.Rand(39)
	const n = 16
	a := randomMatrix[float64](r, n, n, n)
	b := randomMatrix[float64](r, n, 1, n)
	da, db := cudatest.AllocFrom(t, s, toT[float64](a)), cudatest.AllocFrom(t, s, toT[float64](b))
	da2 := cudatest.AllocFrom(t, s, toT[float64](a))
	inv := cudatest.AllocFrom(t, s, make([]float64, n*n))
	g, err := cusolver.GelsAsync[float64](s, n, n, 1, da, n, db, n)
	require.NoError(t, err)
	i, err := cusolver.InverseAsync[float64](s, n, da2, n, inv)
	require.NoError(t, err)
	require.NoError(t, g.Check())
	require.NoError(t, i.Check())
	require.NoError(t, g.Close())
	require.NoError(t, i.Close())
	assert.ErrorIs(t, i.Close(), cuda.ErrClosed)
	x := download[float64](t, db, n)
	assert.Less(t, residual(cusolver.NoTrans, n, 1, a, n, x, n, b, n), tolerance[float64]())
	xi := mmul(download[float64](t, inv, n*n), n, n, b, 1)
	assert.Less(t, relDiff(xi, x), tolerance[float64]())
}
