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

func setup(t *testing.T, needs ...cudatest.Need) (*cuda.Context, *cuda.Stream) {
	t.Helper()
	return cudatest.Stream(t, needs...)
}

// Bad arguments fail before any cuRAND call (these run on the fake driver, in CI).
func TestGeneratorArgumentChecks(t *testing.T) {
	ctx, s := setup(t)
	_, err := curand.NewGenerator(nil, curand.PseudoDefault, 1)
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)
	_, err = curand.NewGenerator(ctx, 7, 1)
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)
	f, err := cuda.AllocFor[float32](s, 8)
	require.NoError(t, err)
	defer f.Close()
	u, err := cuda.AllocFor[uint32](s, 8)
	require.NoError(t, err)
	defer u.Close()
	var g *curand.Generator // checks on the arguments come first
	for name, err := range map[string]error{
		"negative n":   curand.Uniform[float32](g, s, f, -1),
		"too many":     curand.Uniform[float32](g, s, f, 9),
		"element type": curand.Uniform[float64](g, s, f, 2),
		"poisson type": curand.Poisson(g, s, f, 2, 1),
		"lambda":       curand.Poisson(g, s, u, 2, 0),
		"nil memory":   curand.Normal[float32](g, s, nil, 2, 0, 1),
		"nil gen":      curand.Uint32(g, s, u, 8),
	} {
		require.ErrorIs(t, err, cuda.ErrInvalidArgument, name)
	}
	require.ErrorIs(t, g.Close(), cuda.ErrClosed)
}

// moments returns the mean and variance of v.
func moments[T float32 | float64 | uint32](v []T) (mean, variance float64) {
	for _, x := range v {
		mean += float64(x)
	}
	mean /= float64(len(v))
	for _, x := range v {
		d := float64(x) - mean
		variance += d * d
	}
	return mean, variance / float64(len(v)-1)
}

// Each distribution's sample moments are within 6 standard errors of the true ones;
// the same seed gives the same numbers, draws on two streams continue one sequence,
// and a closed generator's raw generator is cached.
func TestGeneratorDistributions(t *testing.T) {
	ctx, s := setup(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, curandraw.Library())
	const n = 1 << 20
	within := func(name string, got, want, sd float64) {
		t.Helper()
		se := sd / math.Sqrt(n)
		assert.InDelta(t, want, got, 6*se+1e-12, "%s: %v, want %v ± %v", name, got, want, 6*se)
	}
	for _, kind := range []curand.Kind{curand.Philox, curand.XORWOW,
		curand.MTGP32, curand.Sobol32} {
		g, err := curand.NewGenerator(ctx, kind, 42)
		require.NoError(t, err)
		f, err := cuda.AllocFor[float64](s, n)
		require.NoError(t, err)
		require.NoError(t, curand.Uniform[float64](g, s, f, n))
		v := make([]float64, n)
		require.NoError(t, cuda.CopyFromDevice(v, f))
		m, va := moments(v)
		within(kind.String()+" uniform mean", m, 0.5, math.Sqrt(1.0/12))
		assert.InDelta(t, 1.0/12, va, 0.002, "uniform variance")

		require.NoError(t, curand.Normal[float64](g, s, f, n, 3, 2))
		require.NoError(t, cuda.CopyFromDevice(v, f))
		m, va = moments(v)
		within(kind.String()+" normal mean", m, 3, 2)
		assert.InDelta(t, 4, va, 0.05, "normal variance")

		require.NoError(t, curand.LogNormal[float64](g, s, f, n, 0, 0.5))
		require.NoError(t, cuda.CopyFromDevice(v, f))
		m, _ = moments(v)
		wantMean := math.Exp(0.125)
		within(kind.String()+" log-normal mean", m, wantMean, wantMean*math.Sqrt(math.Exp(0.25)-1))

		u, err := cuda.AllocFor[uint32](s, n)
		require.NoError(t, err)
		require.NoError(t, curand.Poisson(g, s, u, n, 4.5))
		pv := make([]uint32, n)
		require.NoError(t, cuda.CopyFromDevice(pv, u))
		m, va = moments(pv)
		within(kind.String()+" poisson mean", m, 4.5, math.Sqrt(4.5))
		assert.InDelta(t, 4.5, va, 0.1, "poisson variance")
		require.NoError(t, f.Close())
		require.NoError(t, u.Close())
		require.NoError(t, g.Close())
		require.ErrorIs(t, g.Close(), cuda.ErrClosed)
		assert.Positive(t, curand.IdleGeneratorsForTest(ctx), "the raw generator went back to the cache")
	}

	// Reproducible, and one sequence across streams.
	draw := func(split bool) []float32 {
		g, err := curand.NewGenerator(ctx, curand.Philox, 7)
		require.NoError(t, err)
		defer g.Close()
		s2, err := ctx.NewStream()
		require.NoError(t, err)
		defer s2.Close()
		f, err := cuda.AllocFor[float32](s, 2048)
		require.NoError(t, err)
		defer f.Close()
		if split {
			a, _ := f.Slice(0, 1024)
			b, _ := f.Slice(1024, 1024)
			require.NoError(t, curand.Uniform[float32](g, s, a, 1024))
			require.NoError(t, curand.Uniform[float32](g, s2, b, 1024))
		} else {
			require.NoError(t, curand.Uniform[float32](g, s, f, 2048))
		}
		out := make([]float32, 2048)
		require.NoError(t, cuda.CopyFromDevice(out, f))
		return out
	}
	one, split := draw(false), draw(true)
	assert.Equal(t, one, draw(false), "the same seed gives the same numbers")
	assert.Equal(t, split, draw(true), "also drawn on two streams: the second draw waits for the first")
	assert.NotEqual(t, split[:1024], split[1024:], "the second draw continues the sequence")
}
