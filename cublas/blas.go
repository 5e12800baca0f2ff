package cublas

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"unsafe"

	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
)

// Scalar is an element type of the typed operations: float32, float64, complex64
// or complex128 (cuBLAS's S, D, C and Z). complex64 and complex128 have the layout
// of cuComplex and cuDoubleComplex.
type Scalar interface {
	float32 | float64 | complex64 | complex128
}

// GemmScalar is an element type of Gemm and GemmStridedBatched: the Scalar types
// and cuda.Float16 (half precision, computed in half precision as cublasHgemm does;
// GemmMixed computes half inputs in float32).
type GemmScalar interface {
	Scalar | cuda.Float16
}

// Real is an element type of the operations that cuBLAS has for real numbers only.
type Real interface {
	float32 | float64
}

// Op is the transposition of a matrix operand: NoTrans, Trans or ConjTrans.
type Op = cublasraw.CublasOperation

// Transposition of a matrix operand.
const (
	NoTrans   Op = cublasraw.CUBLAS_OP_N // op(A) = A
	Trans        = cublasraw.CUBLAS_OP_T // op(A) = Aᵀ
	ConjTrans    = cublasraw.CUBLAS_OP_C // op(A) = Aᴴ
)

// Matrices are column-major, as in BLAS: element (i, j) of a matrix with leading
// dimension ld is element i + j·ld of its memory. Row-major data is the transpose of
// column-major data; GemmRowMajor does the bookkeeping for the common case.
//
// Every operation checks its arguments before any CUDA call: negative sizes, leading
// dimensions smaller than the rows, memory of another element type (AllocFor) or
// too small for the operand, and memory of another context than the stream's are
// errors matching cuda.ErrInvalidArgument (or cuda.ErrWrongContext). The operation
// then runs on s with a handle of s's context from a cache (see MaxIdleHandles):
// it waits on the GPU for its operands' conflicting uses on other streams (inputs
// are read, outputs written) and returns without waiting for the result. A failure
// of cuBLAS is its Status, wrapped with the operation's name. Scalars (alpha, beta)
// are read before the call returns.

// Gemm computes C = alpha·op(A)·op(B) + beta·C on s, where op(A) is m×k, op(B) is k×n
// and C is m×n: cublas{S,D,C,Z}gemm. Matrices are column-major, as in BLAS: element
// (i, j) of A is at i + j·lda (GemmRowMajor takes row-major ones). float32 products
// are computed in FP32, in cuBLAS's default math mode, which does not round inputs
// to TF32; GemmMixed with Compute32FFastTF32 does.
func Gemm[T GemmScalar](s *cuda.Stream, transA, transB Op, m, n, k int, alpha T, a cuda.Memory, lda int,
	b cuda.Memory, ldb int, beta T, c cuda.Memory, ldc int) error {
	const op = "gemm"
	r, err := precisionOf[T](op)
	if err != nil {
		return err
	}
	gemm := r.gemm
	ar, ac := dims(transA, m, k)
	br, bc := dims(transB, k, n)
	pa, okA := matrix[T](a, ar, ac, lda, 0, 1)
	pb, okB := matrix[T](b, br, bc, ldb, 0, 1)
	pc, okC := matrix[T](c, m, n, ldc, 0, 1)
	if !okA || !okB || !okC || !validTrans(transA, transB) {
		return gemmError[T, T](op, transA, transB, m, n, k, a, lda, 0, b, ldb, 0, c, ldc, 0, 1)
	}
	M, N, K, LDA, LDB, LDC := int32(m), int32(n), int32(k), int32(lda), int32(ldb), int32(ldc)
	return call(op, s, func(ctx cudaraw.CUcontext, h cublasraw.CublasHandle, sc *scalars) error {
		pal, pbe := setScalars(sc, alpha, beta)
		return gemm(ctx, h, transA, transB, M, N, K, pal, pa, LDA, pb, LDB, pbe, pc, LDC)
	}, cuda.Reads(a), cuda.Reads(b), cuda.Writes(c))
}

