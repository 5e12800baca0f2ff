package cusolver

import (
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"unsafe"

	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cusolver/cusolverraw"
	"github.com/gocuda/gocuda/internal/errs"
)

// Scalar is an element type of the dense operations: float32, float64, complex64
// or complex128 (cuSOLVER's S, D, C and Z). complex64 and complex128 have the layout
// of cuComplex and cuDoubleComplex.
type Scalar interface {
	float32 | float64 | complex64 | complex128
}

// Fill is the triangle of a symmetric (Hermitian) matrix that Potrf reads and
// overwrites: Lower or Upper.
type Fill = cublasraw.CublasFillMode

// The triangles of Fill.
const (
	Lower Fill = cublasraw.CUBLAS_FILL_MODE_LOWER // A = L·Lᴴ, L in the lower triangle
	Upper      = cublasraw.CUBLAS_FILL_MODE_UPPER // A = Uᴴ·U, U in the upper triangle
)

// Op is the transposition of the matrix Getrs solves with: NoTrans, Trans or
// ConjTrans.
type Op = cublasraw.CublasOperation

// The transpositions of Op.
const (
	NoTrans   Op = cublasraw.CUBLAS_OP_N // A·X = B
	Trans        = cublasraw.CUBLAS_OP_T // Aᵀ·X = B
	ConjTrans    = cublasraw.CUBLAS_OP_C // Aᴴ·X = B
)

// Errors that an *InfoError matches, by the operation's info.
var (
	// ErrNotPositiveDefinite is matched by Potrf's error for a matrix that is not
	// positive definite.
	ErrNotPositiveDefinite = errors.New("cusolver: matrix is not positive definite")
	// ErrSingular is matched by Getrf's error for an exactly singular matrix.
	ErrSingular = errors.New("cusolver: matrix is singular")
)

// InfoError is a nonzero info (LAPACK's) that a factorization or solve wrote: for
// potrf, Info = i > 0 means the leading minor of order i is not positive definite
// (matches ErrNotPositiveDefinite); for getrf, U(i,i) is exactly zero (matches
// ErrSingular; the factorization is complete, but U is singular); Info = -i < 0
// means parameter i had an illegal value (matches cuda.ErrInvalidArgument).
type InfoError struct {
	Op   string // potrf, potrs, getrf or getrs
	Info int
}

// Error describes the info.
func (e *InfoError) Error() string {
	switch {
	case e.Info < 0:
		return fmt.Sprintf("cusolver: %s: parameter %d had an illegal value (info %d)", e.Op, -e.Info, e.Info)
	case e.Op == "potrf":
		return fmt.Sprintf("cusolver: %s: the leading minor of order %d is not positive definite (info %d)", e.Op, e.Info, e.Info)
	case e.Op == "getrf":
		return fmt.Sprintf("cusolver: %s: U(%d,%d) is exactly zero: the matrix is singular (info %d)", e.Op, e.Info, e.Info, e.Info)
	}
	return fmt.Sprintf("cusolver: %s: info %d", e.Op, e.Info)
}

// Is matches the sentinel the info means: ErrNotPositiveDefinite, ErrSingular or
// cuda.ErrInvalidArgument.
func (e *InfoError) Is(target error) bool {
	switch target {
	case ErrNotPositiveDefinite:
		return e.Op == "potrf" && e.Info > 0
	case ErrSingular:
		return e.Op == "getrf" && e.Info > 0
	case cuda.ErrInvalidArgument:
		return e.Info < 0
	}
	return false
}

// Info is the info an operation queued by an Async function writes on the GPU:
// Check reads it. Close frees it; an Info dropped without Close is freed with its
// memory (a cuda.DeviceBuffer) by the collector.
type Info struct {
	op     string
	buf    *cuda.DeviceBuffer // one int32
	closed atomic.Bool
}

// Check waits for the operation (and for what was queued before it on its stream)
// and returns nil for a zero info, else an *InfoError. Check after Close returns an
// error matching cuda.ErrClosed.
func (i *Info) Check() error {
	if i == nil {
		return fmt.Errorf("cusolver: info: %w", cuda.ErrInvalidArgument)
	}
	var v [1]int32
	if err := cuda.CopyFromDevice(v[:], i.buf); err != nil {
		return fmt.Errorf("cusolver: %s: reading the info: %w", i.op, err)
	}
	if v[0] != 0 {
		return &InfoError{Op: i.op, Info: int(v[0])}
	}
	return nil
}

