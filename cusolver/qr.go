package cusolver

import (
	"fmt"

	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cudalib"
	"github.com/gocuda/gocuda/cusolver/cusolverraw"
)

// Geqrf computes the QR factorization of the m×n matrix A in place, A = Q·R: R in
// the upper triangle (the upper trapezoid when m < n), and Q as min(m, n) Householder
// reflectors, their vectors below the diagonal and their scalars in tau (min(m, n)
// elements of T): cusolverDn{S,D,C,Z}geqrf. Ormqr applies Q, Orgqr forms it. It
// waits for the factorization.
func Geqrf[T Scalar](s *cuda.Stream, m, n int, a cuda.Memory, lda int, tau cuda.Memory) error {
	return wait(GeqrfAsync[T](s, m, n, a, lda, tau))
}

// GeqrfAsync queues Geqrf on s and returns its Info without waiting.
func GeqrfAsync[T Scalar](s *cuda.Stream, m, n int, a cuda.Memory, lda int, tau cuda.Memory) (*Info, error) {
	const op = "geqrf"
	r, err := precisionOf[T](op)
	if err != nil {
		return nil, err
	}
	pa, err := matrix[T](op, "A", a, m, n, lda)
	if err != nil {
		return nil, err
	}
	pt, err := operand[T](op, "tau", tau, min(m, n))
	if err != nil {
		return nil, err
	}
	M, N, LDA := int32(m), int32(n), int32(lda)
	return factor(op, s, []cuda.Use{cuda.Writes(a), cuda.Writes(tau)}, 1, func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle) (lwork int32, err error) {
		err = r.geqrfBufferSize(c, h, M, N, pa, LDA, &lwork)
		return lwork, err
	}, func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, w *T, lwork int32, info *int32) error {
		return r.geqrf(c, h, M, N, pa, LDA, pt, w, lwork, info)
	})
}

// Ormqr overwrites the m×n matrix C with op(Q)·C (side Left) or C·op(Q) (Right),
// where Q is the product of the k reflectors Geqrf left in A (m×k for Left, n×k for
// Right, k at most m or n) and tau: cusolverDn{S,D}ormqr and {C,Z}unmqr. trans is
// NoTrans (Q) or ConjTrans (Qᴴ); for real T, Trans is the same as ConjTrans, and
// complex T has no Qᵀ (an error). It waits.
func Ormqr[T Scalar](s *cuda.Stream, side Side, trans Op, m, n, k int, a cuda.Memory, lda int, tau cuda.Memory,
	c cuda.Memory, ldc int) error {
	return wait(OrmqrAsync[T](s, side, trans, m, n, k, a, lda, tau, c, ldc))
}

// OrmqrAsync queues Ormqr on s and returns its Info without waiting.
func OrmqrAsync[T Scalar](s *cuda.Stream, side Side, trans Op, m, n, k int, a cuda.Memory, lda int, tau cuda.Memory,
	c cuda.Memory, ldc int) (*Info, error) {
	const op = "ormqr"
	r, err := precisionOf[T](op)
	if err != nil {
		return nil, err
	}
	trans, err = qrTrans[T](op, trans)
	if err != nil {
		return nil, err
	}
	rowsA := m
	switch side {
	case Left:
	case Right:
		rowsA = n
	default:
		return nil, fmt.Errorf("cusolver: %s: %w: side %d", op, cuda.ErrInvalidArgument, int(side))
	}
	if k < 0 || k > rowsA {
		return nil, fmt.Errorf("cusolver: %s: %w: %d reflectors of length %d", op, cuda.ErrInvalidArgument, k, rowsA)
	}
	pa, err := matrix[T](op, "A", a, rowsA, k, lda)
	if err != nil {
		return nil, err
	}
	pt, err := operand[T](op, "tau", tau, k)
	if err != nil {
		return nil, err
	}
	pc, err := matrix[T](op, "C", c, m, n, ldc)
	if err != nil {
		return nil, err
	}
	M, N, K, LDA, LDC := int32(m), int32(n), int32(k), int32(lda), int32(ldc)
	return factor(op, s, []cuda.Use{cuda.Reads(a), cuda.Reads(tau), cuda.Writes(c)}, 1, func(ctx cudaraw.CUcontext, h cusolverraw.CusolverDnHandle) (lwork int32, err error) {
		err = r.ormqrBufferSize(ctx, h, side, trans, M, N, K, pa, LDA, pt, pc, LDC, &lwork)
		return lwork, err
	}, func(ctx cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, w *T, lwork int32, info *int32) error {
		return r.ormqr(ctx, h, side, trans, M, N, K, pa, LDA, pt, pc, LDC, w, lwork, info)
	})
}

