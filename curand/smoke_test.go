package curand_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/curand/curandraw"
)

// TestSmokeUniform draws 1<<16 uniform floats on the device: all in (0, 1],
// mean 0.5 ± 0.01, and the same seed gives the same numbers.
func TestSmokeUniform(t *testing.T) {
	g := cudatest.Require(t)
	cudatest.RequireLibrary(t, curandraw.Library())

	var ver int32
	require.NoError(t, curandraw.GetVersion(&ver))
	t.Logf("cuRAND version %d", ver)

	const n = 1 << 16
	d := cudatest.Alloc[float32](t, g, n)
	draw := func(seed uint64) []float32 {
		var h curandraw.CurandGenerator
		require.NoError(t, curandraw.CreateGenerator(&h, curandraw.CURAND_RNG_PSEUDO_DEFAULT))
		gen := curandraw.OwnGenerator(h)
		defer func() { assert.NoError(t, gen.Close()) }()
		require.NoError(t, curandraw.SetPseudoRandomGeneratorSeed(gen.Handle(), seed))
		require.NoError(t, curandraw.GenerateUniform(gen.Handle(), cudatest.DevPtr[float32](d), n))
		return cudatest.Float32sFromDevice(t, d, n)
	}
	u := draw(1234)

	var sum, sq float64
	for i, v := range u {
		if !(v > 0 && v <= 1) {
			t.Fatalf("value %d = %v, outside (0, 1]", i, v)
		}
		sum += float64(v)
		sq += float64(v) * float64(v)
	}
	mean := sum / n
	variance := sq/n - mean*mean
	t.Logf("GenerateUniform n=%d: mean %.5f, variance %.5f (want 0.5, 1/12 = %.5f)", n, mean, variance, 1.0/12)
	assert.InDelta(t, 0.5, mean, 0.01)
	assert.InDelta(t, 1.0/12, variance, 0.005)

	assert.Equal(t, u, draw(1234), "same seed, same numbers")
	assert.NotEqual(t, u, draw(4321), "another seed, other numbers")
}
