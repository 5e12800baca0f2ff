package cublas_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/gocuda/gocuda/cublas"
	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cublaslt/cublasltraw"
	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
)

// Every bad argument of the level-3 operations and Matmul is an error before any
// library call: these run on the fake driver (CI), where cuBLAS is absent.
func TestLevel3ArgumentChecks(t *testing.T) {
	_, s := setup(t)
	a, err := cuda.AllocFor[float32](s, 16) // 4×4
	require.NoError(t, err)
	defer a.Close()
	d, err := cuda.AllocFor[float64](s, 16)
	require.NoError(t, err)
	defer d.Close()
	z, err := cuda.AllocFor[complex64](s, 16)
	require.NoError(t, err)
	defer z.Close()
	small, err := cuda.AllocFor[float32](s, 3)
	require.NoError(t, err)
	defer small.Close()
	mem := []cuda.Memory{a}
	for name, err := range map[string]error{
		"trsm side":            cublas.Trsm[float32](s, 9, cublas.Lower, cublas.NoTrans, cublas.NonUnit, 4, 4, 1, a, 4, a, 4),
		"trsm uplo":            cublas.Trsm[float32](s, cublas.Left, 9, cublas.NoTrans, cublas.NonUnit, 4, 4, 1, a, 4, a, 4),
		"trsm diag":            cublas.Trsm[float32](s, cublas.Left, cublas.Lower, cublas.NoTrans, 9, 4, 4, 1, a, 4, a, 4),
		"trsm A right":         cublas.Trsm[float32](s, cublas.Right, cublas.Lower, cublas.NoTrans, cublas.Unit, 2, 5, 1, a, 5, a, 2),
		"trsm B type":          cublas.Trsm[float32](s, cublas.Left, cublas.Lower, cublas.NoTrans, cublas.Unit, 4, 4, 1, a, 4, d, 4),
		"trsm trans":           cublas.Trsm[float32](s, cublas.Left, cublas.Lower, 7, cublas.Unit, 4, 4, 1, a, 4, a, 4),
		"syrk trans":           cublas.Syrk[float32](s, cublas.Lower, cublas.ConjTrans, 4, 4, 1, a, 4, 0, a, 4),
		"syrk C too small":     cublas.Syrk[float32](s, cublas.Upper, cublas.NoTrans, 4, 1, 1, a, 4, 0, small, 4),
		"syrk uplo":            cublas.Syrk[float64](s, 5, cublas.NoTrans, 4, 4, 1, d, 4, 0, d, 4),
		"herk trans":           cublas.Herk[complex64](s, cublas.Lower, cublas.Trans, 4, 4, 1, z, 4, 0, z, 4),
		"herk type":            cublas.Herk[complex64](s, cublas.Lower, cublas.NoTrans, 4, 4, 1, a, 4, 0, z, 4),
		"geam ld":              cublas.Geam[float32](s, cublas.NoTrans, cublas.NoTrans, 4, 4, 1, a, 3, 0, a, 4, a, 4),
		"geam in place trans":  cublas.Geam[float32](s, cublas.Trans, cublas.NoTrans, 4, 4, 1, a, 4, 0, small, 1, a, 4),
		"geam B too small":     cublas.Geam[float32](s, cublas.NoTrans, cublas.NoTrans, 2, 2, 1, a, 2, 1, small, 2, a, 2),
		"batched lengths":      cublas.GemmBatched[float32](s, cublas.NoTrans, cublas.NoTrans, 2, 2, 2, 1, mem, 2, mem, 2, 0, nil, 2),
		"batched C too small":  cublas.GemmBatched[float32](s, cublas.NoTrans, cublas.NoTrans, 2, 2, 2, 1, mem, 2, mem, 2, 0, []cuda.Memory{small}, 2),
		"batched nil":          cublas.GemmBatched[float32](s, cublas.NoTrans, cublas.NoTrans, 2, 2, 2, 1, mem, 2, []cuda.Memory{nil}, 2, 0, mem, 2),
		"matmul A":             cublas.Matmul[float32](s, cublas.NoTrans, cublas.NoTrans, 4, 4, 5, 1, a, 4, a, 5, 0, a, 4, cublas.Epilogue{}),
		"matmul bias":          cublas.Matmul[float32](s, cublas.NoTrans, cublas.NoTrans, 4, 4, 4, 1, a, 4, a, 4, 0, a, 4, cublas.Epilogue{Bias: small}),
		"matmul bias type":     cublas.Matmul[float64](s, cublas.NoTrans, cublas.NoTrans, 4, 4, 4, 1, d, 4, d, 4, 0, d, 4, cublas.Epilogue{Bias: a}),
		"matmul relu aux ld":   cublas.Matmul[float32](s, cublas.NoTrans, cublas.NoTrans, 4, 4, 4, 1, a, 4, a, 4, 0, a, 4, cublas.Epilogue{Act: cublas.ReLU, Aux: a, AuxLd: 4}),
		"matmul gelu aux size": cublas.Matmul[float32](s, cublas.NoTrans, cublas.NoTrans, 4, 4, 4, 1, a, 4, a, 4, 0, a, 4, cublas.Epilogue{Act: cublas.GELU, Aux: small, AuxLd: 8}),
		"matmul backward":      cublas.Matmul[float32](s, cublas.NoTrans, cublas.NoTrans, 4, 4, 4, 1, a, 4, a, 4, 0, a, 4, cublas.Epilogue{Act: cublas.ReLU, Backward: true}),
		"matmul identity aux":  cublas.Matmul[float32](s, cublas.NoTrans, cublas.NoTrans, 4, 4, 4, 1, a, 4, a, 4, 0, a, 4, cublas.Epilogue{Aux: a, AuxLd: 8}),
		"matmul activation":    cublas.Matmul[float32](s, cublas.NoTrans, cublas.NoTrans, 4, 4, 4, 1, a, 4, a, 4, 0, a, 4, cublas.Epilogue{Act: 9}),
	} {
		require.ErrorIs(t, err, cuda.ErrInvalidArgument, name)
		assert.Contains(t, err.Error(), "cublas: ", name)
	}
	// An empty batch does nothing and loads nothing.
	assert.NoError(t, cublas.GemmBatched[float32](s, cublas.NoTrans, cublas.NoTrans, 2, 2, 2, 1, nil, 2, nil, 2, 0, nil, 2))
}

