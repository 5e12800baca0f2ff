package gonumblas_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cublas/gonumblas"
	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
)

type float interface{ float32 | float64 }

// routines are the accelerated routines of one element type, of some implementation.
type routines[T float] struct {
	dot  func(n int, x []T, incX int, y []T, incY int) T
	nrm2 func(n int, x []T, incX int) T
	axpy func(n int, alpha T, x []T, incX int, y []T, incY int)
	scal func(n int, alpha T, x []T, incX int)
	gemv func(tA blas.Transpose, m, n int, alpha T, a []T, lda int, x []T, incX int, beta T, y []T, incY int)
	gemm func(tA, tB blas.Transpose, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int)
}

func float64s(x blas.Float64) routines[float64] {
	return routines[float64]{x.Ddot, x.Dnrm2, x.Daxpy, x.Dscal, x.Dgemv, x.Dgemm}
}

func float32s(x blas.Float32) routines[float32] {
	return routines[float32]{x.Sdot, x.Snrm2, x.Saxpy, x.Sscal, x.Sgemv, x.Sgemm}
}

var native gonum.Implementation

// suite compares an Implementation with gonum's native code on random inputs.
type suite[T float] struct {
	t         *testing.T
	r         *rand.Rand
	impl      *gonumblas.Implementation
	got, want routines[T]
	// alloc returns n elements for an operand: a Go slice, or managed memory.
	alloc func(n int) []T
	// inPlace is the number of operands (matrices, unit-stride vectors) a call is
	// expected to use in place: the suite's alloc gives managed memory.
	inPlace bool
}

func newSuite[T float](t *testing.T, impl *gonumblas.Implementation, seed uint64) *suite[T] {
	s := &suite[T]{t: t, r: cudatest.Rand(seed), impl: impl, alloc: func(n int) []T { return make([]T, n) }}
	var z T
	switch any(z).(type) {
	case float32:
		s.got, s.want = any(float32s(impl)).(routines[T]), any(float32s(native)).(routines[T])
	default:
		s.got, s.want = any(float64s(impl)).(routines[T]), any(float64s(native)).(routines[T])
	}
	return s
}

func eps[T float]() float64 {
	var z T
	if _, ok := any(z).(float32); ok {
		return 0x1p-23
	}
	return 0x1p-52
}

func abs[T float](x T) T {
	if x < 0 {
		return -x
	}
	return x
}

func absAll[T float](x []T) []T {
	out := make([]T, len(x))
	for i, v := range x {
		out[i] = abs(v)
	}
	return out
}

// operand returns n elements, random in [-1, 1).
func (s *suite[T]) operand(n int) []T {
	x := s.alloc(n)
	for i := range x {
		x[i] = T(2*s.r.Float64() - 1)
	}
	return x
}

// onGPU runs f and checks that it made one call on the GPU, with inPlace operands
// handed over in place.
func (s *suite[T]) onGPU(name string, inPlace int, f func()) {
	s.t.Helper()
	calls, ops := gonumblas.GPUCalls(s.impl), gonumblas.InPlaceOps(s.impl)
	f()
	require.NoError(s.t, s.impl.Err(), name)
	assert.Equal(s.t, calls+1, gonumblas.GPUCalls(s.impl), "%s: not run on the GPU", name)
	if !s.inPlace {
		inPlace = 0
	}
	assert.Equal(s.t, ops+int64(inPlace), gonumblas.InPlaceOps(s.impl), "%s: operands in place", name)
}

// close checks got against want within bound·(terms+2)·4ε (bound: the sum of the
// magnitudes of what was added up).
func (s *suite[T]) close(name string, got, want, bound T, terms int) {
	s.t.Helper()
	tol := 4 * eps[T]() * float64(terms+2) * float64(bound)
	if !(math.Abs(float64(got)-float64(want)) <= tol) {
		s.t.Errorf("%s: got %v, want %v (tolerance %g)", name, got, want, tol)
	}
}

