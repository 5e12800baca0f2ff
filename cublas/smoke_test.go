package cublas_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
)

// TestSmokeSgemm runs a 64x48x32 SGEMM (column-major, C = alpha*A*B + beta*C)
// on random data and compares it with a float64 CPU product.
func TestSmokeSgemm(t *testing.T) {
	g := cudatest.Require(t)
	cudatest.RequireLibrary(t, cublasraw.Library())
	h, err := cublasraw.NewOwnedHandle()
	require.NoError(t, err)
	defer func() { assert.NoError(t, h.Close()) }()

	var ver int32
	require.NoError(t, cublasraw.GetVersion(h.Handle(), &ver))
	t.Logf("cuBLAS version %d (headers %d)", ver, cublasraw.CUBLAS_VERSION)

	const m, n, k = 64, 48, 32
	r := cudatest.Rand(2)
	a := cudatest.RandFloat32s(r, m*k) // m x k, lda = m
	b := cudatest.RandFloat32s(r, k*n) // k x n, ldb = k
	c := cudatest.RandFloat32s(r, m*n) // m x n, ldc = m
	alpha, beta := float32(1.25), float32(-0.5)

	dA := cudatest.Float32sToDevice(t, g, a)
	dB := cudatest.Float32sToDevice(t, g, b)
	dC := cudatest.Float32sToDevice(t, g, c)
	require.NoError(t, cublasraw.Sgemm(h.Handle(), cublasraw.CUBLAS_OP_N, cublasraw.CUBLAS_OP_N, m, n, k,
		&alpha, cudatest.DevPtr[float32](dA), m,
		cudatest.DevPtr[float32](dB), k,
		&beta, cudatest.DevPtr[float32](dC), m))
	got := cudatest.Float32sFromDevice(t, dC, m*n)

	var num, den float64
	for j := 0; j < n; j++ {
		for i := 0; i < m; i++ {
			var s float64
			for p := 0; p < k; p++ {
				s += float64(a[i+p*m]) * float64(b[p+j*k])
			}
			want := float64(alpha)*s + float64(beta)*float64(c[i+j*m])
			d := float64(got[i+j*m]) - want
			num += d * d
			den += want * want
		}
	}
	rel := math.Sqrt(num / den)
	t.Logf("SGEMM %dx%dx%d: relative error %.3g (Frobenius) vs float64 CPU", m, n, k, rel)
	assert.Less(t, rel, 1e-4)
}
