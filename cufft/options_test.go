package cufft_test

import (
	"math"
	"math/cmplx"
	"math/rand/v2"
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/cufft"
	"github.com/gocuda/gocuda/cufft/cufftraw"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Bad norms and layouts, and memory too short for a layout, fail before any CUDA
// call (on the fake driver, in CI).
func TestOptionChecks(t *testing.T) {
	_, s := cudatest.Stream(t)
	c, err := cuda.AllocFor[complex64](s, 64)
	require.NoError(t, err)
	defer c.Close()
	f, err := cuda.AllocFor[float32](s, 64)
	require.NoError(t, err)
	defer f.Close()
	for name, err := range map[string]error{
		"norm":           cufft.FFT[complex64](s, []int{8}, 1, c, c, false, cufft.Norm(9)),
		"embed rank":     cufft.FFT[complex64](s, []int{4, 4}, 1, c, c, false, cufft.Layout{InEmbed: []int{4}}),
		"embed small":    cufft.FFT[complex64](s, []int{4, 4}, 1, c, c, false, cufft.Layout{OutEmbed: []int{4, 3}}),
		"stride":         cufft.FFT[complex64](s, []int{8}, 1, c, c, false, cufft.Layout{InStride: -1}),
		"strided short":  cufft.FFT[complex64](s, []int{8}, 3, c, c, false, cufft.Layout{InStride: 4}),
		"dist short":     cufft.FFT[complex64](s, []int{8}, 4, c, c, false, cufft.Layout{OutDist: 20}),
		"r2c half short": cufft.RealToComplex[float32, complex64](s, []int{8}, 2, f, c, cufft.Layout{OutStride: 8}),
	} {
		require.ErrorIs(t, err, cuda.ErrInvalidArgument, name)
		assert.Contains(t, err.Error(), "cufft: ", name)
	}
	// A layout that fits passes the checks (and, without cuFFT, fails at the plan).
	err = cufft.FFT[complex64](s, []int{8}, 4, c, c, false, cufft.Layout{InStride: 2, OutStride: 2, InDist: 16, OutDist: 16})
	assert.NotErrorIs(t, err, cuda.ErrInvalidArgument)
}

// Each norm scales each direction as NumPy's does (complex and real transforms, both
// precisions' paths), against the direct DFT.
func TestGPUNorm(t *testing.T) {
	_, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cufftraw.Library())
	r := rand.New(rand.NewPCG(7, 8))
	shape, batch := []int{6, 5}, 2
	n := 30
	in := make([]complex128, n*batch)
	for i := range in {
		in[i] = complex(r.Float64()*2-1, r.Float64()*2-1)
	}
	dIn := cudatest.AllocFrom(t, s, in)
	factor := func(norm cufft.Norm, inverse bool) float64 {
		switch {
		case norm == cufft.Ortho:
			return 1 / math.Sqrt(float64(n))
		case norm == cufft.Backward && inverse, norm == cufft.Forward && !inverse:
			return 1 / float64(n)
		}
		return 1
	}
	for _, norm := range []cufft.Norm{cufft.Unnormalized, cufft.Backward, cufft.Ortho, cufft.Forward} {
		for _, inverse := range []bool{false, true} {
			out := cudatest.AllocFrom(t, s, make([]complex128, n*batch))
			require.NoError(t, cufft.FFT[complex128](s, shape, batch, dIn, out, inverse, norm))
			got := cudatest.Read[complex128](t, out, n*batch)
			sign := -1.0
			if inverse {
				sign = 1
			}
			for b := range batch {
				want := dft(in[b*n:(b+1)*n], shape, sign)
				for i := range want {
					require.InDelta(t, 0.0, cmplx.Abs(want[i]*complex(factor(norm, inverse), 0)-got[b*n+i]), 1e-12*float64(n),
						"norm %d inverse=%v batch %d element %d", norm, inverse, b, i)
				}
			}
		}
		// float32 round trip: R2C then C2R with the norm gives x·n·f(forward)·f(inverse).
		re := make([]float32, n*batch)
		for i := range re {
			re[i] = float32(r.Float64())
		}
		h, err := cuda.AllocFor[complex64](s, 6*3*batch)
		require.NoError(t, err)
		defer h.Close()
		back := cudatest.AllocFrom(t, s, make([]float32, n*batch))
		require.NoError(t, cufft.RealToComplex[float32, complex64](s, shape, batch, cudatest.AllocFrom(t, s, re), h, norm))
		require.NoError(t, cufft.ComplexToReal[complex64, float32](s, shape, batch, h, back, norm))
		got := cudatest.Read[float32](t, back, n*batch)
		k := float64(n) * factor(norm, false) * factor(norm, true)
		for i := range re {
			require.InDelta(t, float64(re[i])*k, float64(got[i]), 1e-5*float64(n), "r2c/c2r norm %d element %d", norm, i)
		}
	}
}