// Close frees the info's GPU memory, ordered after the operation. Closing again, or
// closing a nil Info, returns an error that matches cuda.ErrClosed and
// resource.ErrReleased.
func (i *Info) Close() error {
	if i == nil || i.closed.Swap(true) {
		return errs.Closed("cusolver: info")
	}
	return i.buf.Close()
}

// wait checks the info and closes it: the synchronous forms of the Async functions.
func wait(i *Info, err error) error {
	if err != nil {
		return err
	}
	return errors.Join(i.Check(), i.Close())
}

// Matrices are column-major, as in LAPACK: element (i, j) of a matrix with leading
// dimension ld is element i + j·ld of its memory.
//
// Every operation checks its arguments before any CUDA call: negative sizes, leading
// dimensions smaller than the rows, memory of another element type (AllocFor) or
// too small for the operand, pivots that are not int32 memory, and sizes past
// cuSOLVER's int are errors matching cuda.ErrInvalidArgument; memory of another
// context than the stream's matches cuda.ErrWrongContext. The operation then runs on
// s with a handle of s's context from a cache (see MaxIdleHandles), waiting on the
// GPU for its operands' conflicting uses on other streams (inputs are read, outputs
// written), with its workspace from the device's pool. The Async forms return once
// the work is queued, with the Info it will write; the others wait for it and return
// the info as an *InfoError. A failure of cuSOLVER is its Status, wrapped with the
// operation's name.

// Potrf computes the Cholesky factorization of the n×n Hermitian positive definite
// matrix A in place, in the triangle uplo says (Lower: A = L·Lᴴ, Upper: A = Uᴴ·U; the
// other triangle is not referenced): cusolverDn{S,D,C,Z}potrf. It waits for the
// factorization, and returns an *InfoError matching ErrNotPositiveDefinite when A is
// not positive definite.
func Potrf[T Scalar](s *cuda.Stream, uplo Fill, n int, a cuda.Memory, lda int) error {
	return wait(PotrfAsync[T](s, uplo, n, a, lda))
}

// PotrfAsync queues Potrf on s and returns its Info without waiting.
func PotrfAsync[T Scalar](s *cuda.Stream, uplo Fill, n int, a cuda.Memory, lda int) (*Info, error) {
	const op = "potrf"
	r, err := precisionOf[T](op)
	if err != nil {
		return nil, err
	}
	if err := checkFill(op, uplo); err != nil {
		return nil, err
	}
	pa, err := matrix[T](op, "A", a, n, n, lda)
	if err != nil {
		return nil, err
	}
	N, LDA := int32(n), int32(lda)
	return factor(op, s, []cuda.Use{cuda.Writes(a)}, func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle) (lwork int32, err error) {
		err = r.potrfBufferSize(c, h, uplo, N, pa, LDA, &lwork)
		return lwork, err
	}, func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, w *T, lwork int32, info *int32) error {
		return r.potrf(c, h, uplo, N, pa, LDA, w, lwork, info)
	})
}

// Potrs solves A·X = B for the n×nrhs matrix B in place (X overwrites B), with A's
// Cholesky factor from Potrf (the same uplo): cusolverDn{S,D,C,Z}potrs. It waits for
// the solve.
func Potrs[T Scalar](s *cuda.Stream, uplo Fill, n, nrhs int, a cuda.Memory, lda int, b cuda.Memory, ldb int) error {
	return wait(PotrsAsync[T](s, uplo, n, nrhs, a, lda, b, ldb))
}

// PotrsAsync queues Potrs on s and returns its Info without waiting.
func PotrsAsync[T Scalar](s *cuda.Stream, uplo Fill, n, nrhs int, a cuda.Memory, lda int, b cuda.Memory, ldb int) (*Info, error) {
	const op = "potrs"
	r, err := precisionOf[T](op)
	if err != nil {
		return nil, err
	}
	if err := checkFill(op, uplo); err != nil {
		return nil, err
	}
	pa, err := matrix[T](op, "A", a, n, n, lda)
	if err != nil {
		return nil, err
	}
	pb, err := matrix[T](op, "B", b, n, nrhs, ldb)
	if err != nil {
		return nil, err
	}
	N, NRHS, LDA, LDB := int32(n), int32(nrhs), int32(lda), int32(ldb)
	return solve(op, s, []cuda.Use{cuda.Reads(a), cuda.Writes(b)}, func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, info *int32) error {
		return r.potrs(c, h, uplo, N, NRHS, pa, LDA, pb, LDB, info)
	})
}

