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
	"github.com/gocuda/gocuda/resource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Bad sizes, batches, element types and short memory fail before any CUDA call (on
// the fake driver, in CI).
func TestArgumentChecks(t *testing.T) {
	_, s := cudatest.Stream(t)
	c, err := cuda.AllocFor[complex64](s, 16)
	require.NoError(t, err)
	defer c.Close()
	z, err := cuda.AllocFor[complex128](s, 16)
	require.NoError(t, err)
	defer z.Close()
	f, err := cuda.AllocFor[float32](s, 16)
	require.NoError(t, err)
	defer f.Close()
	for name, err := range map[string]error{
		"rank 0":        cufft.FFT[complex64](s, nil, 1, c, c, false),
		"rank 4":        cufft.FFT[complex64](s, []int{1, 1, 1, 1}, 1, c, c, false),
		"zero size":     cufft.FFT[complex64](s, []int{0}, 1, c, c, false),
		"batch":         cufft.FFT[complex64](s, []int{4}, 0, c, c, false),
		"too short":     cufft.FFT[complex64](s, []int{4, 5}, 1, c, c, false),
		"element type":  cufft.FFT[complex128](s, []int{4}, 1, c, c, false),
		"nil":           cufft.FFT[complex64](s, []int{4}, 1, nil, c, false),
		"precisions":    cufft.RealToComplex[float32, complex128](s, []int{8}, 1, f, z),
		"r2c out short": cufft.RealToComplex[float32, complex64](s, []int{16}, 2, f, c),
		"c2r in type":   cufft.ComplexToReal[complex64, float32](s, []int{8}, 1, z, f),
	} {
		require.ErrorIs(t, err, cuda.ErrInvalidArgument, name)
		assert.Contains(t, err.Error(), "cufft: ", name)
	}
}

// dft is the direct transform of one row-major transform of the given sizes:
// out[k] = Σ_j in[j]·e^(sign·2πi·Σ_d j_d·k_d/n_d).
func dft(in []complex128, sizes []int, sign float64) []complex128 {
	n := len(in)
	out := make([]complex128, n)
	idx := func(flat int) []int {
		ix := make([]int, len(sizes))
		for d := len(sizes) - 1; d >= 0; d-- {
			ix[d] = flat % sizes[d]
			flat /= sizes[d]
		}
		return ix
	}
	for k := range n {
		kk := idx(k)
		var sum complex128
		for j := range n {
			jj := idx(j)
			var ph float64
			for d := range sizes {
				ph += float64(jj[d]*kk[d]) / float64(sizes[d])
			}
			sum += in[j] * cmplx.Exp(complex(0, sign*2*math.Pi*ph))
		}
		out[k] = sum
	}
	return out
}

