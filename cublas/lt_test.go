package cublas_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cublas"
	"github.com/gocuda/gocuda/cublaslt/cublasltraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
)

// gelu is cuBLASLt's GELU, the tanh approximation.
func gelu(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

// Matmul's forward epilogues (bias + ReLU, bias + GELU with aux) and the backward
// DRELU_BGRAD against a CPU reference, float32, repeated so that the cached plans
// serve the later calls.
func TestGPUMatmulEpilogues(t *testing.T) {
	_, s := setup(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cublasltraw.Library())
	r := rand.New(rand.NewPCG(7, 8))
	const m, n, k = 64, 16, 32
	a, _ := randOf[float32](r, m*k)
	b, _ := randOf[float32](r, k*n)
	bias, _ := randOf[float32](r, m)
	pre := make([]float64, m*n) // A·B + bias
	for i := range m {
		for j := range n {
			sum := float64(bias[i])
			for p := range k {
				sum += float64(a[i+p*m]) * float64(b[p+j*k])
			}
			pre[i+j*m] = sum
		}
	}
	dA, dB, dBias := cudatest.AllocFrom(t, s, a), cudatest.AllocFrom(t, s, b), cudatest.AllocFrom(t, s, bias)
	const tol = 1e-4 * (k + 1)
	for round := range 2 {
		dD := cudatest.AllocFrom(t, s, make([]float32, m*n))
		require.NoError(t, cublas.Matmul[float32](s, cublas.NoTrans, cublas.NoTrans, m, n, k, 1, dA, m, dB, k, 0, dD, m,
			cublas.Epilogue{Act: cublas.ReLU, Bias: dBias}))
		got := cudatest.Read[float32](t, dD, m*n)
		for i, x := range pre {
			require.InDelta(t, math.Max(x, 0), float64(got[i]), tol, "relu+bias round %d element %d", round, i)
		}
	}

	// GELU with aux: D = gelu(pre), aux = pre.
	dD := cudatest.AllocFrom(t, s, make([]float32, m*n))
	dAux := cudatest.AllocFrom(t, s, make([]float32, m*n))
	require.NoError(t, cublas.Matmul[float32](s, cublas.NoTrans, cublas.NoTrans, m, n, k, 1, dA, m, dB, k, 0, dD, m,
		cublas.Epilogue{Act: cublas.GELU, Bias: dBias, Aux: dAux, AuxLd: m}))
	got, aux := cudatest.Read[float32](t, dD, m*n), cudatest.Read[float32](t, dAux, m*n)
	for i, x := range pre {
		require.InDelta(t, gelu(x), float64(got[i]), tol, "gelu element %d", i)
		require.InDelta(t, x, float64(aux[i]), tol, "gelu aux element %d", i)
	}

	// ReLU with aux (the mask), then the backward pass with it: G = (A·B) ⊙ [pre > 0],
	// and the bias gradient the sums of G's rows.
	mask := cudatest.AllocFrom(t, s, make([]byte, 128/8*n))
	require.NoError(t, cublas.Matmul[float32](s, cublas.NoTrans, cublas.NoTrans, m, n, k, 1, dA, m, dB, k, 0, dD, m,
		cublas.Epilogue{Act: cublas.ReLU, Bias: dBias, Aux: mask, AuxLd: 128}))
	dG := cudatest.AllocFrom(t, s, make([]float32, m*n))
	dGB := cudatest.AllocFrom(t, s, make([]float32, m))
	require.NoError(t, cublas.Matmul[float32](s, cublas.NoTrans, cublas.NoTrans, m, n, k, 1, dA, m, dB, k, 0, dG, m,
		cublas.Epilogue{Act: cublas.ReLU, Bias: dGB, Aux: mask, AuxLd: 128, Backward: true}))
	g, gb := cudatest.Read[float32](t, dG, m*n), cudatest.Read[float32](t, dGB, m)
	for i := range m {
		var row float64
		for j := range n {
			want := 0.0
			if pre[i+j*m] > 0 {
				want = pre[i+j*m] - float64(bias[i])
			}
			row += want
			assert.InDelta(t, want, float64(g[i+j*m]), tol, "drelu (%d,%d)", i, j)
		}
		assert.InDelta(t, row, float64(gb[i]), tol*n, "bias gradient %d", i)
	}
}
