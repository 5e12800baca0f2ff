package curand_test

import (
	"math"
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/curand"
	"github.com/gocuda/gocuda/curand/curandraw"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The new-buffer calls and the half-precision ones check their arguments before any
// cuRAND call (on the fake driver, in CI).
func TestNewBufferArgumentChecks(t *testing.T) {
	_, s := setup(t)
	f, err := cuda.AllocFor[float32](s, 8)
	require.NoError(t, err)
	defer f.Close()
	h, err := cuda.AllocFor[cuda.Float16](s, 8)
	require.NoError(t, err)
	defer h.Close()
	var g *curand.Generator
	for name, err := range map[string]error{
		"zero":        errOf(curand.NewUniform[float32](g, s, 0)),
		"negative":    errOf(curand.NewNormal[float64](g, s, -2, 0, 1)),
		"nil gen":     errOf(curand.NewPoisson(g, s, 4, 1)),
		"nil gen u32": errOf(curand.NewUint32(g, s, 4)),
		"half type":   curand.Uniform[cuda.Float16](g, s, f, 4),
		"half short":  curand.Normal[cuda.Float16](g, s, h, 10, 0, 1),
		"half nil":    curand.LogNormal[cuda.Float16](g, s, nil, 2, 0, 1),
		"half gen":    curand.Uniform[cuda.Float16](g, s, h, 4),
	} {
		require.ErrorIs(t, err, cuda.ErrInvalidArgument, name)
		assert.Contains(t, err.Error(), "curand: ", name)
	}
}

func errOf[M any](_ M, err error) error { return err }

// The new-buffer calls draw what the fill calls draw from the same seed; half
// precision draws the float32 numbers rounded, and its normal moments hold.
func TestGPUNewBuffersAndHalf(t *testing.T) {
	ctx, s := setup(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, curandraw.Library())
	const n = 1 << 16
	gen := func() *curand.Generator {
		g, err := curand.NewGenerator(ctx, curand.Philox, 99)
		require.NoError(t, err)
		t.Cleanup(func() { g.Close() })
		return g
	}
	ref := make([]float32, n)
	{
		g := gen()
		b, err := cuda.AllocFor[float32](s, n)
		require.NoError(t, err)
		defer b.Close()
		require.NoError(t, curand.Normal[float32](g, s, b, n, 1, 2))
		require.NoError(t, cuda.CopyFromDevice(ref, b))
	}
	b, err := curand.NewNormal[float32](gen(), s, n, 1, 2)
	require.NoError(t, err)
	defer b.Close()
	assert.Equal(t, n, b.Len())
	got := make([]float32, n)
	require.NoError(t, cuda.CopyFromDevice(got, b))
	assert.Equal(t, ref, got, "NewNormal draws what Normal draws")

	hb, err := curand.NewNormal(gen(), s, n, cuda.NewFloat16(1), cuda.NewFloat16(2))
	require.NoError(t, err)
	defer hb.Close()
	halves := make([]cuda.Float16, n)
	require.NoError(t, cuda.CopyFromDevice(halves, hb))
	hv := make([]float64, n)
	for i, h := range halves {
		require.Equal(t, cuda.NewFloat16(ref[i]), h, "element %d: the float32 draw rounded", i)
		hv[i] = float64(h.Float32())
	}
	m, va := moments(hv)
	assert.InDelta(t, 1, m, 6*2/math.Sqrt(n))
	assert.InDelta(t, 4, va, 0.1)

	// Into a larger buffer: only the first n change.
	big, err := cuda.AllocFor[cuda.Float16](s, n+16)
	require.NoError(t, err)
	defer big.Close()
	require.NoError(t, big.Memset16Async(s, 0x3c00)) // 1.0
	require.NoError(t, curand.Uniform[cuda.Float16](gen(), s, big, n))
	all := make([]cuda.Float16, n+16)
	require.NoError(t, cuda.CopyFromDevice(all, big))
	for i, h := range all[n:] {
		assert.Equal(t, cuda.Float16(0x3c00), h, "element %d after n", n+i)
	}
	u, _ := moments(func() []float64 {
		v := make([]float64, n)
		for i, h := range all[:n] {
			v[i] = float64(h.Float32())
		}
		return v
	}())
	assert.InDelta(t, 0.5, u, 6*math.Sqrt(1.0/12)/math.Sqrt(n))

	d, err := curand.NewUniform[float64](gen(), s, n)
	require.NoError(t, err)
	defer d.Close()
	dv := make([]float64, n)
	require.NoError(t, cuda.CopyFromDevice(dv, d))
	m, _ = moments(dv)
	assert.InDelta(t, 0.5, m, 6*math.Sqrt(1.0/12)/math.Sqrt(n))
	p, err := curand.NewPoisson(gen(), s, n, 3)
	require.NoError(t, err)
	defer p.Close()
	w, err := curand.NewUint32(gen(), s, n)
	require.NoError(t, err)
	defer w.Close()
	assert.Equal(t, n, w.Len())
}