// Complex and real transforms of several shapes and batches against the direct DFT,
// and a round trip; plans are cached.
func TestTransforms(t *testing.T) {
	ctx, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cufftraw.Library())
	r := rand.New(rand.NewPCG(3, 4))
	for _, shape := range [][]int{{16}, {12}, {8, 6}, {4, 3, 5}} {
		n := 1
		for _, d := range shape {
			n *= d
		}
		const batch = 3
		in := make([]complex128, n*batch)
		for i := range in {
			in[i] = complex(r.Float64()*2-1, r.Float64()*2-1)
		}
		dIn, err := cuda.AllocFor[complex128](s, len(in))
		require.NoError(t, err)
		defer dIn.Close()
		dOut, err := cuda.AllocFor[complex128](s, len(in))
		require.NoError(t, err)
		defer dOut.Close()
		require.NoError(t, cuda.CopyToDeviceAsync(s, dIn, in))
		for _, inverse := range []bool{false, true} {
			require.NoError(t, cufft.FFT[complex128](s, shape, batch, dIn, dOut, inverse))
			got := make([]complex128, len(in))
			require.NoError(t, cuda.CopyFromDevice(got, dOut))
			sign := -1.0
			if inverse {
				sign = 1
			}
			for b := range batch {
				want := dft(in[b*n:(b+1)*n], shape, sign)
				for i := range want {
					require.InDelta(t, 0.0, cmplx.Abs(want[i]-got[b*n+i]), 1e-9*float64(n), "z2z %v inverse=%v batch %d element %d", shape, inverse, b, i)
				}
			}
		}

		// Single precision, real to complex and back: the round trip scales by n.
		re := make([]float32, n*batch)
		for i := range re {
			re[i] = float32(r.Float64()*2 - 1)
		}
		h := n / shape[len(shape)-1] * (shape[len(shape)-1]/2 + 1)
		dRe, err := cuda.AllocFor[float32](s, len(re))
		require.NoError(t, err)
		defer dRe.Close()
		dHalf, err := cuda.AllocFor[complex64](s, h*batch)
		require.NoError(t, err)
		defer dHalf.Close()
		require.NoError(t, cuda.CopyToDeviceAsync(s, dRe, re))
		require.NoError(t, cufft.RealToComplex[float32, complex64](s, shape, batch, dRe, dHalf))
		half := make([]complex64, h*batch)
		require.NoError(t, cuda.CopyFromDevice(half, dHalf))
		last := shape[len(shape)-1]
		for b := range batch {
			full := make([]complex128, n)
			for i := range full {
				full[i] = complex(float64(re[b*n+i]), 0)
			}
			want := dft(full, shape, -1)
			for i := range want {
				if k := i % last; k <= last/2 {
					got := half[b*h+i/last*(last/2+1)+k]
					require.InDelta(t, 0.0, cmplx.Abs(want[i]-complex128(got)), 1e-4*float64(n), "r2c %v batch %d element %d", shape, b, i)
				}
			}
		}
		back, err := cuda.AllocFor[float32](s, len(re))
		require.NoError(t, err)
		defer back.Close()
		require.NoError(t, cufft.ComplexToReal[complex64, float32](s, shape, batch, dHalf, back))
		got := make([]float32, len(re))
		require.NoError(t, cuda.CopyFromDevice(got, back))
		for i := range re {
			require.InDelta(t, float64(re[i])*float64(n), float64(got[i]), 1e-4*float64(n), "round trip %v element %d", shape, i)
		}
	}
	assert.Positive(t, cufft.IdlePlansForTest(ctx)+cufft.StreamPlansForTest(ctx), "plans are cached")
	assert.LessOrEqual(t, cufft.IdlePlansForTest(ctx), cufft.MaxIdlePlans)
}

// A transform that needs scratch memory gets its work area from the device's pool
// (exactly the size cuFFT asks for), and one plan alternating between two streams
// gives the direct DFT every time: the hand-off orders the work area's uses.
func TestWorkArea(t *testing.T) {
	ctx, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cufftraw.Library())
	_, err := resource.Reclaim() // no idle plans: the first call makes one
	require.NoError(t, err)
	s2, err := ctx.NewStream()
	require.NoError(t, err)
	defer s2.Close()

	// The first of these sizes for which cuFFT wants a work area (primes go through
	// Bluestein's algorithm), asked of a raw plan on this thread's context.
	const batch = 8
	n, work := 0, uint64(0)
	for _, c := range []int{1031, 4099, 65537, 1 << 20} {
		if work = workSize(t, c, cufftraw.CUFFT_Z2Z, batch); work > 0 {
			n = c
			break
		}
	}
	require.NotZero(t, n, "no candidate size needs a work area")
	t.Logf("Z2Z of %d, batch %d: work area %d bytes", n, batch, work)

	r := rand.New(rand.NewPCG(5, 6))
	in := make([]complex128, n*batch)
	for i := range in {
		in[i] = complex(r.Float64()*2-1, r.Float64()*2-1)
	}
	dIn, err := cuda.AllocFor[complex128](s, len(in))
	require.NoError(t, err)
	defer dIn.Close()
	require.NoError(t, cuda.CopyToDeviceAsync(s, dIn, in))
	var want []complex128
	if n <= 4099 {
		want = dft(in[:n], []int{n}, -1)
	}
	before := cudatest.DeviceBytes(t)
	for i := range 6 {
		st := []*cuda.Stream{s, s2}[i%2]
		out, err := cuda.AllocFor[complex128](st, len(in))
		require.NoError(t, err)
		require.NoError(t, cufft.FFT[complex128](st, []int{n}, batch, dIn, out, false))
		if i == 0 {
			assert.Equal(t, int64(out.Size())+int64(work), cudatest.DeviceBytes(t)-before, "the output and the work area")
		}
		got := make([]complex128, n)
		require.NoError(t, cuda.CopyFromDevice(got, out))
		if want == nil { // too long for the direct DFT: the inverse must give n·x back
			require.NoError(t, cufft.FFT[complex128](st, []int{n}, batch, out, out, true))
			require.NoError(t, cuda.CopyFromDevice(got, out))
			for j := range got {
				require.InDelta(t, 0.0, cmplx.Abs(got[j]/complex(float64(n), 0)-in[j]), 1e-9, "round %d element %d", i, j)
			}
		} else {
			for j := range want {
				require.InDelta(t, 0.0, cmplx.Abs(want[j]-got[j]), 1e-9*float64(n), "round %d element %d", i, j)
			}
		}
		out.Close()
	}
}

