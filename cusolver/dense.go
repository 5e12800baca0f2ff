package cusolver

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
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

// Side is the side from which Ormqr applies Q: Left (Q·C) or Right (C·Q).
type Side = cublasraw.CublasSideMode

// The sides of Side.
const (
	Left  Side = cublasraw.CUBLAS_SIDE_LEFT  // op(Q)·C
	Right      = cublasraw.CUBLAS_SIDE_RIGHT // C·op(Q)
)

// EigMode says whether an eigenvalue or Jacobi SVD routine computes vectors too:
// NoVectors or Vectors.
type EigMode = cusolverraw.CusolverEigMode

// The modes of EigMode.
const (
	NoVectors EigMode = cusolverraw.CUSOLVER_EIG_MODE_NOVECTOR // values only
	Vectors           = cusolverraw.CUSOLVER_EIG_MODE_VECTOR   // values and vectors
)

// SVDJob is which singular vectors Gesvd computes, for U and for Vᴴ alike:
// SVDAll, SVDThin or SVDNone (LAPACK's jobu and jobvt 'A', 'S' and 'N').
type SVDJob int8

// The jobs of SVDJob.
const (
	SVDAll  SVDJob = 'A' // all of U's m columns (Vᴴ's n rows)
	SVDThin SVDJob = 'S' // the first min(m, n) columns of U (rows of Vᴴ)
	SVDNone SVDJob = 'N' // none: the memory may be nil
)

// Errors that an *InfoError matches, by the operation's info.
var (
	// ErrNotPositiveDefinite is matched by Potrf's error for a matrix that is not
	// positive definite.
	ErrNotPositiveDefinite = errors.New("cusolver: matrix is not positive definite")
	// ErrSingular is matched by Getrf's error for an exactly singular matrix.
	ErrSingular = errors.New("cusolver: matrix is singular")
	// ErrNoConvergence is matched by the error of Gesvd, GesvdjBatched, Syevd and
	// SyevjBatched when their iteration did not converge.
	ErrNoConvergence = errors.New("cusolver: no convergence")
)

// InfoError is a nonzero info (LAPACK's) that a factorization or solve wrote: for
// potrf, Info = i > 0 means the leading minor of order i is not positive definite
// (matches ErrNotPositiveDefinite); for getrf, U(i,i) is exactly zero (matches
// ErrSingular; the factorization is complete, but U is singular); Info = -i < 0
// means parameter i had an illegal value (matches cuda.ErrInvalidArgument). For
// gesvd, syevd, gesvdjBatched and syevjBatched, Info > 0 means the iteration did
// not converge (matches ErrNoConvergence): gesvd's Info superdiagonals of the
// bidiagonal form, syevd's Info off-diagonal elements of the tridiagonal form did
// not converge to zero; the Jacobi methods did not reach the tolerance within the
// sweeps. A batched operation (its Op ends in Batched) reports each matrix's info
// in an *InfoError of its own, with Matrix its index in the batch.
type InfoError struct {
	Op     string // potrf, potrs, getrf, getrs, geqrf, ormqr, orgqr, gesvd, gesvdjBatched, syevd or syevjBatched
	Info   int
	Matrix int // a batched operation's matrix (0-based); 0 for the others
}

// Error describes the info.
func (e *InfoError) Error() string {
	op := e.Op
	if batched(op) {
		op = fmt.Sprintf("%s: matrix %d of the batch", op, e.Matrix)
	}
	switch {
	case e.Info < 0:
		return fmt.Sprintf("cusolver: %s: parameter %d had an illegal value (info %d)", op, -e.Info, e.Info)
	case e.Op == "potrf":
		return fmt.Sprintf("cusolver: %s: the leading minor of order %d is not positive definite (info %d)", op, e.Info, e.Info)
	case e.Op == "getrf":
		return fmt.Sprintf("cusolver: %s: U(%d,%d) is exactly zero: the matrix is singular (info %d)", op, e.Info, e.Info, e.Info)
	case e.Op == "gesvd":
		return fmt.Sprintf("cusolver: %s: %d superdiagonals of the bidiagonal form did not converge to zero (info %d)", op, e.Info, e.Info)
	case e.Op == "syevd":
		return fmt.Sprintf("cusolver: %s: %d off-diagonal elements of the tridiagonal form did not converge to zero (info %d)", op, e.Info, e.Info)
	case batched(e.Op):
		return fmt.Sprintf("cusolver: %s: the Jacobi method did not converge within the tolerance and sweeps (info %d)", op, e.Info)
	}
	return fmt.Sprintf("cusolver: %s: info %d", op, e.Info)
}

