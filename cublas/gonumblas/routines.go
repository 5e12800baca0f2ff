package gonumblas

import (
	"gonum.org/v1/gonum/blas"

	"github.com/gocuda/gocuda/cublas"
	"github.com/gocuda/gocuda/cublas/cublasraw"
)

// Each accelerated method tries the GPU and, where the call does not go there,
// runs gonum's native code. The GPU path takes only calls that gonum accepts: it
// declines every call with a bad argument, which gonum then rejects with its own
// panic, and the calls gonum answers without arithmetic (alpha = 0, empty sizes),
// which gonum answers exactly as it does.

// Ddot returns the dot product of x and y: blas.Float64Level1.
func (impl *Implementation) Ddot(n int, x []float64, incX int, y []float64, incY int) float64 {
	if v, ok := dot(impl, impl.k64, n, x, incX, y, incY); ok {
		return v
	}
	return impl.native().Ddot(n, x, incX, y, incY)
}

// Sdot returns the dot product of x and y: blas.Float32Level1.
func (impl *Implementation) Sdot(n int, x []float32, incX int, y []float32, incY int) float32 {
	if v, ok := dot(impl, impl.k32, n, x, incX, y, incY); ok {
		return v
	}
	return impl.native().Sdot(n, x, incX, y, incY)
}

// Dnrm2 returns the Euclidean norm of x: blas.Float64Level1.
func (impl *Implementation) Dnrm2(n int, x []float64, incX int) float64 {
	if v, ok := nrm2(impl, impl.k64, n, x, incX); ok {
		return v
	}
	return impl.native().Dnrm2(n, x, incX)
}

// Snrm2 returns the Euclidean norm of x: blas.Float32Level1.
func (impl *Implementation) Snrm2(n int, x []float32, incX int) float32 {
	if v, ok := nrm2(impl, impl.k32, n, x, incX); ok {
		return v
	}
	return impl.native().Snrm2(n, x, incX)
}

// Daxpy computes y += alpha·x: blas.Float64Level1.
func (impl *Implementation) Daxpy(n int, alpha float64, x []float64, incX int, y []float64, incY int) {
	if !axpy(impl, impl.k64, n, alpha, x, incX, y, incY) {
		impl.native().Daxpy(n, alpha, x, incX, y, incY)
	}
}

// Saxpy computes y += alpha·x: blas.Float32Level1.
func (impl *Implementation) Saxpy(n int, alpha float32, x []float32, incX int, y []float32, incY int) {
	if !axpy(impl, impl.k32, n, alpha, x, incX, y, incY) {
		impl.native().Saxpy(n, alpha, x, incX, y, incY)
	}
}

// Dscal computes x = alpha·x: blas.Float64Level1.
func (impl *Implementation) Dscal(n int, alpha float64, x []float64, incX int) {
	if !scal(impl, impl.k64, n, alpha, x, incX) {
		impl.native().Dscal(n, alpha, x, incX)
	}
}

// Sscal computes x = alpha·x: blas.Float32Level1.
func (impl *Implementation) Sscal(n int, alpha float32, x []float32, incX int) {
	if !scal(impl, impl.k32, n, alpha, x, incX) {
		impl.native().Sscal(n, alpha, x, incX)
	}
}

// Dgemv computes y = alpha·op(A)·x + beta·y: blas.Float64Level2.
func (impl *Implementation) Dgemv(tA blas.Transpose, m, n int, alpha float64, a []float64, lda int,
	x []float64, incX int, beta float64, y []float64, incY int) {
	if !gemv(impl, impl.k64, tA, m, n, alpha, a, lda, x, incX, beta, y, incY) {
		impl.native().Dgemv(tA, m, n, alpha, a, lda, x, incX, beta, y, incY)
	}
}

// Sgemv computes y = alpha·op(A)·x + beta·y: blas.Float32Level2.
func (impl *Implementation) Sgemv(tA blas.Transpose, m, n int, alpha float32, a []float32, lda int,
	x []float32, incX int, beta float32, y []float32, incY int) {
	if !gemv(impl, impl.k32, tA, m, n, alpha, a, lda, x, incX, beta, y, incY) {
		impl.native().Sgemv(tA, m, n, alpha, a, lda, x, incX, beta, y, incY)
	}
}