// workSize returns the work area a 1-D plan of n elements of typ, batch batch, needs,
// asked of a raw plan on this thread's context.
func workSize(t testing.TB, n int, typ cufftraw.CufftType, batch int) uint64 {
	t.Helper()
	var p cufftraw.CufftHandle
	require.NoError(t, cufftraw.Create(&p))
	require.NoError(t, cufftraw.SetAutoAllocation(p, 0))
	dims := []int32{int32(n)}
	var work uint64
	require.NoError(t, cufftraw.MakePlanMany(p, 1, &dims[0], nil, 1, 0, nil, 1, 0, typ, int32(batch), &work))
	require.NoError(t, cufftraw.Destroy(p))
	return work
}

// noWorkSize returns a 1-D C2C size (batch 1) whose plan needs no work area.
func noWorkSize(t testing.TB) int {
	for _, c := range []int{256, 1024, 64, 4096} {
		if workSize(t, c, cufftraw.CUFFT_C2C, 1) == 0 {
			return c
		}
	}
	t.Fatal("every candidate size needs a work area")
	return 0
}

// A stream keeps the plan of its transform (one without a work area) for its next
// call, outside the context's cache; the plan of another transform on it goes to the
// cache (the stream keeps one), and closing the stream gives its plan to the cache.
func TestStreamKeepsPlan(t *testing.T) {
	ctx, _ := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cufftraw.Library())
	n := noWorkSize(t)
	_, err := resource.Reclaim()
	require.NoError(t, err)
	s, err := ctx.NewStream()
	require.NoError(t, err)
	b, err := cuda.AllocFor[complex64](s, 2*n)
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, b.Memset32Async(s, 0))
	for range 3 {
		require.NoError(t, cufft.FFT[complex64](s, []int{n}, 1, b, b, false))
		assert.Equal(t, 1, cufft.StreamPlansForTest(ctx), "kept by the stream")
		assert.Zero(t, cufft.IdlePlansForTest(ctx))
	}
	require.NoError(t, cufft.FFT[complex64](s, []int{n}, 2, b, b, false))
	assert.Equal(t, 1, cufft.StreamPlansForTest(ctx))
	assert.Equal(t, 1, cufft.IdlePlansForTest(ctx), "the second plan went to the cache")
	require.NoError(t, s.Synchronize())
	require.NoError(t, s.Close())
	assert.Zero(t, cufft.StreamPlansForTest(ctx))
	assert.Equal(t, 2, cufft.IdlePlansForTest(ctx), "the closed stream's plan went to the cache")
	_, err = resource.Reclaim()
	require.NoError(t, err)
	assert.Zero(t, cufft.IdlePlansForTest(ctx))
}

// BenchmarkFFTParallel queues small complex transforms from GOMAXPROCS goroutines at
// once, each on a stream of the context's pool, synchronizing every 64: what the
// plans cost when every goroutine calls cuFFT.
func BenchmarkFFTParallel(b *testing.B) {
	ctx, _ := cudatest.Stream(b, cudatest.Kernels)
	cudatest.RequireLibrary(b, cufftraw.Library())
	const n = 256
	cudatest.RunParallel(b, ctx, func(s *cuda.Stream, pb *testing.PB) error {
		buf, err := cuda.AllocFor[complex64](s, n)
		if err != nil {
			return err
		}
		defer buf.Close()
		for i := 0; pb.Next(); i++ {
			if err := cufft.FFT[complex64](s, []int{n}, 1, buf, buf, false); err != nil {
				return err
			}
			if i%64 == 63 {
				if err := s.Synchronize(); err != nil {
					return err
				}
			}
		}
		return s.Synchronize()
	})
}
