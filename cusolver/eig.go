package cusolver

import (
	"errors"
	"fmt"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cusolver/cusolverraw"
)

// Syevd computes the eigenvalues, and with jobz Vectors the eigenvectors, of the
// n×n symmetric (Hermitian, for complex T) matrix A, from the triangle uplo says (the
// other is not read), by divide and conquer: cusolverDn{S,D}syevd and {C,Z}heevd.
// The eigenvalues go to w (n elements of T's real type: float32 for float32 and
// complex64, float64 for the others), ascending; with Vectors, A is overwritten with
// the orthonormal eigenvectors (column j for w[j]: A·V = V·Λ), with NoVectors A is
// destroyed. It waits, and returns an *InfoError matching ErrNoConvergence when
// the iteration did not converge.
func Syevd[T Scalar](s *cuda.Stream, jobz EigMode, uplo Fill, n int, a cuda.Memory, lda int, w cuda.Memory) error {
	return wait(SyevdAsync[T](s, jobz, uplo, n, a, lda, w))
}

// SyevdAsync queues Syevd on s and returns its Info without waiting.
func SyevdAsync[T Scalar](s *cuda.Stream, jobz EigMode, uplo Fill, n int, a cuda.Memory, lda int, w cuda.Memory) (*Info, error) {
	return withReal[T](func() (*Info, error) {
		return syevd[T, float32](s, jobz, uplo, n, a, lda, w)
	}, func() (*Info, error) {
		return syevd[T, float64](s, jobz, uplo, n, a, lda, w)
	})
}

func syevd[T Scalar, R Real](s *cuda.Stream, jobz EigMode, uplo Fill, n int, a cuda.Memory, lda int, w cuda.Memory) (*Info, error) {
	const op = "syevd"
	r, err := spectralRow[T, R](op)
	if err != nil {
		return nil, err
	}
	if err := errors.Join(checkEigMode(op, jobz), checkFill(op, uplo)); err != nil {
		return nil, err
	}
	pa, err := matrix[T](op, "A", a, n, n, lda)
	if err != nil {
		return nil, err
	}
	pw, err := operand[R](op, "W", w, n)
	if err != nil {
		return nil, err
	}
	N, LDA := int32(n), int32(lda)
	return factor(op, s, []cuda.Use{cuda.Writes(a), cuda.Writes(w)}, 1, func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle) (lwork int32, err error) {
		err = r.syevdBufferSize(c, h, jobz, uplo, N, pa, LDA, pw, &lwork)
		return lwork, err
	}, func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, work *T, lwork int32, info *int32) error {
		return r.syevd(c, h, jobz, uplo, N, pa, LDA, pw, work, lwork, info)
	})
}

// SyevjBatched computes the eigenvalues, and with jobz Vectors the eigenvectors, of
// batch n×n symmetric (Hermitian) matrices (n ≤ MaxJacobiBatched) by the Jacobi
// method, each from the triangle uplo says: cusolverDn{S,D}syevjBatched and
// {C,Z}heevjBatched. A holds the matrices one after another (A_i at element
// i·lda·n); w gets each one's n eigenvalues (of T's real type) one after another,
// ascending unless j says Unsorted; with Vectors each A_i is overwritten with its
// eigenvectors. j sets the Jacobi parameters (nil: cuSOLVER's defaults). It waits,
// and returns an *InfoError matching ErrNoConvergence, with the matrix's index, for
// each matrix that did not converge.
func SyevjBatched[T Scalar](s *cuda.Stream, jobz EigMode, uplo Fill, n int, a cuda.Memory, lda int, w cuda.Memory,
	batch int, j *Jacobi) error {
	return wait(SyevjBatchedAsync[T](s, jobz, uplo, n, a, lda, w, batch, j))
}

// SyevjBatchedAsync queues SyevjBatched on s and returns its Info (one info per
// matrix) without waiting.
func SyevjBatchedAsync[T Scalar](s *cuda.Stream, jobz EigMode, uplo Fill, n int, a cuda.Memory, lda int, w cuda.Memory,
	batch int, j *Jacobi) (*Info, error) {
	return withReal[T](func() (*Info, error) {
		return syevjBatched[T, float32](s, jobz, uplo, n, a, lda, w, batch, j)
	}, func() (*Info, error) {
		return syevjBatched[T, float64](s, jobz, uplo, n, a, lda, w, batch, j)
	})
}

func syevjBatched[T Scalar, R Real](s *cuda.Stream, jobz EigMode, uplo Fill, n int, a cuda.Memory, lda int, w cuda.Memory,
	batch int, j *Jacobi) (*Info, error) {
	const op = "syevjBatched"
	r, err := spectralRow[T, R](op)
	if err != nil {
		return nil, err
	}
	if err := errors.Join(checkEigMode(op, jobz), checkFill(op, uplo)); err != nil {
		return nil, err
	}
	if err := j.check(op); err != nil {
		return nil, err
	}
	if n > MaxJacobiBatched {
		return nil, fmt.Errorf("cusolver: %s: %w: %d×%d matrices: the batched Jacobi method takes at most %d×%d", op, cuda.ErrInvalidArgument, n, n, MaxJacobiBatched, MaxJacobiBatched)
	}
	pa, err := matrices[T](op, "A", a, n, n, lda, batch)
	if err != nil {
		return nil, err
	}
	pw, err := operand[R](op, "W", w, n*batch)
	if err != nil {
		return nil, err
	}
	uses := []cuda.Use{cuda.Writes(a), cuda.Writes(w)}
	if err := cuda.CheckEnqueue(s, uses...); err != nil { // before cuSOLVER is loaded
		return nil, fmt.Errorf("cusolver: %s: %w", op, err)
	}
	p, err := jacobiParams(op, j, cusolverraw.DnCreateSyevjInfo, cusolverraw.DnDestroySyevjInfo,
		cusolverraw.DnXsyevjSetTolerance, cusolverraw.DnXsyevjSetMaxSweeps, cusolverraw.DnXsyevjSetSortEig)
	if err != nil {
		return nil, err
	}
	defer cusolverraw.DnDestroySyevjInfo(p)
	N, LDA, B := int32(n), int32(lda), int32(batch)
	return factor(op, s, uses, batch, func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle) (lwork int32, err error) {
		err = r.syevjBatchedBufferSize(c, h, jobz, uplo, N, pa, LDA, pw, &lwork, p, B)
		return lwork, err
	}, func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, work *T, lwork int32, info *int32) error {
		return r.syevjBatched(c, h, jobz, uplo, N, pa, LDA, pw, work, lwork, info, p, B)
	})
}