// GemmRowMajor is Gemm for row-major matrices: C = alpha·op(A)·op(B) + beta·C with
// op(A) m×k, op(B) k×n and C m×n stored by rows, lda, ldb and ldc their row
// lengths in memory. It computes the column-major product Cᵀ = op(B)ᵀ·op(A)ᵀ, which
// is C in row-major order: no data moves.
func GemmRowMajor[T GemmScalar](s *cuda.Stream, transA, transB Op, m, n, k int, alpha T, a cuda.Memory, lda int,
	b cuda.Memory, ldb int, beta T, c cuda.Memory, ldc int) error {
	return Gemm(s, transB, transA, n, m, k, alpha, b, ldb, a, lda, beta, c, ldc)
}

// GemmStridedBatched computes batch products C[i] = alpha·op(A[i])·op(B[i]) +
// beta·C[i] on s, where A[i] starts strideA elements after A[i-1] (likewise B and C):
// cublas{S,D,C,Z}gemmStridedBatched.
func GemmStridedBatched[T GemmScalar](s *cuda.Stream, transA, transB Op, m, n, k int, alpha T,
	a cuda.Memory, lda, strideA int, b cuda.Memory, ldb, strideB int, beta T, c cuda.Memory, ldc, strideC int, batch int) error {
	const op = "gemm strided batched"
	r, err := precisionOf[T](op)
	if err != nil {
		return err
	}
	gemm := r.gemmStridedBatched
	if batch < 0 || batch > maxInt32 || strideA < 0 || strideB < 0 || strideC < 0 {
		return fmt.Errorf("cublas: %s: %w: batch %d, strides %d, %d, %d", op, cuda.ErrInvalidArgument, batch, strideA, strideB, strideC)
	}
	ar, ac := dims(transA, m, k)
	br, bc := dims(transB, k, n)
	pa, okA := matrix[T](a, ar, ac, lda, strideA, batch)
	pb, okB := matrix[T](b, br, bc, ldb, strideB, batch)
	pc, okC := matrix[T](c, m, n, ldc, strideC, batch)
	if !okA || !okB || !okC || !validTrans(transA, transB) {
		return gemmError[T, T](op, transA, transB, m, n, k, a, lda, strideA, b, ldb, strideB, c, ldc, strideC, batch)
	}
	M, N, K, LDA, LDB, LDC, B := int32(m), int32(n), int32(k), int32(lda), int32(ldb), int32(ldc), int32(batch)
	SA, SB, SC := int64(strideA), int64(strideB), int64(strideC)
	return call(op, s, func(ctx cudaraw.CUcontext, h cublasraw.CublasHandle, sc *scalars) error {
		pal, pbe := setScalars(sc, alpha, beta)
		return gemm(ctx, h, transA, transB, M, N, K, pal, pa, LDA, SA, pb, LDB, SB, pbe, pc, LDC, SC, B)
	}, cuda.Reads(a), cuda.Reads(b), cuda.Writes(c))
}

// Gemv computes y = alpha·op(A)·x + beta·y on s, where A is m×n (op(A) is n×m when
// transposed), x and y vectors of the lengths op(A) takes and gives, with unit
// stride: cublas{S,D,C,Z}gemv.
func Gemv[T Scalar](s *cuda.Stream, trans Op, m, n int, alpha T, a cuda.Memory, lda int, x cuda.Memory,
	beta T, y cuda.Memory) error {
	const op = "gemv"
	r, err := precisionOf[T](op)
	if err != nil {
		return err
	}
	gemv := r.gemv
	xl, yl := n, m
	if trans != NoTrans {
		xl, yl = m, n
	}
	pa, err := batched[T](op, "A", a, m, n, lda, 0, 1)
	if err != nil {
		return err
	}
	px, err := vector[T](op, "x", x, xl)
	if err != nil {
		return err
	}
	py, err := vector[T](op, "y", y, yl)
	if err != nil {
		return err
	}
	if err := checkTrans(op, trans, NoTrans); err != nil {
		return err
	}
	M, N, LDA := int32(m), int32(n), int32(lda)
	return call(op, s, func(ctx cudaraw.CUcontext, h cublasraw.CublasHandle, sc *scalars) error {
		pal, pbe := setScalars(sc, alpha, beta)
		return gemv(ctx, h, trans, M, N, pal, pa, LDA, px, 1, pbe, py, 1)
	}, cuda.Reads(a), cuda.Reads(x), cuda.Writes(y))
}

