package cusolver

import (
	"fmt"
	"math"
	"reflect"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cusolver/cusolverraw"
)

// Real is the real type of a Scalar: float32 (of float32 and complex64) or float64
// (of float64 and complex128), the type of singular values and eigenvalues.
type Real interface {
	float32 | float64
}

// spectralRow returns T's row of spectra with its real type R, or an error matching
// cuda.ErrInvalidArgument.
func spectralRow[T Scalar, R Real](op string) (*spectral[T, R], error) {
	if r, ok := spectralOf[T, R](); ok {
		return r, nil
	}
	return nil, fmt.Errorf("cusolver: %s: %w: no cuSOLVER routines for element type %v", op, cuda.ErrInvalidArgument, reflect.TypeFor[T]())
}

// Gesvd computes the singular value decomposition A = U·Σ·Vᴴ of the m×n matrix A,
// m ≥ n (for m < n, decompose Aᴴ): the n singular values, descending, into sv
// (n elements of T's real type: float32 for float32 and complex64, float64 for the
// others); the left singular vectors into U (jobu SVDAll: m×m; SVDThin: m×n;
// SVDNone: none, u may be nil and ldu is not read) and Vᴴ into vt (jobvt SVDAll or
// SVDThin: n×n; SVDNone: none): cusolverDn{S,D,C,Z}gesvd. A is overwritten. It
// waits, and returns an *InfoError matching ErrNoConvergence when the iteration did
// not converge.
func Gesvd[T Scalar](s *cuda.Stream, jobu, jobvt SVDJob, m, n int, a cuda.Memory, lda int, sv, u cuda.Memory, ldu int,
	vt cuda.Memory, ldvt int) error {
	return wait(GesvdAsync[T](s, jobu, jobvt, m, n, a, lda, sv, u, ldu, vt, ldvt))
}

// GesvdAsync queues Gesvd on s and returns its Info without waiting.
func GesvdAsync[T Scalar](s *cuda.Stream, jobu, jobvt SVDJob, m, n int, a cuda.Memory, lda int, sv, u cuda.Memory, ldu int,
	vt cuda.Memory, ldvt int) (*Info, error) {
	return withReal[T](func() (*Info, error) {
		return gesvd[T, float32](s, jobu, jobvt, m, n, a, lda, sv, u, ldu, vt, ldvt)
	}, func() (*Info, error) {
		return gesvd[T, float64](s, jobu, jobvt, m, n, a, lda, sv, u, ldu, vt, ldvt)
	})
}

func gesvd[T Scalar, R Real](s *cuda.Stream, jobu, jobvt SVDJob, m, n int, a cuda.Memory, lda int, sv, u cuda.Memory, ldu int,
	vt cuda.Memory, ldvt int) (*Info, error) {
	const op = "gesvd"
	r, err := spectralRow[T, R](op)
	if err != nil {
		return nil, err
	}
	for _, j := range []SVDJob{jobu, jobvt} {
		if j != SVDAll && j != SVDThin && j != SVDNone {
			return nil, fmt.Errorf("cusolver: %s: %w: job %q (SVDAll, SVDThin or SVDNone)", op, cuda.ErrInvalidArgument, rune(j))
		}
	}
	if m < n {
		return nil, fmt.Errorf("cusolver: %s: %w: A is %d×%d: cuSOLVER's gesvd needs m ≥ n (decompose Aᴴ)", op, cuda.ErrInvalidArgument, m, n)
	}
	pa, err := matrix[T](op, "A", a, m, n, lda)
	if err != nil {
		return nil, err
	}
	ps, err := operand[R](op, "S", sv, n)
	if err != nil {
		return nil, err
	}
	uses := []cuda.Use{cuda.Writes(a), cuda.Writes(sv)}
	// Vectors not computed: no memory, and the least leading dimension LAPACK takes.
	var pu, pvt *T
	LDU, LDVT := int32(max(1, m)), int32(max(1, n))
	if jobu != SVDNone {
		cols := m
		if jobu == SVDThin {
			cols = n
		}
		if pu, err = matrix[T](op, "U", u, m, cols, ldu); err != nil {
			return nil, err
		}
		LDU, uses = int32(ldu), append(uses, cuda.Writes(u))
	}
	if jobvt != SVDNone {
		if pvt, err = matrix[T](op, "VT", vt, n, n, ldvt); err != nil {
			return nil, err
		}
		LDVT, uses = int32(ldvt), append(uses, cuda.Writes(vt))
	}
	M, N, LDA := int32(m), int32(n), int32(lda)
	return factor(op, s, uses, 1, func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle) (lwork int32, err error) {
		err = r.gesvdBufferSize(c, h, M, N, &lwork)
		return lwork, err
	}, func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, w *T, lwork int32, info *int32) error {
		// rwork (the unconverged superdiagonal) is optional: nil.
		return r.gesvd(c, h, int8(jobu), int8(jobvt), M, N, pa, LDA, ps, pu, LDU, pvt, LDVT, w, lwork, nil, info)
	})
}