// Getrf computes the LU factorization with partial pivoting of the m×n matrix A in
// place, P·A = L·U (L unit lower triangular, U upper triangular), and the pivots
// into ipiv (min(m, n) int32, 1-based as in LAPACK: row i was swapped with row
// ipiv[i]): cusolverDn{S,D,C,Z}getrf. It waits for the factorization, and returns
// an *InfoError matching ErrSingular when a U(i,i) is exactly zero.
func Getrf[T Scalar](s *cuda.Stream, m, n int, a cuda.Memory, lda int, ipiv cuda.Memory) error {
	return wait(GetrfAsync[T](s, m, n, a, lda, ipiv))
}

// GetrfAsync queues Getrf on s and returns its Info without waiting.
func GetrfAsync[T Scalar](s *cuda.Stream, m, n int, a cuda.Memory, lda int, ipiv cuda.Memory) (*Info, error) {
	const op = "getrf"
	r, err := precisionOf[T](op)
	if err != nil {
		return nil, err
	}
	pa, err := matrix[T](op, "A", a, m, n, lda)
	if err != nil {
		return nil, err
	}
	pp, err := operand[int32](op, "ipiv", ipiv, min(m, n))
	if err != nil {
		return nil, err
	}
	M, N, LDA := int32(m), int32(n), int32(lda)
	return factor(op, s, []cuda.Use{cuda.Writes(a), cuda.Writes(ipiv)}, func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle) (lwork int32, err error) {
		err = r.getrfBufferSize(c, h, M, N, pa, LDA, &lwork)
		return lwork, err
	}, func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, w *T, _ int32, info *int32) error {
		return r.getrf(c, h, M, N, pa, LDA, w, pp, info)
	})
}

// Getrs solves op(A)·X = B for the n×nrhs matrix B in place (X overwrites B), with
// the n×n A's LU factorization and pivots from Getrf: cusolverDn{S,D,C,Z}getrs. It
// waits for the solve.
func Getrs[T Scalar](s *cuda.Stream, trans Op, n, nrhs int, a cuda.Memory, lda int, ipiv cuda.Memory,
	b cuda.Memory, ldb int) error {
	return wait(GetrsAsync[T](s, trans, n, nrhs, a, lda, ipiv, b, ldb))
}

// GetrsAsync queues Getrs on s and returns its Info without waiting.
func GetrsAsync[T Scalar](s *cuda.Stream, trans Op, n, nrhs int, a cuda.Memory, lda int, ipiv cuda.Memory,
	b cuda.Memory, ldb int) (*Info, error) {
	const op = "getrs"
	r, err := precisionOf[T](op)
	if err != nil {
		return nil, err
	}
	if trans != NoTrans && trans != Trans && trans != ConjTrans {
		return nil, fmt.Errorf("cusolver: %s: %w: transposition %d", op, cuda.ErrInvalidArgument, int(trans))
	}
	pa, err := matrix[T](op, "A", a, n, n, lda)
	if err != nil {
		return nil, err
	}
	pp, err := operand[int32](op, "ipiv", ipiv, n)
	if err != nil {
		return nil, err
	}
	pb, err := matrix[T](op, "B", b, n, nrhs, ldb)
	if err != nil {
		return nil, err
	}
	N, NRHS, LDA, LDB := int32(n), int32(nrhs), int32(lda), int32(ldb)
	return solve(op, s, []cuda.Use{cuda.Reads(a), cuda.Reads(ipiv), cuda.Writes(b)}, func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, info *int32) error {
		return r.getrs(c, h, trans, N, NRHS, pa, LDA, pp, pb, LDB, info)
	})
}