// batched reports whether op is a batched operation's, whose infos are one per
// matrix.
func batched(op string) bool { return strings.HasSuffix(op, "Batched") }

// iterative reports whether op's positive info means no convergence.
func iterative(op string) bool { return op == "gesvd" || op == "syevd" || batched(op) }

// Is matches the sentinel the info means: ErrNotPositiveDefinite, ErrSingular,
// ErrNoConvergence or cuda.ErrInvalidArgument.
func (e *InfoError) Is(target error) bool {
	switch target {
	case ErrNotPositiveDefinite:
		return e.Op == "potrf" && e.Info > 0
	case ErrSingular:
		return e.Op == "getrf" && e.Info > 0
	case ErrNoConvergence:
		return iterative(e.Op) && e.Info > 0
	case cuda.ErrInvalidArgument:
		return e.Info < 0
	}
	return false
}

// Info is the info an operation queued by an Async function writes on the GPU (one
// per matrix for a batched operation; one per step for an operation of several
// steps, such as Gels): Check reads it. Close frees it; an Info dropped without
// Close is freed with its memory (cuda.DeviceBuffers) by the collector.
type Info struct {
	op     string
	buf    *cuda.DeviceBuffer // one int32, or one per matrix of a batch
	next   *Info              // the next step's, of an operation of several steps
	closed atomic.Bool
}

// Check waits for the operation (and for what was queued before it on its stream)
// and returns nil when every info is zero, else an *InfoError (for a batch or an
// operation of several steps, one for each nonzero info, joined). Check after Close
// returns an error matching cuda.ErrClosed.
func (i *Info) Check() error {
	if i == nil {
		return fmt.Errorf("cusolver: info: %w", cuda.ErrInvalidArgument)
	}
	var one [1]int32
	v := one[:]
	if n := i.buf.Len(); n > 1 {
		v = make([]int32, n)
	}
	if err := cuda.CopyFromDevice(v, i.buf); err != nil {
		return fmt.Errorf("cusolver: %s: reading the info: %w", i.op, err)
	}
	var failed []error
	for k, x := range v {
		if x != 0 {
			failed = append(failed, &InfoError{Op: i.op, Info: int(x), Matrix: k})
		}
	}
	if i.next != nil {
		if err := i.next.Check(); err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) == 1 {
		return failed[0]
	}
	return errors.Join(failed...)
}

// Close frees the info's GPU memory, ordered after the operation. Closing again, or
// closing a nil Info, returns an error that matches cuda.ErrClosed and
// resource.ErrReleased.
func (i *Info) Close() error {
	if i == nil || i.closed.Swap(true) {
		return errs.Closed("cusolver: info")
	}
	err := i.buf.Close()
	if i.next != nil {
		err = errors.Join(err, i.next.Close())
	}
	return err
}