// same checks that the elements of got outside the positions of an operand are
// those of orig.
func (s *suite[T]) same(name string, got, orig []T, inside func(i int) bool) {
	s.t.Helper()
	for i := range got {
		if !inside(i) && got[i] != orig[i] {
			s.t.Errorf("%s: element %d outside the operand changed: %v, was %v", name, i, got[i], orig[i])
			return
		}
	}
}

// vecLen is the length of a vector of n elements with increment inc, and tail more.
func vecLen(n, inc, tail int) int { return (n-1)*inc + 1 + tail }

// matLen is the length of an r×c row-major matrix with leading dimension ld, and tail more.
func matLen(r, c, ld, tail int) int { return (r-1)*ld + c + tail }

func inVector(n, inc int) func(int) bool {
	return func(i int) bool { return i%inc == 0 && i/inc < n }
}

func inMatrix(r, c, ld int) func(int) bool {
	return func(i int) bool { return i/ld < r && i%ld < c }
}

const tail = 5 // elements after every operand, which no call may touch

func (s *suite[T]) level1() {
	for _, n := range []int{1, 7, 1000, 4099} {
		for _, inc := range [][2]int{{1, 1}, {2, 3}, {3, 1}} {
			ix, iy := inc[0], inc[1]
			name := fmt.Sprintf("n=%d incX=%d incY=%d", n, ix, iy)
			x, y := s.operand(vecLen(n, ix, tail)), s.operand(vecLen(n, iy, tail))
			units := 0 // vectors that can be in place
			if ix == 1 {
				units++
			}
			if iy == 1 {
				units++
			}
			var sumAbs T
			for i := range n {
				sumAbs += abs(x[i*ix] * y[i*iy])
			}
			var got T
			s.onGPU("dot "+name, units, func() { got = s.got.dot(n, x, ix, y, iy) })
			s.close("dot "+name, got, s.want.dot(n, x, ix, y, iy), sumAbs, n)

			want := s.want.nrm2(n, x, ix)
			s.onGPU("nrm2 "+name, boolInt(ix == 1), func() { got = s.got.nrm2(n, x, ix) })
			s.close("nrm2 "+name, got, want, want, n)

			const alpha = -1.25
			wantY := append([]T(nil), y...)
			s.want.axpy(n, alpha, x, ix, wantY, iy)
			origY := append([]T(nil), y...)
			s.onGPU("axpy "+name, units, func() { s.got.axpy(n, alpha, x, ix, y, iy) })
			for i := range n {
				j := i * iy
				s.close("axpy "+name, y[j], wantY[j], abs(alpha*x[i*ix])+abs(origY[j]), 1)
			}
			s.same("axpy "+name, y, origY, inVector(n, iy))

			wantX := append([]T(nil), x...)
			s.want.scal(n, alpha, wantX, ix)
			origX := append([]T(nil), x...)
			s.onGPU("scal "+name, boolInt(ix == 1), func() { s.got.scal(n, alpha, x, ix) })
			for i := range n {
				s.close("scal "+name, x[i*ix], wantX[i*ix], abs(wantX[i*ix]), 1)
			}
			s.same("scal "+name, x, origX, inVector(n, ix))
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

var transposes = []blas.Transpose{blas.NoTrans, blas.Trans, blas.ConjTrans}

func (s *suite[T]) gemv() {
	nan := T(math.NaN())
	for _, mn := range [][2]int{{37, 29}, {1, 17}, {23, 1}, {100, 300}} {
		m, n := mn[0], mn[1]
		for _, tA := range transposes {
			for _, pad := range []int{0, 3} {
				for _, inc := range [][2]int{{1, 1}, {2, 3}} {
					for _, beta := range []T{0, 1, -0.5} {
						s.gemvCase(tA, m, n, pad, inc[0], inc[1], 1.5, beta, nan)
					}
				}
			}
		}
	}
}

func (s *suite[T]) gemvCase(tA blas.Transpose, m, n, pad, ix, iy int, alpha, beta, nan T) {
	name := fmt.Sprintf("gemv %c m=%d n=%d lda=n+%d incX=%d incY=%d beta=%v", tA, m, n, pad, ix, iy, beta)
	lx, ly := n, m
	if tA != blas.NoTrans {
		lx, ly = m, n
	}
	lda := n + pad
	a := s.operand(matLen(m, n, lda, tail))
	x, y := s.operand(vecLen(lx, ix, tail)), s.operand(vecLen(ly, iy, tail))
	if beta == 0 {
		for i := range ly {
			y[i*iy] = nan // not read
		}
	}
	orig := append([]T(nil), y...)
	want := append([]T(nil), y...)
	s.want.gemv(tA, m, n, alpha, a, lda, x, ix, beta, want, iy)
	bound := absAll(orig)
	s.want.gemv(tA, m, n, abs(alpha), absAll(a), lda, absAll(x), ix, abs(beta), bound, iy)
	s.onGPU(name, 1+boolInt(ix == 1)+boolInt(iy == 1), func() { s.got.gemv(tA, m, n, alpha, a, lda, x, ix, beta, y, iy) })
	for i := range ly {
		s.close(name, y[i*iy], want[i*iy], bound[i*iy], lx)
	}
	s.same(name, y, orig, inVector(ly, iy))
}

func (s *suite[T]) gemm() {
	nan := T(math.NaN())
	for _, mnk := range [][3]int{{37, 29, 41}, {1, 17, 5}, {23, 1, 7}, {64, 33, 1}} {
		for _, tA := range transposes {
			for _, tB := range transposes {
				for _, pad := range []int{0, 3} {
					for _, beta := range []T{0, 1, -0.5} {
						s.gemmCase(tA, tB, mnk[0], mnk[1], mnk[2], pad, 1.5, beta, nan)
					}
				}
			}
		}
	}
}

func (s *suite[T]) gemmCase(tA, tB blas.Transpose, m, n, k, pad int, alpha, beta, nan T) {
	name := fmt.Sprintf("gemm %c%c m=%d n=%d k=%d ld+%d beta=%v", tA, tB, m, n, k, pad, beta)
	ar, ac := m, k
	if tA != blas.NoTrans {
		ar, ac = k, m
	}
	br, bc := k, n
	if tB != blas.NoTrans {
		br, bc = n, k
	}
	lda, ldb, ldc := ac+pad, bc+2*pad, n+pad
	a, b, c := s.operand(matLen(ar, ac, lda, tail)), s.operand(matLen(br, bc, ldb, tail)), s.operand(matLen(m, n, ldc, tail))
	if beta == 0 {
		for i := range m {
			for j := range n {
				c[i*ldc+j] = nan // not read
			}
		}
	}
	orig := append([]T(nil), c...)
	want := append([]T(nil), c...)
	s.want.gemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, want, ldc)
	bound := absAll(orig)
	s.want.gemm(tA, tB, m, n, k, abs(alpha), absAll(a), lda, absAll(b), ldb, abs(beta), bound, ldc)
	s.onGPU(name, 3, func() { s.got.gemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) })
	for i := range m {
		for j := range n {
			s.close(fmt.Sprintf("%s C[%d,%d]", name, i, j), c[i*ldc+j], want[i*ldc+j], bound[i*ldc+j], k)
		}
	}
	s.same(name, c, orig, inMatrix(m, n, ldc))
}

// all runs every check for both element types.
func all(t *testing.T, impl *gonumblas.Implementation, managed func(t *testing.T, bytes int) *cuda.ManagedBuffer) {
	run := func(name string, f func(t *testing.T, s32 *suite[float32], s64 *suite[float64])) {
		t.Run(name, func(t *testing.T) {
			s32, s64 := newSuite[float32](t, impl, 32), newSuite[float64](t, impl, 64)
			if managed != nil {
				s32.inPlace, s64.inPlace = true, true
				s32.alloc = func(n int) []float32 { return cuda.HostSlice[float32](managed(t, 4*n))[:n] }
				s64.alloc = func(n int) []float64 { return cuda.HostSlice[float64](managed(t, 8*n))[:n] }
			}
			f(t, s32, s64)
		})
	}
	run("level1", func(t *testing.T, s32 *suite[float32], s64 *suite[float64]) { s32.level1(); s64.level1() })
	run("gemv", func(t *testing.T, s32 *suite[float32], s64 *suite[float64]) { s32.gemv(); s64.gemv() })
	run("gemm", func(t *testing.T, s32 *suite[float32], s64 *suite[float64]) { s32.gemm(); s64.gemm() })
}

// managedAlloc returns a function that allocates registered managed memory for
// impl, closed when the test ends.
func managedAlloc(ctx *cuda.Context, impl *gonumblas.Implementation) func(t *testing.T, bytes int) *cuda.ManagedBuffer {
	return func(t *testing.T, bytes int) *cuda.ManagedBuffer {
		b, err := ctx.AllocManaged(bytes)
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		require.NoError(t, impl.Register(b))
		return b
	}
}

// hostImpl is an Implementation on the host stand-in for cuBLAS, with every call
// sent to the "GPU".
func hostImpl(t *testing.T, opts ...gonumblas.Option) (*cuda.Context, *gonumblas.Implementation) {
	ctx, _ := cudatest.Stream(t)
	opts = append([]gonumblas.Option{gonumblas.WithStaged(gonumblas.Thresholds{}), gonumblas.WithManaged(gonumblas.Thresholds{}),
		gonumblas.WithKernels(hostKernels[float32]{t}, hostKernels[float64]{t})}, opts...)
	impl, err := gonumblas.New(ctx, opts...)
	require.NoError(t, err)
	return ctx, impl
}

// gpuImpl is an Implementation on cuBLAS with every call sent to the GPU.
func gpuImpl(t *testing.T, opts ...gonumblas.Option) (*cuda.Context, *gonumblas.Implementation) {
	ctx, _ := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cublasraw.Library())
	opts = append([]gonumblas.Option{gonumblas.WithStaged(gonumblas.Thresholds{}), gonumblas.WithManaged(gonumblas.Thresholds{})}, opts...)
	impl, err := gonumblas.New(ctx, opts...)
	require.NoError(t, err)
	return ctx, impl
}