// factor runs a factorization: the workspace size from size (elements of T), the
// workspace from the device's pool on s, and run queued with it, the operands' uses
// and a new Info; the workspace is freed after it on s.
func factor[T Scalar](op string, s *cuda.Stream, uses []cuda.Use,
	size func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle) (int32, error),
	run func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, w *T, lwork int32, info *int32) error) (*Info, error) {
	fail := func(err error) (*Info, error) { return nil, fmt.Errorf("cusolver: %s: %w", op, err) }
	ctx, h, err := take(s, uses)
	if err != nil {
		return fail(err)
	}
	defer handles.Put(s, h)
	lwork, err := size(ctx.Handle(), h.Raw)
	if err != nil {
		return fail(fmt.Errorf("workspace size: %w", err))
	}
	if lwork < 0 {
		return fail(fmt.Errorf("%w: cuSOLVER asked for a workspace of %d elements", cusolverraw.ErrInternalError, lwork))
	}
	// At least one element: a zero-size allocation is an error, and cuSOLVER reads
	// the pointer whatever lwork is.
	ws, err := ctx.Alloc(s, max(int(lwork), 1)*elemSize[T]())
	if err != nil {
		return fail(fmt.Errorf("allocating the workspace: %w", err))
	}
	defer ws.Close() // ordered after the factorization by the hand-off
	wp, err := cuda.DevicePtr[T](ws)
	if err != nil {
		return fail(err)
	}
	return queue(op, s, ctx, h, append(uses, cuda.Writes(ws)), func(c cudaraw.CUcontext, rh cusolverraw.CusolverDnHandle, info *int32) error {
		return run(c, rh, wp, lwork, info)
	})
}

// solve runs a solve: run queued with the operands' uses and a new Info.
func solve(op string, s *cuda.Stream, uses []cuda.Use, run func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, info *int32) error) (*Info, error) {
	ctx, h, err := take(s, uses)
	if err != nil {
		return nil, fmt.Errorf("cusolver: %s: %w", op, err)
	}
	defer handles.Put(s, h)
	return queue(op, s, ctx, h, uses, run)
}

// queue allocates the operation's Info on s and queues run with h bound to s, the
// uses and the Info written.
func queue(op string, s *cuda.Stream, ctx *cuda.Context, h *handle, uses []cuda.Use,
	run func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, info *int32) error) (*Info, error) {
	buf, err := cuda.AllocFor[int32](s, 1)
	if err != nil {
		return nil, fmt.Errorf("cusolver: %s: allocating the info: %w", op, err)
	}
	info := &Info{op: op, buf: buf}
	pi, err := cuda.DevicePtr[int32](buf)
	if err == nil {
		err = enqueue(s, h, func(c cudaraw.CUcontext, rh cusolverraw.CusolverDnHandle) error { return run(c, rh, pi) }, append(uses, cuda.Writes(buf)))
	}
	if err != nil {
		buf.Close()
		return nil, fmt.Errorf("cusolver: %s: %w", op, err)
	}
	return info, nil
}

func checkFill(op string, uplo Fill) error {
	if uplo != Lower && uplo != Upper {
		return fmt.Errorf("cusolver: %s: %w: fill mode %d", op, cuda.ErrInvalidArgument, int(uplo))
	}
	return nil
}

// matrix checks that m holds an r×c matrix of T with leading dimension ld, within
// cuSOLVER's int, and returns its address.
func matrix[T Scalar](op, name string, m cuda.Memory, r, c, ld int) (*T, error) {
	if r < 0 || c < 0 || ld < max(1, r) || r > maxInt32 || c > maxInt32 || ld > maxInt32 {
		return nil, fmt.Errorf("cusolver: %s: %w: %s is %d×%d with leading dimension %d", op, cuda.ErrInvalidArgument, name, r, c, ld)
	}
	need := 0
	if r > 0 && c > 0 {
		need = ld*(c-1) + r
	}
	return operand[T](op, name, m, need)
}

const maxInt32 = 1<<31 - 1

// operand checks that m is memory of T (or untyped) with room for need elements.
func operand[T any](op, name string, m cuda.Memory, need int) (*T, error) {
	if m == nil {
		return nil, fmt.Errorf("cusolver: %s: %w: %s is nil", op, cuda.ErrInvalidArgument, name)
	}
	p, err := cuda.DevicePtr[T](m) // also nil and zero buffers
	if err != nil {
		return nil, fmt.Errorf("cusolver: %s: %s: %w", op, name, err)
	}
	if size := int(unsafe.Sizeof(*new(T))); m.Size()/size < need {
		return nil, fmt.Errorf("cusolver: %s: %w: %s needs %d elements of %v, the memory holds %d",
			op, cuda.ErrInvalidArgument, name, need, reflect.TypeFor[T](), m.Size()/size)
	}
	return p, nil
}

func elemSize[T Scalar]() int { return int(unsafe.Sizeof(*new(T))) }
