package cublas_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gocuda/gocuda/cublas"
	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/resource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Type combinations cublasGemmEx does not have, and scalars a compute type cannot
// hold, are errors before any CUDA call (these run on the fake driver).
func TestGemmMixedArgumentChecks(t *testing.T) {
	_, s := setup(t)
	h, err := cuda.AllocFor[cuda.Float16](s, 16)
	require.NoError(t, err)
	defer h.Close()
	f, err := cuda.AllocFor[float32](s, 16)
	require.NoError(t, err)
	defer f.Close()
	i8, err := cuda.AllocFor[int8](s, 16)
	require.NoError(t, err)
	defer i8.Close()
	i32, err := cuda.AllocFor[int32](s, 16)
	require.NoError(t, err)
	defer i32.Close()
	N := cublas.NoTrans
	for name, err := range map[string]error{
		"half into float64":   cublas.GemmMixed[cuda.Float16, float64](s, N, N, 4, 4, 4, 1, h, 4, h, 4, 0, f, 4, cublas.Compute32F),
		"float32 in 16F":      cublas.GemmMixed[float32, float32](s, N, N, 4, 4, 4, 1, f, 4, f, 4, 0, f, 4, cublas.Compute16F),
		"int8 alpha 0.5":      cublas.GemmMixed[int8, int32](s, N, N, 4, 4, 4, 0.5, i8, 4, i8, 4, 0, i32, 4, cublas.Compute32I),
		"int8 k of 3":         cublas.GemmMixed[int8, int32](s, N, N, 4, 4, 3, 1, i8, 4, i8, 4, 0, i32, 4, cublas.Compute32I),
		"int8 lda of 5":       cublas.GemmMixed[int8, int32](s, N, N, 4, 2, 4, 1, i8, 5, i8, 4, 0, i32, 4, cublas.Compute32I),
		"C of another type":   cublas.GemmMixed[cuda.Float16, float32](s, N, N, 4, 4, 4, 1, h, 4, h, 4, 0, h, 4, cublas.Compute32F),
		"A too small":         cublas.GemmMixed[cuda.Float16, float32](s, N, N, 4, 4, 5, 1, h, 4, h, 5, 0, f, 4, cublas.Compute32F),
		"half gemm too small": cublas.Gemm[cuda.Float16](s, N, N, 4, 4, 5, cuda.NewFloat16(1), h, 4, h, 5, 0, h, 4),
		"workspace size":      cublas.SetWorkspaceSize(s.Context(), -1),
	} {
		require.ErrorIs(t, err, cuda.ErrInvalidArgument, name)
	}
}

// mixedRef is the float64 product C = alpha·A·B + beta·C (column-major, no
// transposition) of inputs already rounded to their GPU types.
func mixedRef(m, n, k int, alpha float64, a, b []float64, beta float64, c []float64) []float64 {
	out := make([]float64, m*n)
	for i := range m {
		for j := range n {
			var sum float64
			for p := range k {
				sum += a[i+p*m] * b[p+j*k]
			}
			out[i+j*m] = alpha*sum + beta*c[i+j*m]
		}
	}
	return out
}

// checkMixed runs GemmMixed[In, Out] on random inputs in [-1, 1] (integers in
// [-8, 8] for int8) and compares with the float64 product within tol·k.
func checkMixed[In, Out cublas.ExType](t *testing.T, s *cuda.Stream, compute cublasraw.CublasComputeType, tol float64,
	toIn func(float64) In, fromIn func(In) float64, toOut func(float64) Out, fromOut func(Out) float64) {
	t.Helper()
	r := rand.New(rand.NewPCG(uint64(compute), 3))
	m, n, k := 67, 45, 129
	if _, ok := any(*new(In)).(int8); ok {
		m, n, k = 68, 44, 128 // int8 GEMMs need multiples of 4
	}
	ins := func(l int) ([]In, []float64) {
		v, ref := make([]In, l), make([]float64, l)
		for i := range v {
			v[i] = toIn(r.Float64()*2 - 1)
			ref[i] = fromIn(v[i])
		}
		return v, ref
	}
	a, aRef := ins(m * k)
	b, bRef := ins(k * n)
	c, cRef := make([]Out, m*n), make([]float64, m*n)
	for i := range c {
		c[i] = toOut(r.Float64()*2 - 1)
		cRef[i] = fromOut(c[i])
	}
	alpha, beta := 2.0, 1.0
	dA, dB, dC := cudatest.AllocFrom(t, s, a), cudatest.AllocFrom(t, s, b), cudatest.AllocFrom(t, s, c)
	require.NoError(t, cublas.GemmMixed[In, Out](s, cublas.NoTrans, cublas.NoTrans, m, n, k, alpha, dA, m, dB, k, beta, dC, m, compute))
	got := cudatest.Read[Out](t, dC, m*n)
	want := mixedRef(m, n, k, alpha, aRef, bRef, beta, cRef)
	for i := range want {
		if d := math.Abs(fromOut(got[i]) - want[i]); d > tol*float64(k) {
			t.Fatalf("%T→%T compute %v: element %d = %v, want %v (off by %g)", *new(In), *new(Out), compute, i, fromOut(got[i]), want[i], d)
		}
	}
}