// MaxJacobiBatched is the largest m and n of GesvdjBatched and n of SyevjBatched:
// cuSOLVER's batched Jacobi methods keep each matrix in one thread block.
const MaxJacobiBatched = 32

// Jacobi are the parameters of the Jacobi methods of GesvdjBatched and SyevjBatched
// (cuSOLVER's gesvdjInfo_t and syevjInfo_t); a nil *Jacobi, like the zero value,
// is cuSOLVER's defaults.
type Jacobi struct {
	// Tolerance is the accuracy at which the iteration stops; 0: the element type's
	// machine precision.
	Tolerance float64
	// MaxSweeps is the most sweeps; 0: cuSOLVER's default (100).
	MaxSweeps int
	// Unsorted leaves the values in the order the iteration finds them, and the
	// vectors with them; otherwise singular values are sorted descending and
	// eigenvalues ascending.
	Unsorted bool
}

// check reports a Tolerance that is negative or not finite, or MaxSweeps out of
// range, before any library call.
func (j *Jacobi) check(op string) error {
	if j == nil {
		return nil
	}
	if j.Tolerance < 0 || math.IsNaN(j.Tolerance) || math.IsInf(j.Tolerance, 0) || j.MaxSweeps < 0 || j.MaxSweeps > maxInt32 {
		return fmt.Errorf("cusolver: %s: %w: Jacobi parameters %+v", op, cuda.ErrInvalidArgument, *j)
	}
	return nil
}

// jacobiParams makes cuSOLVER's parameters object P of a Jacobi method (with create)
// and sets j's parameters in it. It is host memory, which the batched routines read
// when they are called (their kernels take the values as arguments), so the caller
// destroys it once the operation is queued.
func jacobiParams[P cusolverraw.GesvdjInfo | cusolverraw.SyevjInfo](op string, j *Jacobi, create func(*P) error, destroy func(P) error,
	tolerance func(P, float64) error, sweeps func(P, int32) error, sort func(P, int32) error) (P, error) {
	var p P
	if err := create(&p); err != nil {
		return p, fmt.Errorf("cusolver: %s: creating the Jacobi parameters: %w", op, err)
	}
	var err error
	if j != nil && j.Tolerance > 0 {
		err = tolerance(p, j.Tolerance)
	}
	if err == nil && j != nil && j.MaxSweeps > 0 {
		err = sweeps(p, int32(j.MaxSweeps))
	}
	if err == nil && j != nil && j.Unsorted {
		err = sort(p, 0)
	}
	if err != nil {
		destroy(p)
		return p, fmt.Errorf("cusolver: %s: setting the Jacobi parameters: %w", op, err)
	}
	return p, nil
}

// GesvdjBatched computes the singular value decompositions A_i = U_i·Σ_i·V_iᴴ of
// batch m×n matrices (m, n ≤ MaxJacobiBatched) by the Jacobi method:
// cusolverDn{S,D,C,Z}gesvdjBatched. A holds the matrices one after another (A_i at
// element i·lda·n) and is overwritten; sv gets each one's min(m, n) singular values
// (of T's real type) one after another; with jobz Vectors, u gets each m×m U_i (at
// i·ldu·m) and v each n×n V_i — V itself, not Vᴴ — (at i·ldv·n); with NoVectors, u
// and v may be nil and ldu, ldv are not read. j sets the Jacobi parameters (nil:
// cuSOLVER's defaults). It waits, and returns an *InfoError matching
// ErrNoConvergence, with the matrix's index, for each matrix that did not converge.
func GesvdjBatched[T Scalar](s *cuda.Stream, jobz EigMode, m, n int, a cuda.Memory, lda int, sv, u cuda.Memory, ldu int,
	v cuda.Memory, ldv int, batch int, j *Jacobi) error {
	return wait(GesvdjBatchedAsync[T](s, jobz, m, n, a, lda, sv, u, ldu, v, ldv, batch, j))
}

// GesvdjBatchedAsync queues GesvdjBatched on s and returns its Info (one info per
// matrix) without waiting.
func GesvdjBatchedAsync[T Scalar](s *cuda.Stream, jobz EigMode, m, n int, a cuda.Memory, lda int, sv, u cuda.Memory, ldu int,
	v cuda.Memory, ldv int, batch int, j *Jacobi) (*Info, error) {
	return withReal[T](func() (*Info, error) {
		return gesvdjBatched[T, float32](s, jobz, m, n, a, lda, sv, u, ldu, v, ldv, batch, j)
	}, func() (*Info, error) {
		return gesvdjBatched[T, float64](s, jobz, m, n, a, lda, sv, u, ldu, v, ldv, batch, j)
	})
}

