package gonumblas_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/gocuda/gocuda/cublas"
	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cuda"
)

// hostKernels stands in for cuBLAS where there is none: it copies the operands out
// of their memory (device buffers, or managed buffers used in place), computes what
// cuBLAS's documentation defines (column-major, written here independently of the
// adapter's row-major mapping), and copies the results back. Arguments that cuBLAS
// would reject fail the test.
type hostKernels[T cublas.Real] struct{ t testing.TB }

// operand returns m's elements (at least need of them) and a function that stores
// them back.
func (h hostKernels[T]) operand(s *cuda.Stream, m cuda.Memory, need int, name string) ([]T, func() error, error) {
	if err := s.Synchronize(); err != nil {
		return nil, nil, err
	}
	var data []T
	store := func() error { return nil }
	switch b := m.(type) {
	case *cuda.DeviceBuffer:
		data = make([]T, b.Len())
		if err := cuda.CopyFromDevice(data, b); err != nil {
			return nil, nil, err
		}
		store = func() error { return cuda.CopyToDevice(b, data) }
	case *cuda.ManagedBuffer:
		if err := b.Synchronize(); err != nil {
			return nil, nil, err
		}
		data = cuda.HostSlice[T](b) // the memory itself
	default:
		return nil, nil, h.fail("%s: memory %T", name, m)
	}
	if len(data) < need {
		return nil, nil, h.fail("%s: %d elements, needs %d", name, len(data), need)
	}
	return data, store, nil
}

// matrix is operand for an r×c column-major matrix with leading dimension ld.
func (h hostKernels[T]) matrix(s *cuda.Stream, m cuda.Memory, r, c, ld int, name string) ([]T, func() error, error) {
	if r <= 0 || c <= 0 || ld < r {
		return nil, nil, h.fail("%s: %d×%d with leading dimension %d", name, r, c, ld)
	}
	return h.operand(s, m, ld*(c-1)+r, name)
}

func (h hostKernels[T]) fail(format string, args ...any) error {
	h.t.Helper()
	err := fmt.Errorf("host kernels: "+format, args...)
	h.t.Error(err)
	return err
}

// at is element (i, j) of op(X), X column-major with leading dimension ld.
func at[T cublas.Real](x []T, ld int, t cublasraw.CublasOperation, i, j int) float64 {
	if t == cublas.NoTrans {
		return float64(x[i+j*ld])
	}
	return float64(x[j+i*ld])
}

func (h hostKernels[T]) Gemm(s *cuda.Stream, tA, tB cublasraw.CublasOperation, m, n, k int, alpha T, a cuda.Memory, lda int,
	b cuda.Memory, ldb int, beta T, c cuda.Memory, ldc int) error {
	ar, ac, br, bc := m, k, k, n
	if tA != cublas.NoTrans {
		ar, ac = k, m
	}
	if tB != cublas.NoTrans {
		br, bc = n, k
	}
	av, _, err := h.matrix(s, a, ar, ac, lda, "gemm A")
	if err != nil {
		return err
	}
	bv, _, err := h.matrix(s, b, br, bc, ldb, "gemm B")
	if err != nil {
		return err
	}
	cv, store, err := h.matrix(s, c, m, n, ldc, "gemm C")
	if err != nil {
		return err
	}
	for j := range n {
		for i := range m {
			var sum float64
			for p := range k {
				sum += at(av, lda, tA, i, p) * at(bv, ldb, tB, p, j)
			}
			v := float64(alpha) * sum
			if beta != 0 { // beta = 0: C is not read
				v += float64(beta) * float64(cv[i+j*ldc])
			}
			cv[i+j*ldc] = T(v)
		}
	}
	return store()
}

func (h hostKernels[T]) Gemv(s *cuda.Stream, t cublasraw.CublasOperation, m, n int, alpha T, a cuda.Memory, lda int,
	x cuda.Memory, beta T, y cuda.Memory) error {
	lx, ly := n, m
	if t != cublas.NoTrans {
		lx, ly = m, n
	}
	av, _, err := h.matrix(s, a, m, n, lda, "gemv A")
	if err != nil {
		return err
	}
	xv, _, err := h.operand(s, x, lx, "gemv x")
	if err != nil {
		return err
	}
	yv, store, err := h.operand(s, y, ly, "gemv y")
	if err != nil {
		return err
	}
	for i := range ly {
		var sum float64
		for p := range lx {
			sum += at(av, lda, t, i, p) * float64(xv[p])
		}
		v := float64(alpha) * sum
		if beta != 0 {
			v += float64(beta) * float64(yv[i])
		}
		yv[i] = T(v)
	}
	return store()
}

func (h hostKernels[T]) Axpy(s *cuda.Stream, n int, alpha T, x, y cuda.Memory) error {
	xv, _, err := h.operand(s, x, n, "axpy x")
	if err != nil {
		return err
	}
	yv, store, err := h.operand(s, y, n, "axpy y")
	if err != nil {
		return err
	}
	for i := range n {
		yv[i] += alpha * xv[i]
	}
	return store()
}

func (h hostKernels[T]) Scal(s *cuda.Stream, n int, alpha T, x cuda.Memory) error {
	xv, store, err := h.operand(s, x, n, "scal x")
	if err != nil {
		return err
	}
	for i := range n {
		xv[i] *= alpha
	}
	return store()
}

func (h hostKernels[T]) Dot(s *cuda.Stream, n int, x, y cuda.Memory) (T, error) {
	xv, _, err := h.operand(s, x, n, "dot x")
	if err != nil {
		return 0, err
	}
	yv, _, err := h.operand(s, y, n, "dot y")
	if err != nil {
		return 0, err
	}
	var sum float64
	for i := range n {
		sum += float64(xv[i]) * float64(yv[i])
	}
	return T(sum), nil
}

func (h hostKernels[T]) Nrm2(s *cuda.Stream, n int, x cuda.Memory) (T, error) {
	xv, _, err := h.operand(s, x, n, "nrm2 x")
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, v := range xv[:n] {
		sum += float64(v) * float64(v)
	}
	return T(math.Sqrt(sum)), nil
}
