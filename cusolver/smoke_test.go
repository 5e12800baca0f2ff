package cusolver_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/cusolver"
	"github.com/gocuda/gocuda/cusolver/cusolverraw"
)

// TestSmokeDpotrf factors a random 32×32 symmetric positive definite matrix with the
// raw layer alone (cusolverDnDpotrf on the legacy default stream) and checks L·Lᵀ
// against the matrix in float64.
func TestSmokeDpotrf(t *testing.T) {
	g := cudatest.Require(t)
	cudatest.RequireLibrary(t, cusolverraw.Library())
	var ver int32
	require.NoError(t, cusolverraw.GetVersion(&ver))
	t.Logf("cuSOLVER version %d (headers %d)", ver, cusolverraw.CUSOLVER_VERSION)

	h, err := cusolverraw.NewOwnedDnHandle()
	require.NoError(t, err)
	defer func() { assert.NoError(t, h.Close()) }()

	const n = 32
	r := cudatest.Rand(5)
	m := make([]float64, n*n)
	for i := range m {
		m[i] = 2*r.Float64() - 1
	}
	a := make([]float64, n*n) // M·Mᵀ + n·I
	for j := range n {
		for i := range n {
			for k := range n {
				a[i+j*n] += m[i+k*n] * m[j+k*n]
			}
		}
		a[j+j*n] += n
	}
	dA := cudatest.ToDevice(t, g, a)
	var lwork int32
	require.NoError(t, cusolverraw.DnDpotrfBufferSize(h.Handle(), cusolver.Lower, n, cudatest.DevPtr[float64](dA), n, &lwork))
	dW := cudatest.Alloc[float64](t, g, max(int(lwork), 1))
	dInfo := cudatest.Alloc[int32](t, g, 1)
	require.NoError(t, cusolverraw.DnDpotrf(h.Handle(), cusolver.Lower, n, cudatest.DevPtr[float64](dA), n,
		cudatest.DevPtr[float64](dW), lwork, cudatest.DevPtr[int32](dInfo)))
	info := cudatest.FromDevice[int32](t, dInfo, 1)
	require.Zero(t, info[0], "devInfo")
	l := cudatest.FromDevice[float64](t, dA, n*n)

	var num, den float64
	for j := range n {
		for i := j; i < n; i++ { // the lower triangle of L·Lᵀ
			var s float64
			for k := 0; k <= j; k++ {
				s += l[i+k*n] * l[j+k*n]
			}
			d := s - a[i+j*n]
			num += d * d
			den += a[i+j*n] * a[i+j*n]
		}
	}
	rel := math.Sqrt(num / den)
	t.Logf("DPOTRF %d×%d: relative error of L·Lᵀ %.3g", n, n, rel)
	assert.Less(t, rel, 1e-13)
}