func gesvdjBatched[T Scalar, R Real](s *cuda.Stream, jobz EigMode, m, n int, a cuda.Memory, lda int, sv, u cuda.Memory, ldu int,
	v cuda.Memory, ldv int, batch int, j *Jacobi) (*Info, error) {
	const op = "gesvdjBatched"
	r, err := spectralRow[T, R](op)
	if err != nil {
		return nil, err
	}
	if err := checkEigMode(op, jobz); err != nil {
		return nil, err
	}
	if err := j.check(op); err != nil {
		return nil, err
	}
	if m > MaxJacobiBatched || n > MaxJacobiBatched {
		return nil, fmt.Errorf("cusolver: %s: %w: %d×%d matrices: the batched Jacobi SVD takes at most %d×%d", op, cuda.ErrInvalidArgument, m, n, MaxJacobiBatched, MaxJacobiBatched)
	}
	pa, err := matrices[T](op, "A", a, m, n, lda, batch)
	if err != nil {
		return nil, err
	}
	ps, err := operand[R](op, "S", sv, min(m, n)*batch)
	if err != nil {
		return nil, err
	}
	uses := []cuda.Use{cuda.Writes(a), cuda.Writes(sv)}
	var pu, pv *T
	LDU, LDV := int32(max(1, m)), int32(max(1, n))
	if jobz == Vectors {
		if pu, err = matrices[T](op, "U", u, m, m, ldu, batch); err != nil {
			return nil, err
		}
		if pv, err = matrices[T](op, "V", v, n, n, ldv, batch); err != nil {
			return nil, err
		}
		LDU, LDV, uses = int32(ldu), int32(ldv), append(uses, cuda.Writes(u), cuda.Writes(v))
	}
	if err := cuda.CheckEnqueue(s, uses...); err != nil { // before cuSOLVER is loaded
		return nil, fmt.Errorf("cusolver: %s: %w", op, err)
	}
	if jobz == NoVectors {
		// gesvdjBatched writes U and V whatever jobz says: null ones fault on the
		// GPU, so they get scratch memory, freed in stream order after the call.
		scrU, scrV, err := jacobiScratch[T](s, m*m*batch, n*n*batch)
		if err != nil {
			return nil, fmt.Errorf("cusolver: %s: %w", op, err)
		}
		defer scrU.Close()
		defer scrV.Close()
		if pu, err = cuda.DevicePtr[T](scrU); err == nil {
			pv, err = cuda.DevicePtr[T](scrV)
		}
		if err != nil {
			return nil, fmt.Errorf("cusolver: %s: %w", op, err)
		}
		uses = append(uses, cuda.Writes(scrU), cuda.Writes(scrV))
	}
	p, err := jacobiParams(op, j, cusolverraw.DnCreateGesvdjInfo, cusolverraw.DnDestroyGesvdjInfo,
		cusolverraw.DnXgesvdjSetTolerance, cusolverraw.DnXgesvdjSetMaxSweeps, cusolverraw.DnXgesvdjSetSortEig)
	if err != nil {
		return nil, err
	}
	defer cusolverraw.DnDestroyGesvdjInfo(p)
	M, N, LDA, B := int32(m), int32(n), int32(lda), int32(batch)
	return factor(op, s, uses, batch, func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle) (lwork int32, err error) {
		err = r.gesvdjBatchedBufferSize(c, h, jobz, M, N, pa, LDA, ps, pu, LDU, pv, LDV, &lwork, p, B)
		return lwork, err
	}, func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, w *T, lwork int32, info *int32) error {
		return r.gesvdjBatched(c, h, jobz, M, N, pa, LDA, ps, pu, LDU, pv, LDV, w, lwork, info, p, B)
	})
}

// jacobiScratch allocates U and V that the caller did not ask for.
func jacobiScratch[T Scalar](s *cuda.Stream, nu, nv int) (u, v *cuda.DeviceBuffer, err error) {
	if u, err = cuda.AllocFor[T](s, max(nu, 1)); err != nil {
		return nil, nil, err
	}
	if v, err = cuda.AllocFor[T](s, max(nv, 1)); err != nil {
		u.Close()
		return nil, nil, err
	}
	return u, v, nil
}

func checkEigMode(op string, jobz EigMode) error {
	if jobz != NoVectors && jobz != Vectors {
		return fmt.Errorf("cusolver: %s: %w: mode %d (NoVectors or Vectors)", op, cuda.ErrInvalidArgument, int(jobz))
	}
	return nil
}