// then makes next the info of i's operation's next step (nil when i is nil: the
// first step failed): Check and Close cover both. When next is nil (the step
// failed to queue), i is closed, after its operation, and err returned.
func (i *Info) then(next *Info, err error) (*Info, error) {
	if err != nil {
		i.Close()
		return nil, err
	}
	i.next = next
	return i, nil
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
	return factor(op, s, []cuda.Use{cuda.Writes(a)}, 1, func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle) (lwork int32, err error) {
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
	return factor(op, s, []cuda.Use{cuda.Writes(a), cuda.Writes(ipiv)}, 1, func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle) (lwork int32, err error) {
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

// Inverse computes the inverse of the n×n matrix A into inv (n×n, leading dimension
// n) through LU: Getrf of A in place (A holds its L and U factors after), then
// Getrs of the identity. It waits, and returns an *InfoError matching ErrSingular
// when A is exactly singular (inv then holds Inf or NaN).
func Inverse[T Scalar](s *cuda.Stream, n int, a cuda.Memory, lda int, inv cuda.Memory) error {
	return wait(InverseAsync[T](s, n, a, lda, inv))
}

// InverseAsync queues Inverse on s and returns its Info (getrf's and getrs's)
// without waiting.
func InverseAsync[T Scalar](s *cuda.Stream, n int, a cuda.Memory, lda int, inv cuda.Memory) (*Info, error) {
	const op = "inverse"
	if _, err := precisionOf[T](op); err != nil {
		return nil, err
	}
	if _, err := matrix[T](op, "A", a, n, n, lda); err != nil {
		return nil, err
	}
	if _, err := matrix[T](op, "inv", inv, n, n, n); err != nil {
		return nil, err
	}
	if err := cuda.CheckEnqueue(s, cuda.Writes(a), cuda.Writes(inv)); err != nil {
		return nil, fmt.Errorf("cusolver: %s: %w", op, err)
	}
	if n > 0 {
		eye := make([]T, n*n)
		for i := range n {
			eye[i+i*n] = 1
		}
		id, err := cuda.AllocFrom(s, eye)
		if err != nil {
			return nil, fmt.Errorf("cusolver: %s: the identity: %w", op, err)
		}
		err = cuda.CopyAsync(s, inv, id)
		id.Close() // ordered after the copy by the hand-off
		if err != nil {
			return nil, fmt.Errorf("cusolver: %s: the identity: %w", op, err)
		}
	}
	ipiv, err := cuda.AllocFor[int32](s, max(n, 1))
	if err != nil {
		return nil, fmt.Errorf("cusolver: %s: allocating the pivots: %w", op, err)
	}
	defer ipiv.Close() // ordered after getrs by the hand-off
	info, err := GetrfAsync[T](s, n, n, a, lda, ipiv)
	if err != nil {
		return nil, err
	}
	return info.then(GetrsAsync[T](s, NoTrans, n, n, a, lda, ipiv, inv, n))
}

// factor runs an operation with a workspace: the workspace size from size
// (elements of T), the workspace from the device's pool on s, and run queued with
// it, the operands' uses and a new Info of batch infos; the workspace is freed after
// it on s.
func factor[T Scalar](op string, s *cuda.Stream, uses []cuda.Use, batch int,
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
	return queue(op, s, ctx, h, batch, append(uses, cuda.Writes(ws)), func(c cudaraw.CUcontext, rh cusolverraw.CusolverDnHandle, info *int32) error {
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
	return queue(op, s, ctx, h, 1, uses, run)
}

// queue allocates the operation's Info (batch infos) on s and queues run with h
// bound to s, the uses and the Info written.
func queue(op string, s *cuda.Stream, ctx *cuda.Context, h *handle, batch int, uses []cuda.Use,
	run func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, info *int32) error) (*Info, error) {
	buf, err := cuda.AllocFor[int32](s, batch)
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
	return matrices[T](op, name, m, r, c, ld, 1)
}

// matrices checks that m holds batch r×c matrices of T with leading dimension ld,
// one after another (matrix i at element i·ld·c, as cuSOLVER's batched routines
// take them), within cuSOLVER's int, and returns the first one's address.
func matrices[T Scalar](op, name string, m cuda.Memory, r, c, ld, batch int) (*T, error) {
	if r < 0 || c < 0 || ld < max(1, r) || r > maxInt32 || c > maxInt32 || ld > maxInt32 {
		return nil, fmt.Errorf("cusolver: %s: %w: %s is %d×%d with leading dimension %d", op, cuda.ErrInvalidArgument, name, r, c, ld)
	}
	if batch < 1 || batch > maxInt32 || c > 0 && ld*c > math.MaxInt/batch {
		return nil, fmt.Errorf("cusolver: %s: %w: a batch of %d matrices %d×%d with leading dimension %d", op, cuda.ErrInvalidArgument, batch, r, c, ld)
	}
	need := 0
	if r > 0 && c > 0 {
		need = ld*c*(batch-1) + ld*(c-1) + r
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