// Every kind of mixed-precision GEMM against a float64 CPU product, and the half
// GEMM of Gemm[cuda.Float16].
func TestGemmMixed(t *testing.T) {
	_, s := setup(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cublasraw.Library())
	f16 := func(x float64) cuda.Float16 { return cuda.NewFloat16(float32(x)) }
	unf16 := func(h cuda.Float16) float64 { return float64(h.Float32()) }
	bf16 := func(x float64) cuda.BFloat16 { return cuda.NewBFloat16(float32(x)) }
	unbf16 := func(h cuda.BFloat16) float64 { return float64(h.Float32()) }
	f32 := func(x float64) float32 { return float32(x) }
	unf32 := func(x float32) float64 { return float64(x) }
	f64 := func(x float64) float64 { return x }
	i8 := func(x float64) int8 { return int8(math.Round(x * 8)) }
	uni8 := func(x int8) float64 { return float64(x) }
	i32 := func(x float64) int32 { return int32(math.Round(x * 8)) }
	uni32 := func(x int32) float64 { return float64(x) }

	checkMixed(t, s, cublas.Compute32F, 1e-6, f16, unf16, f32, unf32)         // half in, float32 out
	checkMixed(t, s, cublas.Compute32F, 1e-6, bf16, unbf16, f32, unf32)       // bfloat16 in, float32 out
	checkMixed(t, s, cublas.Compute32F, 4e-3, f16, unf16, f16, unf16)         // half in and out: rounding of C
	checkMixed(t, s, cublas.Compute32F, 3e-2, bf16, unbf16, bf16, unbf16)     // bfloat16 in and out
	checkMixed(t, s, cublas.Compute32F, 1e-6, f32, unf32, f32, unf32)         // plain float32
	checkMixed(t, s, cublas.Compute32FFastTF32, 2e-3, f32, unf32, f32, unf32) // TF32 inputs: 10-bit mantissas
	checkMixed(t, s, cublas.Compute32FFast16BF, 1e-2, f32, unf32, f32, unf32) // bfloat16 inputs
	checkMixed(t, s, cublas.Compute64F, 1e-15, f64, f64, f64, f64)            // float64
	checkMixed(t, s, cublas.Compute32I, 0, i8, uni8, i32, uni32)              // exact integers
	checkMixed(t, s, cublas.Compute16F, 2e-2, f16, unf16, f16, unf16)         // half accumulation

	// Gemm[cuda.Float16] is the half GEMM (half accumulation) with half scalars.
	const m, n, k = 33, 17, 20
	r := rand.New(rand.NewPCG(4, 4))
	a, b := make([]cuda.Float16, m*k), make([]cuda.Float16, k*n)
	aRef, bRef := make([]float64, m*k), make([]float64, k*n)
	for i := range a {
		a[i] = f16(r.Float64()*2 - 1)
		aRef[i] = unf16(a[i])
	}
	for i := range b {
		b[i] = f16(r.Float64()*2 - 1)
		bRef[i] = unf16(b[i])
	}
	dA, dB := cudatest.AllocFrom(t, s, a), cudatest.AllocFrom(t, s, b)
	dC, err := cuda.AllocFor[cuda.Float16](s, m*n)
	require.NoError(t, err)
	defer dC.Close()
	require.NoError(t, cublas.Gemm(s, cublas.NoTrans, cublas.NoTrans, m, n, k, f16(1), dA, m, dB, k, f16(0), dC, m))
	got := cudatest.Read[cuda.Float16](t, dC, m*n)
	want := mixedRef(m, n, k, 1, aRef, bRef, 0, make([]float64, m*n))
	for i := range want {
		assert.InDelta(t, want[i], unf16(got[i]), 2e-2*k, "element %d", i)
	}
}

