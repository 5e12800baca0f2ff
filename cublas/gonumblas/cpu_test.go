package gonumblas_test

import (
	"errors"
	"math"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cublas/gonumblas"
	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/dl"
)

// These tests need no GPU and no cuBLAS: they run on the fake driver (CI), the GPU
// path on the host stand-in for cuBLAS.

// panicOf returns what f panics with, or nil.
func panicOf(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

// Calls with bad arguments panic as gonum's do, with the same values, and never
// reach the GPU, whose thresholds are all 0 here.
func TestPanicsMatchGonum(t *testing.T) {
	_, impl := hostImpl(t)
	x, y := make([]float64, 10), make([]float64, 10)
	a, b, c := make([]float64, 100), make([]float64, 100), make([]float64, 100)
	bad := blas.Transpose('X')
	f64 := map[string]func(blas.Float64){
		"dot incX 0":        func(i blas.Float64) { i.Ddot(3, x, 0, y, 1) },
		"dot incY 0":        func(i blas.Float64) { i.Ddot(3, x, 1, y, 0) },
		"dot n < 0":         func(i blas.Float64) { i.Ddot(-1, x, 1, y, 1) },
		"dot short x":       func(i blas.Float64) { i.Ddot(11, x, 1, y[:0:0], 1) },
		"dot short y":       func(i blas.Float64) { i.Ddot(10, x, 1, y[:9], 1) },
		"dot short x inc":   func(i blas.Float64) { i.Ddot(5, x, 3, y, 2) },
		"dot short y inc":   func(i blas.Float64) { i.Ddot(5, x, 2, y, 3) },
		"dot short x neg":   func(i blas.Float64) { i.Ddot(5, x, -3, y, 1) },
		"nrm2 incX 0":       func(i blas.Float64) { i.Dnrm2(3, x, 0) },
		"nrm2 n < 0":        func(i blas.Float64) { i.Dnrm2(-2, x, 1) },
		"nrm2 short x":      func(i blas.Float64) { i.Dnrm2(6, x, 2) },
		"axpy incX 0":       func(i blas.Float64) { i.Daxpy(3, 2, x, 0, y, 1) },
		"axpy incY 0":       func(i blas.Float64) { i.Daxpy(3, 2, x, 1, y, 0) },
		"axpy n < 0":        func(i blas.Float64) { i.Daxpy(-1, 2, x, 1, y, 1) },
		"axpy short x":      func(i blas.Float64) { i.Daxpy(11, 2, x, 1, make([]float64, 20), 1) },
		"axpy short y":      func(i blas.Float64) { i.Daxpy(5, 2, x, 1, y, 3) },
		"axpy short y neg":  func(i blas.Float64) { i.Daxpy(4, 2, x, 1, y, -4) },
		"scal incX 0":       func(i blas.Float64) { i.Dscal(3, 2, x, 0) },
		"scal n < 0":        func(i blas.Float64) { i.Dscal(-1, 2, x, 1) },
		"scal short x":      func(i blas.Float64) { i.Dscal(4, 2, x, 4) },
		"gemv trans":        func(i blas.Float64) { i.Dgemv(bad, 2, 2, 1, a, 2, x, 1, 0, y, 1) },
		"gemv m < 0":        func(i blas.Float64) { i.Dgemv(blas.NoTrans, -1, 2, 1, a, 2, x, 1, 0, y, 1) },
		"gemv n < 0":        func(i blas.Float64) { i.Dgemv(blas.NoTrans, 2, -1, 1, a, 2, x, 1, 0, y, 1) },
		"gemv lda":          func(i blas.Float64) { i.Dgemv(blas.NoTrans, 2, 3, 1, a, 2, x, 1, 0, y, 1) },
		"gemv lda n = 0":    func(i blas.Float64) { i.Dgemv(blas.NoTrans, 2, 0, 1, a, 0, x, 1, 0, y, 1) },
		"gemv incX 0":       func(i blas.Float64) { i.Dgemv(blas.NoTrans, 2, 2, 1, a, 2, x, 0, 0, y, 1) },
		"gemv incY 0":       func(i blas.Float64) { i.Dgemv(blas.Trans, 2, 2, 1, a, 2, x, 1, 0, y, 0) },
		"gemv short x":      func(i blas.Float64) { i.Dgemv(blas.NoTrans, 3, 11, 1, a, 11, x, 1, 0, y, 1) },
		"gemv short x T":    func(i blas.Float64) { i.Dgemv(blas.Trans, 11, 3, 1, a, 3, x, 1, 0, y, 1) },
		"gemv short y":      func(i blas.Float64) { i.Dgemv(blas.NoTrans, 4, 2, 1, a, 2, x, 1, 0, y, 4) },
		"gemv short a":      func(i blas.Float64) { i.Dgemv(blas.NoTrans, 10, 10, 1, a[:99], 10, x, 1, 0, y, 1) },
		"gemm transA":       func(i blas.Float64) { i.Dgemm(bad, blas.NoTrans, 2, 2, 2, 1, a, 2, b, 2, 0, c, 2) },
		"gemm transB":       func(i blas.Float64) { i.Dgemm(blas.NoTrans, bad, 2, 2, 2, 1, a, 2, b, 2, 0, c, 2) },
		"gemm m < 0":        func(i blas.Float64) { i.Dgemm(blas.NoTrans, blas.NoTrans, -1, 2, 2, 1, a, 2, b, 2, 0, c, 2) },
		"gemm n < 0":        func(i blas.Float64) { i.Dgemm(blas.NoTrans, blas.NoTrans, 2, -1, 2, 1, a, 2, b, 2, 0, c, 2) },
		"gemm k < 0":        func(i blas.Float64) { i.Dgemm(blas.NoTrans, blas.NoTrans, 2, 2, -1, 1, a, 2, b, 2, 0, c, 2) },
		"gemm lda N":        func(i blas.Float64) { i.Dgemm(blas.NoTrans, blas.NoTrans, 2, 2, 3, 1, a, 2, b, 2, 0, c, 2) },
		"gemm lda T":        func(i blas.Float64) { i.Dgemm(blas.Trans, blas.NoTrans, 3, 2, 2, 1, a, 2, b, 2, 0, c, 2) },
		"gemm ldb N":        func(i blas.Float64) { i.Dgemm(blas.NoTrans, blas.NoTrans, 2, 3, 2, 1, a, 2, b, 2, 0, c, 3) },
		"gemm ldb T":        func(i blas.Float64) { i.Dgemm(blas.NoTrans, blas.ConjTrans, 2, 2, 3, 1, a, 3, b, 2, 0, c, 2) },
		"gemm ldc":          func(i blas.Float64) { i.Dgemm(blas.NoTrans, blas.NoTrans, 2, 3, 2, 1, a, 2, b, 3, 0, c, 2) },
		"gemm ldc m = 0":    func(i blas.Float64) { i.Dgemm(blas.NoTrans, blas.NoTrans, 0, 3, 2, 1, a, 2, b, 3, 0, c, 2) },
		"gemm short a":      func(i blas.Float64) { i.Dgemm(blas.NoTrans, blas.NoTrans, 10, 10, 10, 1, a[:99], 10, b, 10, 0, c, 10) },
		"gemm short a T":    func(i blas.Float64) { i.Dgemm(blas.Trans, blas.NoTrans, 10, 5, 11, 1, a, 10, b, 5, 0, c, 5) },
		"gemm short b":      func(i blas.Float64) { i.Dgemm(blas.NoTrans, blas.NoTrans, 10, 10, 10, 1, a, 10, b[:99], 10, 0, c, 10) },
		"gemm short b T":    func(i blas.Float64) { i.Dgemm(blas.NoTrans, blas.Trans, 5, 11, 10, 1, a, 10, b, 10, 0, c, 11) },
		"gemm short c":      func(i blas.Float64) { i.Dgemm(blas.NoTrans, blas.NoTrans, 10, 10, 10, 1, a, 10, b, 10, 0, c[:99], 10) },
		"gemm short c beta": func(i blas.Float64) { i.Dgemm(blas.NoTrans, blas.NoTrans, 10, 10, 10, 0, a, 10, b, 10, 1, c[:91], 10) },
	}
	x32, y32, a32 := make([]float32, 10), make([]float32, 10), make([]float32, 100)
	f32 := map[string]func(blas.Float32){
		"sdot short y":  func(i blas.Float32) { i.Sdot(10, x32, 1, y32[:9], 1) },
		"snrm2 incX 0":  func(i blas.Float32) { i.Snrm2(3, x32, 0) },
		"saxpy short x": func(i blas.Float32) { i.Saxpy(5, 2, x32, 3, y32, 1) },
		"sscal n < 0":   func(i blas.Float32) { i.Sscal(-1, 2, x32, 1) },
		"sgemv short a": func(i blas.Float32) { i.Sgemv(blas.Trans, 10, 10, 1, a32[:99], 10, x32, 1, 0, y32, 1) },
		"sgemm short c": func(i blas.Float32) {
			i.Sgemm(blas.NoTrans, blas.Trans, 10, 10, 10, 1, a32, 10, a32, 10, 0, a32[:99], 10)
		},
		"sgemm ldc":      func(i blas.Float32) { i.Sgemm(blas.NoTrans, blas.NoTrans, 2, 3, 2, 1, a32, 2, a32, 3, 0, a32, 2) },
		"sgemm transA":   func(i blas.Float32) { i.Sgemm(bad, blas.NoTrans, 2, 2, 2, 1, a32, 2, a32, 2, 0, a32, 2) },
		"sgemv incX 0":   func(i blas.Float32) { i.Sgemv(blas.NoTrans, 2, 2, 1, a32, 2, x32, 0, 0, y32, 1) },
		"saxpy incY 0":   func(i blas.Float32) { i.Saxpy(3, 2, x32, 1, y32, 0) },
		"sdot short neg": func(i blas.Float32) { i.Sdot(5, x32, 1, y32, -3) },
	}
	check := func(name string, want any, call func()) {
		if !assert.NotNil(t, want, "%s: gonum does not panic", name) {
			return
		}
		calls := gonumblas.GPUCalls(impl)
		assert.PanicsWithValue(t, want, call, name)
		assert.Equal(t, calls, gonumblas.GPUCalls(impl), "%s reached the GPU", name)
	}
	for name, f := range f64 {
		check(name, panicOf(func() { f(native) }), func() { f(impl) })
	}
	for name, f := range f32 {
		check(name, panicOf(func() { f(native) }), func() { f(impl) })
	}
}

// bitsEqual reports whether a and b hold the same float64 bit patterns.
func bitsEqual(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

// nans returns n NaNs.
func nans(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = math.NaN()
	}
	return s
}

// Calls that gonum answers without arithmetic (empty sizes, alpha = 0) or that the
// GPU path does not take (negative increments) give gonum's result bit for bit,
// NaNs included, and stay on the CPU.
func TestNativeCases(t *testing.T) {
	_, impl := hostImpl(t)
	r := cudatest.Rand(1)
	rnd := func(n int) []float64 {
		s := make([]float64, n)
		for i := range s {
			s[i] = 2*r.Float64() - 1
		}
		return s
	}
	// each runs f on impl and on gonum, on copies of the same operands.
	each := func(name string, ops [][]float64, f func(blas.Float64, [][]float64) float64) {
		t.Helper()
		mine, theirs := make([][]float64, len(ops)), make([][]float64, len(ops))
		for i, o := range ops {
			mine[i], theirs[i] = append([]float64(nil), o...), append([]float64(nil), o...)
		}
		calls := gonumblas.GPUCalls(impl)
		got, want := f(impl, mine), f(native, theirs)
		assert.Equal(t, calls, gonumblas.GPUCalls(impl), "%s went to the GPU", name)
		assert.True(t, bitsEqual([]float64{got}, []float64{want}), "%s: got %v, want %v", name, got, want)
		for i := range ops {
			assert.True(t, bitsEqual(mine[i], theirs[i]), "%s: operand %d: got %v, want %v", name, i, mine[i], theirs[i])
		}
	}
	x, y, a := rnd(40), rnd(40), rnd(400)
	for name, f := range map[string]func(blas.Float64, [][]float64) float64{
		"dot n = 0":         func(i blas.Float64, o [][]float64) float64 { return i.Ddot(0, o[0], 1, o[1], 1) },
		"dot negative inc":  func(i blas.Float64, o [][]float64) float64 { return i.Ddot(10, o[0], -2, o[1], 3) },
		"nrm2 negative inc": func(i blas.Float64, o [][]float64) float64 { return i.Dnrm2(10, o[0], -1) },
		"axpy alpha = 0":    func(i blas.Float64, o [][]float64) float64 { i.Daxpy(10, 0, o[0], 1, o[1], 1); return 0 },
		"axpy negative inc": func(i blas.Float64, o [][]float64) float64 { i.Daxpy(10, 2, o[0], 1, o[1], -3); return 0 },
		"scal negative inc": func(i blas.Float64, o [][]float64) float64 { i.Dscal(10, 2, o[0], -1); return 0 },
		"gemv alpha = 0": func(i blas.Float64, o [][]float64) float64 {
			i.Dgemv(blas.NoTrans, 5, 5, 0, o[0], 5, o[1], 1, 2, o[2], 1)
			return 0
		},
		"gemv negative incX": func(i blas.Float64, o [][]float64) float64 {
			i.Dgemv(blas.Trans, 5, 5, 1, o[0], 5, o[1], -1, 2, o[2], 1)
			return 0
		},
		"gemv negative incY": func(i blas.Float64, o [][]float64) float64 {
			i.Dgemv(blas.NoTrans, 5, 5, 1, o[0], 5, o[1], 1, 2, o[2], -2)
			return 0
		},
		"gemv m = 0": func(i blas.Float64, o [][]float64) float64 {
			i.Dgemv(blas.NoTrans, 0, 5, 1, o[0], 5, o[1], 1, 2, o[2], 1)
			return 0
		},
		"gemm k = 0": func(i blas.Float64, o [][]float64) float64 {
			i.Dgemm(blas.NoTrans, blas.NoTrans, 5, 5, 0, 1, o[0], 1, o[1], 5, 2, o[2], 5)
			return 0
		},
		"gemm alpha = 0": func(i blas.Float64, o [][]float64) float64 {
			i.Dgemm(blas.Trans, blas.NoTrans, 5, 5, 5, 0, o[0], 5, o[1], 5, -1, o[2], 7)
			return 0
		},
		"gemm n = 0": func(i blas.Float64, o [][]float64) float64 {
			i.Dgemm(blas.NoTrans, blas.NoTrans, 5, 0, 5, 1, o[0], 5, o[1], 5, 1, o[2], 5)
			return 0
		},
	} {
		each(name, [][]float64{x, y, a}, f)
	}
	// NaN operands: alpha = 0 sets to zero (scal) or scales C without reading A, B.
	each("scal alpha = 0 over NaN", [][]float64{nans(10)}, func(i blas.Float64, o [][]float64) float64 {
		i.Dscal(10, 0, o[0], 1)
		return 0
	})
	each("gemm alpha = 0 beta = 0 over NaN", [][]float64{nans(25), nans(25), nans(25)}, func(i blas.Float64, o [][]float64) float64 {
		i.Dgemm(blas.NoTrans, blas.NoTrans, 5, 5, 5, 0, o[0], 5, o[1], 5, 0, o[2], 5)
		return 0
	})
	each("gemv alpha = 0 beta = 0 over NaN", [][]float64{nans(25), nans(5), nans(5)}, func(i blas.Float64, o [][]float64) float64 {
		i.Dgemv(blas.NoTrans, 5, 5, 0, o[0], 5, o[1], 1, 0, o[2], 1)
		return 0
	})
}

// gemmOnce runs an m×n×k Dgemm with impl on Go slices (or on the slices given) and
// reports whether it went to the GPU; the result must be gonum's.
func gemmOnce(t *testing.T, impl *gonumblas.Implementation, m, n, k int, ops ...[]float64) bool {
	t.Helper()
	r := cudatest.Rand(uint64(m*n + k))
	a, b, c := make([]float64, m*k), make([]float64, k*n), make([]float64, m*n)
	if len(ops) == 3 {
		a, b, c = ops[0], ops[1], ops[2]
	}
	for _, s := range [][]float64{a, b, c} {
		for i := range s {
			s[i] = 2*r.Float64() - 1
		}
	}
	want := append([]float64(nil), c...)
	native.Dgemm(blas.NoTrans, blas.NoTrans, m, n, k, 1.5, a, k, b, n, 0.5, want, n)
	before := impl.Stats()
	impl.Dgemm(blas.NoTrans, blas.NoTrans, m, n, k, 1.5, a, k, b, n, 0.5, c, n)
	assert.InDeltaSlice(t, want, c, 1e-12*float64(k))
	after := impl.Stats()
	// At least this call is counted (others may run on other goroutines meanwhile).
	assert.GreaterOrEqual(t, after.GPU-before.GPU+after.Native-before.Native, int64(1), "%+v then %+v", before, after)
	return after.GPU > before.GPU
}

// The default thresholds: staged Level 1 and 2 stay native; staged gemm goes to the
// GPU from order 128; skinny products stay native; in managed memory, the lower
// managed thresholds apply, only when every operand is in place.
func TestThresholds(t *testing.T) {
	ctx, impl := hostImpl(t, gonumblas.WithStaged(gonumblas.DefaultStaged), gonumblas.WithManaged(gonumblas.DefaultManaged))
	assert.False(t, gemmOnce(t, impl, 127, 127, 127), "order 127, staged")
	assert.True(t, gemmOnce(t, impl, 128, 128, 128), "order 128, staged")
	assert.False(t, gemmOnce(t, impl, 1024, 1024, 1), "outer product")
	assert.False(t, gemmOnce(t, impl, 96, 256, 96), "order 3/(1/96+1/256+1/96) = 121")
	assert.True(t, gemmOnce(t, impl, 128, 512, 128), "order 3/(1/128+1/512+1/128) = 171")

	big := make([]float64, 1<<20)
	calls := gonumblas.GPUCalls(impl)
	impl.Dscal(len(big), 2, big, 1)
	impl.Daxpy(len(big), 2, big, 1, big, 1)
	_ = impl.Ddot(len(big), big, 1, big, 1)
	impl.Dgemv(blas.NoTrans, 1024, 1024, 1, big, 1024, big[:1024], 1, 0, big[1024:2048], 1)
	assert.Equal(t, calls, gonumblas.GPUCalls(impl), "staged Level 1 and 2 stay native")

	managed := func(n int) []float64 {
		b, err := ctx.AllocManaged(8 * n)
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		require.NoError(t, impl.Register(b))
		return cuda.HostSlice[float64](b)
	}
	const n1 = 1 << 16
	x, y := managed(n1), managed(n1)
	calls = gonumblas.GPUCalls(impl)
	impl.Daxpy(n1-1, 2, x, 1, y, 1)
	assert.Equal(t, calls, gonumblas.GPUCalls(impl), "managed axpy below 1<<16")
	impl.Daxpy(n1, 2, x, 1, y, 1)
	assert.Equal(t, calls+1, gonumblas.GPUCalls(impl), "managed axpy at 1<<16")
	impl.Daxpy(n1, 2, x, 1, big[:n1], 1)
	assert.Equal(t, calls+1, gonumblas.GPUCalls(impl), "axpy with one Go slice: staged thresholds")

	assert.False(t, gemmOnce(t, impl, 63, 63, 63, managed(63*63), managed(63*63), managed(63*63)), "managed order 63")
	assert.True(t, gemmOnce(t, impl, 64, 64, 64, managed(64*64), managed(64*64), managed(64*64)), "managed order 64")
	assert.False(t, gemmOnce(t, impl, 64, 64, 64, managed(64*64), make([]float64, 64*64), managed(64*64)), "B in Go memory")
}

// Without cuBLAS (CI), calls above the threshold run natively and Err says why.
func TestNoCuBLAS(t *testing.T) {
	ctx, _ := cudatest.Stream(t)
	if cublasraw.Library().Open() == nil {
		t.Skip("cuBLAS is present: the GPU tests cover this machine")
	}
	impl, err := gonumblas.New(ctx, gonumblas.WithStaged(gonumblas.Thresholds{}))
	require.NoError(t, err)
	require.NoError(t, impl.Err())
	assert.False(t, gemmOnce(t, impl, 20, 30, 40))
	require.ErrorIs(t, impl.Err(), dl.ErrLibraryNotFound)
	assert.False(t, gemmOnce(t, impl, 20, 30, 40)) // and from then on without trying
	assert.Equal(t, gonumblas.Stats{GPU: 0, Native: 2, Fallbacks: 2}, impl.Stats())
}

// The zero Implementation is gonum's native implementation.
func TestZeroImplementation(t *testing.T) {
	var impl gonumblas.Implementation
	assert.False(t, gemmOnce(t, &impl, 200, 200, 200))
	blas64.Use(&impl)
	defer blas64.Use(native)
	v := blas64.Vector{N: 3, Inc: 1, Data: []float64{3, 4, 12}}
	assert.Equal(t, 13.0, blas64.Nrm2(v))
}

func TestNewAndRegisterErrors(t *testing.T) {
	_, err := gonumblas.New(nil)
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)

	ctx, s := cudatest.Stream(t)
	other, err := cuda.NewContext(0, 0)
	require.NoError(t, err)
	defer other.Close()
	os, err := other.NewStream()
	require.NoError(t, err)
	defer os.Close()
	_, err = gonumblas.New(ctx, gonumblas.WithStream(os))
	require.ErrorIs(t, err, cuda.ErrWrongContext)
	impl, err := gonumblas.New(ctx, gonumblas.WithStream(s))
	require.NoError(t, err)

	require.ErrorIs(t, impl.Register(nil), cuda.ErrInvalidArgument)
	b, err := ctx.AllocManaged(64)
	require.NoError(t, err)
	require.NoError(t, b.Close())
	require.ErrorIs(t, impl.Register(b), cuda.ErrInvalidArgument)
	ob, err := other.AllocManaged(64)
	require.NoError(t, err)
	defer ob.Close()
	require.ErrorIs(t, impl.Register(ob), cuda.ErrWrongContext)
}