// Dgemm computes C = alpha·op(A)·op(B) + beta·C: blas.Float64Level3.
func (impl *Implementation) Dgemm(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int,
	b []float64, ldb int, beta float64, c []float64, ldc int) {
	if !gemm(impl, impl.k64, tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) {
		impl.native().Dgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	}
}

// Sgemm computes C = alpha·op(A)·op(B) + beta·C: blas.Float32Level3.
func (impl *Implementation) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) {
	if !gemm(impl, impl.k32, tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) {
		impl.native().Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	}
}

// limits returns the thresholds of a call: managed if its operands are all in
// place, else staged.
func (impl *Implementation) limits(allInPlace bool) *Thresholds {
	if allInPlace {
		return &impl.managed
	}
	return &impl.staged
}

// order is the size that Thresholds.Level3 bounds: 3/(1/m + 1/n + 1/k).
func order(m, n, k int) float64 { return 3 / (1/float64(m) + 1/float64(n) + 1/float64(k)) }

func validTrans(t blas.Transpose) bool {
	return t == blas.NoTrans || t == blas.Trans || t == blas.ConjTrans
}

// op is cuBLAS's form of t; ConjTrans is Trans for real matrices.
func op(t blas.Transpose) cublasraw.CublasOperation {
	if t == blas.NoTrans {
		return cublas.NoTrans
	}
	return cublas.Trans
}

// flip is the transposition of the column-major view of a row-major matrix.
func flip(t blas.Transpose) cublasraw.CublasOperation {
	if t == blas.NoTrans {
		return cublas.Trans
	}
	return cublas.NoTrans
}

// dot runs Xdot on the GPU; ok is false where the call is gonum's to run.
func dot[T cublas.Real](impl *Implementation, k kernels[T], n int, x []T, incX int, y []T, incY int) (v T, ok bool) {
	X, Y := vector[T]{data: x, n: n, inc: incX}, vector[T]{data: y, n: n, inc: incY}
	if impl.ctx == nil || !X.ok(impl) || !Y.ok(impl) || n < impl.limits(X.inPlace != nil && Y.inPlace != nil).Level1 {
		return 0, false
	}
	c := impl.start("dot")
	if c == nil {
		return 0, false
	}
	px, err := stageVector(c, &X, true)
	var py operand
	if err == nil {
		py, err = stageVector(c, &Y, true)
	}
	if err == nil {
		v, err = k.Dot(c.s, n, px.mem, py.mem)
	}
	return v, c.end(err)
}

// nrm2 runs Xnrm2 on the GPU; ok is false where the call is gonum's to run.
func nrm2[T cublas.Real](impl *Implementation, k kernels[T], n int, x []T, incX int) (v T, ok bool) {
	X := vector[T]{data: x, n: n, inc: incX}
	if impl.ctx == nil || !X.ok(impl) || n < impl.limits(X.inPlace != nil).Level1 {
		return 0, false
	}
	c := impl.start("nrm2")
	if c == nil {
		return 0, false
	}
	px, err := stageVector(c, &X, true)
	if err == nil {
		v, err = k.Nrm2(c.s, n, px.mem)
	}
	return v, c.end(err)
}

// axpy runs Xaxpy on the GPU and reports whether it did.
func axpy[T cublas.Real](impl *Implementation, k kernels[T], n int, alpha T, x []T, incX int, y []T, incY int) bool {
	X, Y := vector[T]{data: x, n: n, inc: incX}, vector[T]{data: y, n: n, inc: incY}
	if impl.ctx == nil || alpha == 0 || !X.ok(impl) || !Y.ok(impl) ||
		n < impl.limits(X.inPlace != nil && Y.inPlace != nil).Level1 {
		return false
	}
	c := impl.start("axpy")
	if c == nil {
		return false
	}
	px, err := stageVector(c, &X, true)
	var py operand
	if err == nil {
		py, err = stageVector(c, &Y, true)
	}
	if err == nil {
		err = k.Axpy(c.s, n, alpha, px.mem, py.mem)
		c.touched = err == nil && py.dev == nil
	}
	if err == nil {
		err = fetchVector(c, &Y, py)
	}
	return c.end(err)
}