// qrTrans returns trans as T's ormqr (unmqr) takes it: the real routines apply Q or
// Qᵀ (= Qᴴ), the complex ones Q or Qᴴ.
func qrTrans[T Scalar](op string, trans Op) (Op, error) {
	switch {
	case trans == NoTrans:
		return trans, nil
	case !complexType[T]() && (trans == Trans || trans == ConjTrans):
		return Trans, nil
	case complexType[T]() && trans == ConjTrans:
		return trans, nil
	}
	return 0, fmt.Errorf("cusolver: %s: %w: transposition %d of Q (NoTrans or ConjTrans; Trans for real types)", op, cuda.ErrInvalidArgument, int(trans))
}

// complexType reports whether T is complex64 or complex128.
func complexType[T Scalar]() bool {
	dt, _ := cudalib.DataType[T]()
	return dt == cudaraw.CUDA_C_32F || dt == cudaraw.CUDA_C_64F
}

// Orgqr overwrites the m×n matrix A (m ≥ n ≥ k), whose first k columns hold k
// reflectors from Geqrf with their scalars in tau, with the first n columns of their
// product Q (orthonormal columns): cusolverDn{S,D}orgqr and {C,Z}ungqr. After Geqrf
// of an m×n A, Orgqr with k = n forms the thin Q of A = Q·R. It waits.
func Orgqr[T Scalar](s *cuda.Stream, m, n, k int, a cuda.Memory, lda int, tau cuda.Memory) error {
	return wait(OrgqrAsync[T](s, m, n, k, a, lda, tau))
}

// OrgqrAsync queues Orgqr on s and returns its Info without waiting.
func OrgqrAsync[T Scalar](s *cuda.Stream, m, n, k int, a cuda.Memory, lda int, tau cuda.Memory) (*Info, error) {
	const op = "orgqr"
	r, err := precisionOf[T](op)
	if err != nil {
		return nil, err
	}
	if n > m || k < 0 || k > n {
		return nil, fmt.Errorf("cusolver: %s: %w: m ≥ n ≥ k ≥ 0 is needed, got m=%d n=%d k=%d", op, cuda.ErrInvalidArgument, m, n, k)
	}
	pa, err := matrix[T](op, "A", a, m, n, lda)
	if err != nil {
		return nil, err
	}
	pt, err := operand[T](op, "tau", tau, k)
	if err != nil {
		return nil, err
	}
	M, N, K, LDA := int32(m), int32(n), int32(k), int32(lda)
	return factor(op, s, []cuda.Use{cuda.Writes(a), cuda.Reads(tau)}, 1, func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle) (lwork int32, err error) {
		err = r.orgqrBufferSize(c, h, M, N, K, pa, LDA, pt, &lwork)
		return lwork, err
	}, func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, w *T, lwork int32, info *int32) error {
		return r.orgqr(c, h, M, N, K, pa, LDA, pt, w, lwork, info)
	})
}

// Gels solves the least-squares problem min‖A·X − B‖ (2-norm, each column) for the
// m×n matrix A of full rank n (m ≥ n) and the m×nrhs matrix B, through QR: Geqrf of
// A (in place), B := Qᴴ·B (Ormqr), then R·X = B's first n rows (cuBLAS's trsm). X
// overwrites B's first n rows; the rest hold the residual's components (their norm
// is the residual's). A rank-deficient A is not detected: R(i,i) = 0 gives Inf or
// NaN in X. It waits.
func Gels[T Scalar](s *cuda.Stream, m, n, nrhs int, a cuda.Memory, lda int, b cuda.Memory, ldb int) error {
	return wait(GelsAsync[T](s, m, n, nrhs, a, lda, b, ldb))
}