// Only a slice that starts a registered buffer is used in place: one at an offset
// into it, or in an unregistered or closed buffer, is copied; results are the same.
func TestInPlaceLookup(t *testing.T) {
	ctx, impl := hostImpl(t)
	const n = 40
	alloc := func() (*cuda.ManagedBuffer, []float64) {
		b, err := ctx.AllocManaged(8 * (n*n + 8))
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		require.NoError(t, impl.Register(b))
		return b, cuda.HostSlice[float64](b)
	}
	_, a := alloc()
	_, bb := alloc()
	cb, c := alloc()
	inPlace := func(ops ...[]float64) int64 {
		before := gonumblas.InPlaceOps(impl)
		assert.True(t, gemmOnce(t, impl, n, n, n, ops...))
		return gonumblas.InPlaceOps(impl) - before
	}
	assert.EqualValues(t, 3, inPlace(a[:n*n], bb[:n*n], c[:n*n]))
	assert.EqualValues(t, 2, inPlace(a[:n*n], bb[:n*n], c[8:8+n*n]), "C at an offset")
	impl.Unregister(cb)
	assert.EqualValues(t, 2, inPlace(a[:n*n], bb[:n*n], c[:n*n]), "C unregistered")
	require.NoError(t, impl.Register(cb))
	assert.EqualValues(t, 3, inPlace(a[:n*n], bb[:n*n], c[:n*n]), "C registered again")
	require.NoError(t, impl.Register(cb)) // twice: harmless
	assert.EqualValues(t, 3, inPlace(a[:n*n], bb[:n*n], c[:n*n]))
}