// The workspace size belongs to its context: set for one, it leaves the others at
// DefaultWorkspaceSize, and it goes with the context, so that a context made later
// (which the driver may give the same handle) starts from the default. No cuBLAS
// call: it runs on the fake driver.
func TestWorkspaceSizePerContext(t *testing.T) {
	ctx, _ := cudatest.Stream(t)
	assert.Equal(t, cublas.DefaultWorkspaceSize, cublas.WorkspaceSize(ctx))
	assert.ErrorIs(t, cublas.SetWorkspaceSize(nil, 1), cuda.ErrInvalidArgument)

	other, err := cuda.NewContext(0, 0)
	require.NoError(t, err)
	require.NoError(t, cublas.SetWorkspaceSize(other, 1<<20))
	assert.Equal(t, 1<<20, cublas.WorkspaceSize(other))
	assert.Equal(t, cublas.DefaultWorkspaceSize, cublas.WorkspaceSize(ctx), "other contexts keep the default")

	require.NoError(t, other.Close())
	assert.Equal(t, cublas.DefaultWorkspaceSize, cublas.WorkspaceSize(other), "gone with the context")
	err = cublas.SetWorkspaceSize(other, 1<<20)
	assert.ErrorIs(t, err, cuda.ErrClosed)
	assert.ErrorContains(t, err, "cublas: set workspace size")
	assert.Equal(t, cublas.DefaultWorkspaceSize, cublas.WorkspaceSize(other), "nothing kept for a destroyed context")

	again, err := cuda.NewContext(0, 0)
	require.NoError(t, err)
	defer again.Close()
	assert.Equal(t, cublas.DefaultWorkspaceSize, cublas.WorkspaceSize(again))
}

// Each handle's workspace comes from the device's pool (it shows in the context's
// memory status), and a handle that moves between streams gives correct results:
// the hand-off orders the workspace's uses.
func TestWorkspace(t *testing.T) {
	ctx, s := setup(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cublasraw.Library())
	_, err := resource.Reclaim() // no idle handles: the first call makes one
	require.NoError(t, err)
	require.NoError(t, cublas.SetWorkspaceSize(ctx, 8<<20))
	defer cublas.SetWorkspaceSize(ctx, cublas.DefaultWorkspaceSize)
	assert.Equal(t, 8<<20, cublas.WorkspaceSize(ctx))
	before := cudatest.DeviceBytes(t)

	s2, err := ctx.NewStream()
	require.NoError(t, err)
	defer s2.Close()
	r := rand.New(rand.NewPCG(7, 7))
	const m, n, k = 512, 512, 2048 // large k: split-K kernels that use the workspace
	a, aRef := randOf[float32](r, m*k)
	b, bRef := randOf[float32](r, k*n)
	dA, dB := cudatest.AllocFrom(t, s, a), cudatest.AllocFrom(t, s, b)
	want := gemmRef(cublas.NoTrans, cublas.NoTrans, m, n, k, 1, aRef, m, bRef, k, 0, make([]complex128, m*n), m)
	for i := range 6 {
		st := []*cuda.Stream{s, s2}[i%2] // one cached handle, alternating streams
		dC, err := cuda.AllocFor[float32](st, m*n)
		require.NoError(t, err)
		require.NoError(t, cublas.Gemm[float32](st, cublas.NoTrans, cublas.NoTrans, m, n, k, 1, dA, m, dB, k, 0, dC, m))
		if i == 0 {
			assert.GreaterOrEqual(t, cudatest.DeviceBytes(t)-before, int64(8<<20), "the workspace is the package's device memory")
		}
		got := toC128(cudatest.Read[float32](t, dC, m*n))
		for j := range want {
			if d := got[j] - want[j]; math.Abs(real(d)) > 1e-3 {
				t.Fatalf("round %d: element %d = %v, want %v", i, j, got[j], want[j])
			}
		}
		dC.Close()
		if i == 3 {
			// A new size replaces the handles' workspaces (the old ones go back to the
			// pool): no handle may keep using a freed one (memcheck runs this test).
			require.NoError(t, cublas.SetWorkspaceSize(ctx, 0))
		}
	}
	assert.LessOrEqual(t, cublas.IdleHandlesForTest(ctx), cublas.MaxIdleHandles)
}