// GelsAsync queues Gels on s and returns its Info (geqrf's and ormqr's) without
// waiting.
func GelsAsync[T Scalar](s *cuda.Stream, m, n, nrhs int, a cuda.Memory, lda int, b cuda.Memory, ldb int) (*Info, error) {
	const op = "gels"
	r, err := precisionOf[T](op)
	if err != nil {
		return nil, err
	}
	if m < n {
		return nil, fmt.Errorf("cusolver: %s: %w: A is %d×%d: least squares needs m ≥ n", op, cuda.ErrInvalidArgument, m, n)
	}
	pa, err := matrix[T](op, "A", a, m, n, lda)
	if err != nil {
		return nil, err
	}
	pb, err := matrix[T](op, "B", b, m, nrhs, ldb)
	if err != nil {
		return nil, err
	}
	uses := []cuda.Use{cuda.Writes(a), cuda.Writes(b)}
	if err := cuda.CheckEnqueue(s, uses...); err != nil {
		return nil, fmt.Errorf("cusolver: %s: %w", op, err)
	}
	tau, err := cuda.AllocFor[T](s, max(n, 1))
	if err != nil {
		return nil, fmt.Errorf("cusolver: %s: allocating tau: %w", op, err)
	}
	defer tau.Close() // ordered after ormqr by the hand-off
	info, err := GeqrfAsync[T](s, m, n, a, lda, tau)
	if err != nil {
		return nil, err
	}
	if info, err = info.then(OrmqrAsync[T](s, Left, ConjTrans, m, nrhs, n, a, lda, tau, b, ldb)); err != nil {
		return nil, err
	}
	if err := upperSolve(op, s, r, n, nrhs, pa, lda, pb, ldb, uses); err != nil {
		info.Close()
		return nil, err
	}
	return info, nil
}

// upperSolve queues B := R⁻¹·B on s for the n×n upper triangle R of A and the
// n×nrhs B: cuBLAS's trsm, with the cuBLAS handle of a cuSOLVER handle's state
// (made at its first use), bound to s; the uses are those of A and B.
func upperSolve[T Scalar](op string, s *cuda.Stream, r *routines[T], n, nrhs int, pa *T, lda int, pb *T, ldb int, uses []cuda.Use) error {
	fail := func(err error) error { return fmt.Errorf("cusolver: %s: trsm: %w", op, err) }
	ctx, h, err := take(s, uses)
	if err != nil {
		return fail(err)
	}
	defer handles.Put(s, h)
	if h.State.blas == nil {
		err := ctx.Locked(func() error {
			var bh cublasraw.CublasHandle
			if err := cublasraw.Create(&bh); err != nil {
				return err
			}
			h.State.blas = cublasraw.OwnHandle(bh)
			return nil
		})
		if err != nil {
			return fail(fmt.Errorf("creating a cuBLAS handle: %w", err))
		}
	}
	bh := h.State.blas.Handle()
	one := new(T) // a host scalar: cuBLAS reads it before trsm returns
	*one = 1
	N, NRHS, LDA, LDB := int32(n), int32(nrhs), int32(lda), int32(ldb)
	err = cuda.Enqueue(s, func(c cudaraw.CUcontext, st cudaraw.CUstream) error {
		if err := cublasraw.SetStreamIn(c, bh, st); err != nil {
			return err
		}
		return r.trsm(c, bh, Left, Upper, NoTrans, cublasraw.CUBLAS_DIAG_NON_UNIT, N, NRHS, one, pa, LDA, pb, LDB)
	}, append(uses, cuda.Writes(h.State.fence))...)
	if err != nil {
		return fail(err)
	}
	return nil
}
