package gonumblas

import (
	"github.com/gocuda/gocuda/cublas"
	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cuda"
)

// kernels is what runs on the GPU: cuBLAS's typed operations (column-major
// matrices, unit-stride vectors). Tests put a host stand-in in its place.
type kernels[T cublas.Real] interface {
	Gemm(s *cuda.Stream, tA, tB cublasraw.CublasOperation, m, n, k int, alpha T, a cuda.Memory, lda int,
		b cuda.Memory, ldb int, beta T, c cuda.Memory, ldc int) error
	Gemv(s *cuda.Stream, t cublasraw.CublasOperation, m, n int, alpha T, a cuda.Memory, lda int, x cuda.Memory,
		beta T, y cuda.Memory) error
	Axpy(s *cuda.Stream, n int, alpha T, x, y cuda.Memory) error
	Scal(s *cuda.Stream, n int, alpha T, x cuda.Memory) error
	Dot(s *cuda.Stream, n int, x, y cuda.Memory) (T, error)
	Nrm2(s *cuda.Stream, n int, x cuda.Memory) (T, error)
}

// cuBLAS is kernels through package cublas.
type cuBLAS[T cublas.Real] struct{}

func (cuBLAS[T]) Gemm(s *cuda.Stream, tA, tB cublasraw.CublasOperation, m, n, k int, alpha T, a cuda.Memory, lda int,
	b cuda.Memory, ldb int, beta T, c cuda.Memory, ldc int) error {
	return cublas.Gemm(s, tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

func (cuBLAS[T]) Gemv(s *cuda.Stream, t cublasraw.CublasOperation, m, n int, alpha T, a cuda.Memory, lda int,
	x cuda.Memory, beta T, y cuda.Memory) error {
	return cublas.Gemv(s, t, m, n, alpha, a, lda, x, beta, y)
}

func (cuBLAS[T]) Axpy(s *cuda.Stream, n int, alpha T, x, y cuda.Memory) error {
	return cublas.Axpy(s, n, alpha, x, y)
}

func (cuBLAS[T]) Scal(s *cuda.Stream, n int, alpha T, x cuda.Memory) error {
	return cublas.Scal(s, n, alpha, x)
}

func (cuBLAS[T]) Dot(s *cuda.Stream, n int, x, y cuda.Memory) (T, error) {
	return cublas.Dot[T](s, n, x, y)
}

func (cuBLAS[T]) Nrm2(s *cuda.Stream, n int, x cuda.Memory) (T, error) {
	return cublas.Nrm2[T](s, n, x)
}

// maxInt32 bounds the sizes, leading dimensions and lengths cuBLAS takes.
const maxInt32 = 1<<31 - 1

// matrix is a row-major r×c matrix operand of a gonum call: element (i, j) is
// data[i·ld + j].
type matrix[T any] struct {
	data    []T
	r, c    int
	ld      int
	inPlace cuda.Memory // the registered buffer that data starts, or nil
}

// span is the number of elements from the first to the last of the matrix.
func (m *matrix[T]) span() int { return (m.r-1)*m.ld + m.c }

// ok reports whether the matrix is non-empty, with a leading dimension and a slice
// that gonum accepts, and within cuBLAS's limits. It finds the matrix in the
// registered buffers.
func (m *matrix[T]) ok(impl *Implementation) bool {
	if m.r <= 0 || m.c <= 0 || m.ld < m.c || m.r > maxInt32 || m.ld > maxInt32 || len(m.data) < m.span() {
		return false
	}
	m.inPlace = inPlace(impl, m.data[:m.span()])
	return true
}

// tight reports whether the matrix's elements are contiguous: staged as they are.
func (m *matrix[T]) tight() bool { return m.r == 1 || m.ld == m.c }

// vector is a vector operand of a gonum call: element i is data[i·inc].
type vector[T any] struct {
	data    []T
	n, inc  int
	inPlace cuda.Memory
}

// ok reports whether the vector is non-empty, with a positive increment and a slice
// that gonum accepts, and within cuBLAS's limits. Only a vector of unit increment
// can be used in place.
func (v *vector[T]) ok(impl *Implementation) bool {
	// inc beyond the slice only fits n = 1; the bound keeps (n-1)·inc from overflowing.
	if v.n <= 0 || v.inc <= 0 || v.n > maxInt32 || (v.n > 1 && v.inc > len(v.data)) || len(v.data) <= (v.n-1)*v.inc {
		return false
	}
	if v.inc == 1 {
		v.inPlace = inPlace(impl, v.data[:v.n])
	}
	return true
}

// operand is an operand as cuBLAS gets it: in place, or a copy in a device buffer.
type operand struct {
	mem cuda.Memory
	dev *cuda.DeviceBuffer // the copy; nil in place
	ld  int
}

// stageMatrix gives cuBLAS m: in place, or copied into a device buffer (uploaded if
// load). A matrix whose rows have gaps between them (ld > c) is packed on the
// host first, so that the copies move only its elements, and the gaps, which may
// belong to other data, are neither read nor written.
func stageMatrix[T cublas.Real](c *gpuCall, m *matrix[T], load bool) (operand, error) {
	if m.inPlace != nil {
		c.impl.inPlaceOps.Add(1)
		return operand{mem: m.inPlace, ld: m.ld}, nil
	}
	if m.tight() {
		n := m.span()
		dev, err := alloc[T](c, n)
		if err == nil && load {
			err = cuda.CopyToDeviceAsync(c.s, dev, m.data[:n])
		}
		return operand{mem: dev, dev: dev, ld: m.ld}, err
	}
	dev, err := alloc[T](c, m.r*m.c)
	if err == nil && load {
		packed := make([]T, m.r*m.c)
		for i := range m.r {
			copy(packed[i*m.c:(i+1)*m.c], m.data[i*m.ld:i*m.ld+m.c])
		}
		// From pageable memory: the copy has read packed when it returns.
		err = cuda.CopyToDeviceAsync(c.s, dev, packed)
	}
	return operand{mem: dev, dev: dev, ld: m.c}, err
}

// fetchMatrix copies m's result back from its device buffer; nothing for an
// operand in place.
func fetchMatrix[T cublas.Real](c *gpuCall, m *matrix[T], op operand) error {
	if op.dev == nil {
		return nil
	}
	if m.tight() {
		c.touched = true
		// Into pageable memory: done when it returns.
		return cuda.CopyFromDeviceAsync(c.s, m.data[:m.span()], op.dev)
	}
	packed := make([]T, m.r*m.c)
	if err := cuda.CopyFromDeviceAsync(c.s, packed, op.dev); err != nil {
		return err
	}
	c.touched = true
	for i := range m.r {
		copy(m.data[i*m.ld:i*m.ld+m.c], packed[i*m.c:(i+1)*m.c])
	}
	return nil
}

// stageVector gives cuBLAS v: in place, or gathered into a device buffer (uploaded
// if load).
func stageVector[T cublas.Real](c *gpuCall, v *vector[T], load bool) (operand, error) {
	if v.inPlace != nil {
		c.impl.inPlaceOps.Add(1)
		return operand{mem: v.inPlace}, nil
	}
	dev, err := alloc[T](c, v.n)
	if err != nil || !load {
		return operand{mem: dev, dev: dev}, err
	}
	src := v.data[:v.n]
	if v.inc != 1 {
		src = make([]T, v.n)
		for i := range src {
			src[i] = v.data[i*v.inc]
		}
	}
	return operand{mem: dev, dev: dev}, cuda.CopyToDeviceAsync(c.s, dev, src)
}

// fetchVector copies v's result back from its device buffer, to its elements
// only; nothing for a vector in place.
func fetchVector[T cublas.Real](c *gpuCall, v *vector[T], op operand) error {
	if op.dev == nil {
		return nil
	}
	if v.inc == 1 {
		c.touched = true
		return cuda.CopyFromDeviceAsync(c.s, v.data[:v.n], op.dev)
	}
	dense := make([]T, v.n)
	if err := cuda.CopyFromDeviceAsync(c.s, dense, op.dev); err != nil {
		return err
	}
	c.touched = true
	for i, x := range dense {
		v.data[i*v.inc] = x
	}
	return nil
}
