package cufft_test

import (
	"math"
	"math/cmplx"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/cufft/cufftraw"
)

// TestSmokeFFT1d runs a forward 1-D complex-to-complex FFT of size 256 and
// compares it with a float64 DFT computed on the CPU.
func TestSmokeFFT1d(t *testing.T) {
	g := cudatest.Require(t)
	cudatest.RequireLibrary(t, cufftraw.Library())

	var ver int32
	require.NoError(t, cufftraw.GetVersion(&ver))
	t.Logf("cuFFT version %d (headers %d)", ver, cufftraw.CUFFT_VERSION)

	const n = 256
	plan, err := cufftraw.NewOwnedPlan()
	require.NoError(t, err)
	defer func() { assert.NoError(t, plan.Close()) }()
	var work uint64
	require.NoError(t, cufftraw.MakePlan1d(plan.Handle(), n, cufftraw.CUFFT_C2C, 1, &work))
	t.Logf("plan work area %d bytes", work)

	r := cudatest.Rand(3)
	in := make([]cudaraw.CuComplex, n)
	for i := range in {
		in[i] = cudaraw.CuComplex{X: 2*r.Float32() - 1, Y: 2*r.Float32() - 1}
	}
	dIn := cudatest.ToDevice(t, g, in)
	dOut := cudatest.Alloc[cudaraw.CuComplex](t, g, n)
	require.NoError(t, cufftraw.ExecC2C(plan.Handle(), cudatest.DevPtr[cudaraw.CuComplex](dIn),
		cudatest.DevPtr[cudaraw.CuComplex](dOut), cufftraw.CUFFT_FORWARD))
	got := cudatest.FromDevice[cudaraw.CuComplex](t, dOut, n)

	// Input is left alone by an out-of-place transform.
	assert.Equal(t, in, cudatest.FromDevice[cudaraw.CuComplex](t, dIn, n))

	var maxErr, maxAbs float64
	for k := 0; k < n; k++ {
		var s complex128
		for j := 0; j < n; j++ {
			x := complex(float64(in[j].X), float64(in[j].Y))
			s += x * cmplx.Exp(complex(0, -2*math.Pi*float64(j*k%n)/n))
		}
		d := cmplx.Abs(complex(float64(got[k].X), float64(got[k].Y)) - s)
		maxErr = math.Max(maxErr, d)
		maxAbs = math.Max(maxAbs, cmplx.Abs(s))
	}
	rel := maxErr / maxAbs
	t.Logf("FFT C2C n=%d forward: max abs error %.3g, relative to max |X| %.3g", n, maxErr, rel)
	assert.Less(t, rel, 1e-5)
}