// Axpy computes y = alpha·x + y for the first n elements on s: cublas{S,D,C,Z}axpy.
func Axpy[T Scalar](s *cuda.Stream, n int, alpha T, x, y cuda.Memory) error {
	const op = "axpy"
	r, err := precisionOf[T](op)
	if err != nil {
		return err
	}
	axpy := r.axpy
	px, err := vector[T](op, "x", x, n)
	if err != nil {
		return err
	}
	py, err := vector[T](op, "y", y, n)
	if err != nil {
		return err
	}
	N := int32(n)
	return call(op, s, func(ctx cudaraw.CUcontext, h cublasraw.CublasHandle, sc *scalars) error {
		pal := setScalar(sc, alpha)
		return axpy(ctx, h, N, pal, px, 1, py, 1)
	}, cuda.Reads(x), cuda.Writes(y))
}

// Scal computes x = alpha·x for the first n elements on s: cublas{S,D,C,Z}scal.
func Scal[T Scalar](s *cuda.Stream, n int, alpha T, x cuda.Memory) error {
	const op = "scal"
	r, err := precisionOf[T](op)
	if err != nil {
		return err
	}
	scal := r.scal
	px, err := vector[T](op, "x", x, n)
	if err != nil {
		return err
	}
	N := int32(n)
	return call(op, s, func(ctx cudaraw.CUcontext, h cublasraw.CublasHandle, sc *scalars) error {
		pal := setScalar(sc, alpha)
		return scal(ctx, h, N, pal, px, 1)
	}, cuda.Writes(x))
}

// DotTo computes the dot product of the first n elements of x and y on s into
// result, one element of T in GPU memory: cublas{S,D}dot with the device pointer
// mode, so that nothing waits. Dot returns it to the host.
func DotTo[T Real](s *cuda.Stream, n int, x, y, result cuda.Memory) error {
	return reduceTo("dot", s, n, []cuda.Memory{x, y}, result, func(ctx cudaraw.CUcontext, h cublasraw.CublasHandle, r *routines[T], N int32, p []*T, res *T) error {
		return r.dot(ctx, h, N, p[0], 1, p[1], 1, res)
	})
}

// Nrm2To computes the Euclidean norm of the first n elements of x on s into result,
// one element of T in GPU memory: cublas{S,D}nrm2 with the device pointer mode.
// Nrm2 returns it to the host.
func Nrm2To[T Real](s *cuda.Stream, n int, x, result cuda.Memory) error {
	return reduceTo("nrm2", s, n, []cuda.Memory{x}, result, func(ctx cudaraw.CUcontext, h cublasraw.CublasHandle, r *routines[T], N int32, p []*T, res *T) error {
		return r.nrm2(ctx, h, N, p[0], 1, res)
	})
}

// reduceTo is DotTo and Nrm2To: it checks the n-element inputs (named x, y) and the
// one-element result, and runs f with T's routines in the device pointer mode, the
// inputs read and the result written.
func reduceTo[T Real](op string, s *cuda.Stream, n int, in []cuda.Memory, result cuda.Memory,
	f func(ctx cudaraw.CUcontext, h cublasraw.CublasHandle, r *routines[T], n int32, p []*T, res *T) error) error {
	rt, err := precisionOf[T](op)
	if err != nil {
		return err
	}
	p := make([]*T, len(in))
	uses := make([]cuda.Use, 0, len(in)+1)
	for i, m := range in {
		if p[i], err = vector[T](op, string(rune('x'+i)), m, n); err != nil {
			return err
		}
		uses = append(uses, cuda.Reads(m))
	}
	r, err := vector[T](op, "result", result, 1)
	if err != nil {
		return err
	}
	N := int32(n)
	return call(op, s, func(ctx cudaraw.CUcontext, h cublasraw.CublasHandle, _ *scalars) error {
		return devicePointers(ctx, h, func() error { return f(ctx, h, rt, N, p, r) })
	}, append(uses, cuda.Writes(result))...)
}

// Dot returns the dot product of the first n elements of x and y, computed on s
// (DotTo into a scratch element, then copied to the host: it waits for s's work).
func Dot[T Real](s *cuda.Stream, n int, x, y cuda.Memory) (T, error) {
	return scalarResult[T](s, func(r *cuda.DeviceBuffer) error { return DotTo[T](s, n, x, y, r) })
}