// scal runs Xscal on the GPU and reports whether it did. alpha = 0 stays native:
// gonum sets x to zero (NaNs included), where cuBLAS may multiply.
func scal[T cublas.Real](impl *Implementation, k kernels[T], n int, alpha T, x []T, incX int) bool {
	X := vector[T]{data: x, n: n, inc: incX}
	if impl.ctx == nil || alpha == 0 || !X.ok(impl) || n < impl.limits(X.inPlace != nil).Level1 {
		return false
	}
	c := impl.start("scal")
	if c == nil {
		return false
	}
	px, err := stageVector(c, &X, true)
	if err == nil {
		err = k.Scal(c.s, n, alpha, px.mem)
		c.touched = err == nil && px.dev == nil
	}
	if err == nil {
		err = fetchVector(c, &X, px)
	}
	return c.end(err)
}

// gemv runs Xgemv on the GPU and reports whether it did. With beta = 0, y is not
// read (not even copied to the GPU), as in gonum.
func gemv[T cublas.Real](impl *Implementation, k kernels[T], tA blas.Transpose, m, n int, alpha T, a []T, lda int,
	x []T, incX int, beta T, y []T, incY int) bool {
	if impl.ctx == nil || alpha == 0 || !validTrans(tA) {
		return false
	}
	lenX, lenY := n, m
	if tA != blas.NoTrans {
		lenX, lenY = m, n
	}
	A := matrix[T]{data: a, r: m, c: n, ld: lda}
	X, Y := vector[T]{data: x, n: lenX, inc: incX}, vector[T]{data: y, n: lenY, inc: incY}
	if !A.ok(impl) || !X.ok(impl) || !Y.ok(impl) ||
		m*n < impl.limits(A.inPlace != nil && X.inPlace != nil && Y.inPlace != nil).Level2 {
		return false
	}
	c := impl.start("gemv")
	if c == nil {
		return false
	}
	pa, err := stageMatrix(c, &A, true)
	var px, py operand
	if err == nil {
		px, err = stageVector(c, &X, true)
	}
	if err == nil {
		py, err = stageVector(c, &Y, beta != 0)
	}
	if err == nil {
		// Row-major A is the column-major n×m matrix Aᵀ: the transposition flips.
		err = k.Gemv(c.s, flip(tA), n, m, alpha, pa.mem, pa.ld, px.mem, beta, py.mem)
		c.touched = err == nil && py.dev == nil
	}
	if err == nil {
		err = fetchVector(c, &Y, py)
	}
	return c.end(err)
}

// gemm runs Xgemm on the GPU and reports whether it did. With beta = 0, C is not
// read (not even copied to the GPU), as in gonum.
func gemm[T cublas.Real](impl *Implementation, k kernels[T], tA, tB blas.Transpose, m, n, kk int, alpha T,
	a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) bool {
	if impl.ctx == nil || alpha == 0 || !validTrans(tA) || !validTrans(tB) || kk <= 0 {
		return false
	}
	A := matrix[T]{data: a, r: m, c: kk, ld: lda}
	if tA != blas.NoTrans {
		A.r, A.c = kk, m
	}
	B := matrix[T]{data: b, r: kk, c: n, ld: ldb}
	if tB != blas.NoTrans {
		B.r, B.c = n, kk
	}
	C := matrix[T]{data: c, r: m, c: n, ld: ldc}
	if !A.ok(impl) || !B.ok(impl) || !C.ok(impl) ||
		order(m, n, kk) < float64(impl.limits(A.inPlace != nil && B.inPlace != nil && C.inPlace != nil).Level3) {
		return false
	}
	call := impl.start("gemm")
	if call == nil {
		return false
	}
	pa, err := stageMatrix(call, &A, true)
	var pb, pc operand
	if err == nil {
		pb, err = stageMatrix(call, &B, true)
	}
	if err == nil {
		pc, err = stageMatrix(call, &C, beta != 0)
	}
	if err == nil {
		// Row-major C is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, as cublas.GemmRowMajor
		// computes it: the operands swap, their transpositions stay.
		err = k.Gemm(call.s, op(tB), op(tA), n, m, kk, alpha, pb.mem, pb.ld, pa.mem, pa.ld, beta, pc.mem, pc.ld)
		call.touched = err == nil && pc.dev == nil
	}
	if err == nil {
		err = fetchMatrix(call, &C, pc)
	}
	return call.end(err)
}