// TestMatmulNoLibrary: with the operands right, Matmul's first library call fails
// with cuBLASLt's typed load error where the library is absent (CI).
func TestMatmulNoLibrary(t *testing.T) {
	_, s := setup(t)
	if cublasltraw.Library().Open() == nil {
		t.Skip("cuBLASLt is loaded here")
	}
	a, err := cuda.AllocFor[float32](s, 16)
	require.NoError(t, err)
	defer a.Close()
	err = cublas.Matmul[float32](s, cublas.NoTrans, cublas.NoTrans, 4, 4, 4, 1, a, 4, a, 4, 0, a, 4, cublas.Epilogue{Act: cublas.ReLU, Bias: a})
	require.Error(t, err)
	assert.ErrorContains(t, err, cublasltraw.Soname)
}

// gonum's CPU reference and its tolerance, as gonum's own tests use for float64
// (testblas's 1e-13 scaled by the size).
var cpu gonum.Implementation

func general(r *rand.Rand, rows, cols int) blas64.General {
	g := blas64.General{Rows: rows, Cols: cols, Stride: cols, Data: make([]float64, rows*cols)}
	for i := range g.Data {
		g.Data[i] = r.Float64()*2 - 1
	}
	return g
}

// colMajor returns g's elements column-major (cuBLAS's order), gonum's being row-major.
func colMajor(g blas64.General) []float64 {
	out := make([]float64, g.Rows*g.Cols)
	for i := range g.Rows {
		for j := range g.Cols {
			out[i+j*g.Rows] = g.Data[i*g.Stride+j]
		}
	}
	return out
}

func assertColMajor(t *testing.T, want blas64.General, got []float64, tol float64, what string) {
	t.Helper()
	for i := range want.Rows {
		for j := range want.Cols {
			if math.Abs(want.Data[i*want.Stride+j]-got[i+j*want.Rows]) > tol {
				t.Fatalf("%s: (%d,%d) = %v, want %v", what, i, j, got[i+j*want.Rows], want.Data[i*want.Stride+j])
			}
		}
	}
}