// Nrm2 returns the Euclidean norm of the first n elements of x, computed on s
// (Nrm2To, then copied to the host: it waits for s's work).
func Nrm2[T Real](s *cuda.Stream, n int, x cuda.Memory) (T, error) {
	return scalarResult[T](s, func(r *cuda.DeviceBuffer) error { return Nrm2To[T](s, n, x, r) })
}

// scalarResult runs f with a one-element device buffer on s and returns its element.
func scalarResult[T Real](s *cuda.Stream, f func(r *cuda.DeviceBuffer) error) (T, error) {
	var out [1]T
	r, err := cuda.AllocFor[T](s, 1)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	if err := f(r); err != nil {
		return 0, err
	}
	err = cuda.CopyFromDevice(out[:], r)
	return out[0], err
}

// devicePointers runs f with h in the device pointer mode, then back in the host
// mode that the other operations use.
func devicePointers(ctx cudaraw.CUcontext, h cublasraw.CublasHandle, f func() error) error {
	if err := cublasraw.SetPointerModeIn(ctx, h, cublasraw.CUBLAS_POINTER_MODE_DEVICE); err != nil {
		return err
	}
	err := f()
	return errors.Join(err, cublasraw.SetPointerModeIn(ctx, h, cublasraw.CUBLAS_POINTER_MODE_HOST))
}

// dims returns the rows and columns a matrix operand holds when op(X) is r×c.
func dims(t Op, r, c int) (int, int) {
	if t == NoTrans {
		return r, c
	}
	return c, r
}

func checkTrans(op string, a, b Op) error {
	if !validTrans(a, b) {
		return transError(op, a, b)
	}
	return nil
}

// validTrans reports whether a and b are transpositions: NoTrans, Trans or ConjTrans.
func validTrans(a, b Op) bool {
	return uint32(a) <= uint32(ConjTrans) && uint32(b) <= uint32(ConjTrans) // the three are 0, 1 and 2
}

//go:noinline
func transError(op string, a, b Op) error {
	t := a
	if uint32(a) <= uint32(ConjTrans) {
		t = b
	}
	return fmt.Errorf("cublas: %s: %w: transposition %d", op, cuda.ErrInvalidArgument, int(t))
}

// batched checks that m holds batch r×c matrices of T with leading dimension ld,
// stride elements apart, and returns its address (one matrix: stride 0, batch 1). The
// checks are made by matrix and their errors out of line (operandError), so that the
// checks, which every call runs, stay short.
func batched[T any](op, name string, m cuda.Memory, r, c, ld, stride, batch int) (*T, error) {
	if p, ok := matrix[T](m, r, c, ld, stride, batch); ok {
		return p, nil
	}
	need, _ := extent(r, c, ld, stride, batch)
	_, err := cuda.DevicePtr[T](m)
	return nil, operandError(op, name, m, shape{r, c, ld, stride, batch}, need, err, reflect.TypeFor[T]())
}

// matrix is batched's check without its error: m's address and whether m holds the
// matrices. GEMMs run it for their three operands and only then, on a failure,
// batched for the error (gemmError): the names and shapes that errors report are
// not passed at every call.
func matrix[T any](m cuda.Memory, r, c, ld, stride, batch int) (*T, bool) {
	need, ok := 0, fits(r, c, ld)
	if batch != 1 {
		need, ok = extent(r, c, ld, stride, batch)
	} else if r != 0 && c != 0 {
		need = ld*(c-1) + r // one matrix: extent's span, in line
	}
	p, err := cuda.DevicePtr[T](m) // also nil and zero buffers
	return p, ok && err == nil && size(m)/int(unsafe.Sizeof(*new(T))) >= need
}

// gemmError is the error of a GEMM's operands, A and B of In and C of Out, that
// matrix or validTrans turned down: the first in the order A, B, C, transpositions.
//
//go:noinline
func gemmError[In, Out any](op string, transA, transB Op, m, n, k int, a cuda.Memory, lda, strideA int,
	b cuda.Memory, ldb, strideB int, c cuda.Memory, ldc, strideC, batch int) error {
	ar, ac := dims(transA, m, k)
	br, bc := dims(transB, k, n)
	if _, err := batched[In](op, "A", a, ar, ac, lda, strideA, batch); err != nil {
		return err
	}
	if _, err := batched[In](op, "B", b, br, bc, ldb, strideB, batch); err != nil {
		return err
	}
	if _, err := batched[Out](op, "C", c, m, n, ldc, strideC, batch); err != nil {
		return err
	}
	return checkTrans(op, transA, transB)
}