// A strided, batched 2-D transform (each matrix padded, elements interleaved with
// another signal, batches apart) against the direct DFT of the gathered data; the
// output goes to a tight layout. The padding and the other signal are left as they were.
func TestGPULayout(t *testing.T) {
	_, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cufftraw.Library())
	r := rand.New(rand.NewPCG(9, 10))
	shape, batch := []int{4, 6}, 3
	embed, stride, dist := []int{5, 7}, 2, 80 // 5·7·2 = 70 ≤ 80
	buf := make([]complex128, dist*batch)
	for i := range buf {
		buf[i] = complex(r.Float64(), r.Float64())
	}
	l := cufft.Layout{InEmbed: embed, InStride: stride, InDist: dist}
	in := cudatest.AllocFrom(t, s, buf)
	out := cudatest.AllocFrom(t, s, make([]complex128, 24*batch))
	require.NoError(t, cufft.FFT[complex128](s, shape, batch, in, out, false, l, cufft.Ortho))
	got := cudatest.Read[complex128](t, out, 24*batch)
	for b := range batch {
		x := make([]complex128, 24)
		for j0 := range 4 {
			for j1 := range 6 {
				x[j0*6+j1] = buf[b*dist+(j0*embed[1]+j1)*stride]
			}
		}
		want := dft(x, shape, -1)
		for i := range want {
			require.InDelta(t, 0.0, cmplx.Abs(want[i]/complex(math.Sqrt(24), 0)-got[b*24+i]), 1e-12*24, "batch %d element %d", b, i)
		}
	}
	// In place with the same strided layout on both sides: the norm scales the
	// transform's elements only.
	l.OutEmbed, l.OutStride, l.OutDist = embed, stride, dist
	require.NoError(t, cufft.FFT[complex128](s, shape, batch, in, in, false, l, cufft.Forward))
	after := cudatest.Read[complex128](t, in, dist*batch)
	touched := map[int]bool{}
	for b := range batch {
		for j0 := range 4 {
			for j1 := range 6 {
				touched[b*dist+(j0*embed[1]+j1)*stride] = true
			}
		}
	}
	for i := range buf {
		if !touched[i] {
			require.Equal(t, buf[i], after[i], "element %d outside the layout", i)
		}
	}
	for b := range batch {
		for j0 := range 4 {
			for j1 := range 6 {
				i := j0*6 + j1
				want := got[b*24+i] * complex(math.Sqrt(24)/24, 0)
				require.InDelta(t, 0.0, cmplx.Abs(want-after[b*dist+(j0*embed[1]+j1)*stride]), 1e-12*24, "in place batch %d element %d", b, i)
			}
		}
	}
}

// Repeating a transform reuses its plan: Stats shows one plan made and the rest reused.
func TestGPUPlanStats(t *testing.T) {
	_, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cufftraw.Library())
	b, err := cuda.AllocFor[complex64](s, 3*7*11)
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, b.Memset32Async(s, 0))
	before := cufft.Stats()
	for range 5 {
		require.NoError(t, cufft.FFT[complex64](s, []int{7, 11}, 3, b, b, false))
	}
	after := cufft.Stats()
	assert.Equal(t, uint64(1), after.Created-before.Created, "one plan for the transform")
	assert.Equal(t, uint64(4), after.Reused-before.Reused, "the other calls reuse it")
}