// TRSM, SYRK, GEAM and pointer-array batched GEMM in float64 against gonum.
func TestGPULevel3(t *testing.T) {
	_, s := setup(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cublasraw.Library())
	r := rand.New(rand.NewPCG(3, 4))
	const m, n, k = 19, 13, 11

	// TRSM: A lower triangular with a strong diagonal; B = X solved in place.
	a := general(r, m, m)
	for i := range m {
		a.Data[i*m+i] += 4
	}
	b := general(r, m, n)
	dA, dB := cudatest.AllocFrom(t, s, colMajor(a)), cudatest.AllocFrom(t, s, colMajor(b))
	require.NoError(t, cublas.Trsm(s, cublas.Left, cublas.Lower, cublas.NoTrans, cublas.NonUnit, m, n, 1.5, dA, m, dB, m))
	cpu.Dtrsm(blas.Left, blas.Lower, blas.NoTrans, blas.NonUnit, m, n, 1.5, a.Data, m, b.Data, n)
	assertColMajor(t, b, cudatest.Read[float64](t, dB, m*n), 1e-12, "trsm")

	// SYRK: C = 0.5·A·Aᵀ + 2·C, lower triangle.
	sa, sc := general(r, n, k), general(r, n, n)
	dSA, dSC := cudatest.AllocFrom(t, s, colMajor(sa)), cudatest.AllocFrom(t, s, colMajor(sc))
	require.NoError(t, cublas.Syrk(s, cublas.Lower, cublas.NoTrans, n, k, 0.5, dSA, n, 2.0, dSC, n))
	cpu.Dsyrk(blas.Lower, blas.NoTrans, n, k, 0.5, sa.Data, k, 2, sc.Data, n)
	got := cudatest.Read[float64](t, dSC, n*n)
	for i := range n {
		for j := range i + 1 {
			assert.InDelta(t, sc.Data[i*n+j], got[i+j*n], 1e-12, "syrk (%d,%d)", i, j)
		}
	}

	// GEAM: C = 2·Aᵀ - B.
	ga, gb := general(r, n, m), general(r, m, n)
	dGA, dGB := cudatest.AllocFrom(t, s, colMajor(ga)), cudatest.AllocFrom(t, s, colMajor(gb))
	dGC := cudatest.AllocFrom(t, s, make([]float64, m*n))
	require.NoError(t, cublas.Geam(s, cublas.Trans, cublas.NoTrans, m, n, 2.0, dGA, n, -1.0, dGB, m, dGC, m))
	want := blas64.General{Rows: m, Cols: n, Stride: n, Data: make([]float64, m*n)}
	for i := range m {
		for j := range n {
			want.Data[i*n+j] = 2*ga.Data[j*m+i] - gb.Data[i*n+j]
		}
	}
	assertColMajor(t, want, cudatest.Read[float64](t, dGC, m*n), 1e-14, "geam")

	// Pointer-array batched GEMM: three products of separate buffers.
	var as, bs, cs []cuda.Memory
	var wants []blas64.General
	for range 3 {
		x, y := general(r, m, k), general(r, k, n)
		z := blas64.General{Rows: m, Cols: n, Stride: n, Data: make([]float64, m*n)}
		cpu.Dgemm(blas.NoTrans, blas.NoTrans, m, n, k, 1, x.Data, k, y.Data, n, 0, z.Data, n)
		as, bs = append(as, cudatest.AllocFrom(t, s, colMajor(x))), append(bs, cudatest.AllocFrom(t, s, colMajor(y)))
		cs = append(cs, cudatest.AllocFrom(t, s, make([]float64, m*n)))
		wants = append(wants, z)
	}
	require.NoError(t, cublas.GemmBatched(s, cublas.NoTrans, cublas.NoTrans, m, n, k, 1.0, as, m, bs, k, 0.0, cs, m))
	for i, c := range cs {
		assertColMajor(t, wants[i], cudatest.Read[float64](t, c.(*cuda.DeviceBuffer), m*n), 1e-12, "gemm batched")
	}
}

// HERK in complex128 against a CPU product (gonum has no complex HERK in blas64).
func TestGPUHerk(t *testing.T) {
	_, s := setup(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cublasraw.Library())
	r := rand.New(rand.NewPCG(5, 6))
	const n, k = 9, 7
	a, aRef := randOf[complex128](r, n*k)
	dA, dC := cudatest.AllocFrom(t, s, a), cudatest.AllocFrom(t, s, make([]complex128, n*n))
	require.NoError(t, cublas.Herk[complex128](s, cublas.Upper, cublas.NoTrans, n, k, 1, dA, n, 0, dC, n))
	got := cudatest.Read[complex128](t, dC, n*n)
	want := gemmRef(cublas.NoTrans, cublas.ConjTrans, n, n, k, 1, aRef, n, aRef, n, 0, make([]complex128, n*n), n)
	for j := range n {
		for i := range j + 1 {
			assert.InDelta(t, real(want[i+j*n]), real(got[i+j*n]), 1e-12, "herk (%d,%d)", i, j)
			assert.InDelta(t, imag(want[i+j*n]), imag(got[i+j*n]), 1e-12, "herk (%d,%d)", i, j)
		}
	}
}