// size returns m's size in bytes: a DeviceBuffer's, the usual operand, by a direct
// call rather than through the interface's method table.
func size(m cuda.Memory) int {
	if b, ok := m.(*cuda.DeviceBuffer); ok {
		return b.Size()
	}
	return m.Size()
}

// extent returns how many elements batch r×c matrices with leading dimension ld,
// stride elements apart, span (0 when there are none), and false for a shape
// cuBLAS cannot take: negative sizes, a leading dimension below the rows, sizes
// past cuBLAS's int, or a span past Go's int (the check of the memory's size must
// not pass on a span that wrapped around).
func extent(r, c, ld, stride, batch int) (int, bool) {
	if !fits(r, c, ld) {
		return 0, false
	}
	if r == 0 || c == 0 || batch <= 0 {
		return 0, true
	}
	need := ld*(c-1) + r // below 2⁶²
	if batch > 1 {
		if stride > (math.MaxInt-need)/(batch-1) {
			return 0, false
		}
		need += stride * (batch - 1)
	}
	return need, true
}

// fits reports whether cuBLAS takes an r×c matrix with leading dimension ld: sizes
// not negative and within its int, the leading dimension at least the rows.
func fits(r, c, ld int) bool {
	return uint(r) <= maxInt32 && uint(c) <= maxInt32 && ld >= max(1, r) && ld <= maxInt32 // uint: negatives too
}

// shape is an operand's shape, for its error: r×c (a vector: c is -1), leading
// dimension ld, batch matrices stride elements apart.
type shape struct{ r, c, ld, stride, batch int }

// vector checks that m holds n elements of T and returns its address.
func vector[T Scalar](op, name string, m cuda.Memory, n int) (*T, error) {
	p, err := cuda.DevicePtr[T](m)
	if n < 0 || n > maxInt32 || err != nil || size(m)/int(unsafe.Sizeof(*new(T))) < n {
		return nil, operandError(op, name, m, shape{n, -1, 0, 0, 1}, n, err, reflect.TypeFor[T]())
	}
	return p, nil
}

const maxInt32 = 1<<31 - 1

// shapeError is the error of a matrix operand's shape that extent turns down, or nil.
func shapeError(op, name string, sh shape) error {
	r, c, ld := sh.r, sh.c, sh.ld
	switch {
	case r < 0 || c < 0:
		return fmt.Errorf("cublas: %s: %w: %s is %d×%d", op, cuda.ErrInvalidArgument, name, r, c)
	case ld < max(1, r) || ld > maxInt32 || r > maxInt32 || c > maxInt32:
		return fmt.Errorf("cublas: %s: %w: %s is %d×%d with leading dimension %d", op, cuda.ErrInvalidArgument, name, r, c, ld)
	}
	if _, ok := extent(r, c, ld, sh.stride, sh.batch); !ok {
		return fmt.Errorf("cublas: %s: %w: %s's %d matrices %d elements apart span more than an int", op,
			cuda.ErrInvalidArgument, name, sh.batch, sh.stride)
	}
	return nil
}

// operandError is the error of an operand that batched or vector turned down: a bad
// shape, DevicePtr's err, or memory too small for need elements of t.
//
//go:noinline
func operandError(op, name string, m cuda.Memory, sh shape, need int, err error, t reflect.Type) error {
	if sh.c < 0 { // a vector of sh.r elements
		if sh.r < 0 || sh.r > maxInt32 {
			return fmt.Errorf("cublas: %s: %w: %s has %d elements", op, cuda.ErrInvalidArgument, name, sh.r)
		}
	} else if e := shapeError(op, name, sh); e != nil {
		return e
	}
	switch {
	case m == nil:
		return fmt.Errorf("cublas: %s: %w: %s is nil", op, cuda.ErrInvalidArgument, name)
	case err != nil:
		return fmt.Errorf("cublas: %s: %s: %w", op, name, err)
	}
	return fmt.Errorf("cublas: %s: %w: %s needs %d elements of %v, the memory holds %d",
		op, cuda.ErrInvalidArgument, name, need, t, m.Size()/int(t.Size()))
}