// The staging (packing, gathering, what is copied back) and the row-major mapping,
// on the host stand-in: runs on the fake driver (CI).
func TestStagedHost(t *testing.T) {
	_, impl := hostImpl(t)
	all(t, impl, nil)
}

// Operands in registered managed memory, on the host stand-in.
func TestManagedHost(t *testing.T) {
	ctx, impl := hostImpl(t)
	all(t, impl, managedAlloc(ctx, impl))
}

// TestStagedGPU checks every accelerated routine on cuBLAS against gonum, with
// Go slices: all transpositions, odd sizes, increments, sub-matrices, beta = 0
// over NaNs.
func TestStagedGPU(t *testing.T) {
	_, impl := gpuImpl(t)
	all(t, impl, nil)
}

// TestManagedGPU is TestStagedGPU with every operand in registered managed memory:
// cuBLAS works on it in place (strided vectors are staged).
func TestManagedGPU(t *testing.T) {
	ctx, impl := gpuImpl(t)
	all(t, impl, managedAlloc(ctx, impl))
}

// TestFixedStreamGPU runs the checks on one stream given to New.
func TestFixedStreamGPU(t *testing.T) {
	ctx, _ := cudatest.Stream(t, cudatest.Kernels)
	s, err := ctx.NewStream()
	require.NoError(t, err)
	defer s.Close()
	_, impl := gpuImpl(t, gonumblas.WithStream(s))
	all(t, impl, nil)
}