// failing is a host stand-in whose gemm fails before writing anything.
type failing struct{ hostKernels[float64] }

var errInjected = errors.New("injected failure")

func (failing) Gemm(*cuda.Stream, cublasraw.CublasOperation, cublasraw.CublasOperation, int, int, int, float64, cuda.Memory, int,
	cuda.Memory, int, float64, cuda.Memory, int) error {
	return errInjected
}

// A GPU call that fails before writing its output runs natively; Err reports it.
func TestFailureFallsBack(t *testing.T) {
	ctx, _ := cudatest.Stream(t)
	impl, err := gonumblas.New(ctx, gonumblas.WithStaged(gonumblas.Thresholds{}),
		gonumblas.WithKernels(hostKernels[float32]{t}, failing{hostKernels[float64]{t}}))
	require.NoError(t, err)
	assert.False(t, gemmOnce(t, impl, 30, 20, 10))
	require.ErrorIs(t, impl.Err(), errInjected)
	impl.Daxpy(3, 1, []float64{1, 2, 3}, 1, make([]float64, 3), 1) // other routines still go
	assert.EqualValues(t, 1, gonumblas.GPUCalls(impl))
	assert.Equal(t, gonumblas.Stats{GPU: 1, Native: 1, Fallbacks: 1}, impl.Stats())
}

// Calls from many goroutines, each on a stream of the pool.
func TestConcurrentCalls(t *testing.T) {
	_, impl := hostImpl(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 4 {
				gemmOnce(t, impl, 17+g, 9+i, 13)
			}
		})
	}
	wg.Wait()
	assert.EqualValues(t, 32, gonumblas.GPUCalls(impl))
}
