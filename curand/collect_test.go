package curand_test

import (
	"context"
	"sync"
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/curand"
	"github.com/gocuda/gocuda/curand/curandraw"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A round of garbage holds collectGenerators generators at once, each drawing on its
// own stream of the context's pool, then closes all but collectUnclosed of them and
// drops the rest without Close. The cache keeps MaxIdleGenerators per context, so the
// closes alone drop at least collectGenerators-collectUnclosed-MaxIdleGenerators raw
// generators (to their OwnedGenerator's blocking release); the unclosed ones go back
// to the cache once collected, and a full cache drops them a collection later.
const (
	collectGenerators = 3 * curand.MaxIdleGenerators
	collectUnclosed   = 2
)

// collectRawGenerators is how many raw OwnedGenerators a round makes, uses and drops.
const collectRawGenerators = 2

// cuda's seed test for cuRAND generators: generators on many streams at once
// overflow the cache, some are dropped without Close, and raw OwnedGenerators are
// dropped too; collecting all that while the GPU is busy must not wait for it
// (curandDestroyGenerator does, and stalls other threads' launches:
// headers/curand.toml), and Reclaim then destroys every raw generator, the idle ones
// too.
func TestCollectWhileGPUBusy(t *testing.T) {
	ctx, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, curandraw.Library())
	perRound := collectGenerators - collectUnclosed - curand.MaxIdleGenerators + collectRawGenerators
	st := cudatest.CollectWhileBusy(t, ctx, perRound, func(n int) {
		for range n {
			collectRound(t, ctx, s)
		}
	})
	t.Logf("%+v", st)
	assert.Zero(t, curand.IdleGeneratorsForTest(ctx), "Reclaim empties the idle-generator cache")
}

// collectRound makes collectGenerators generators, draws from each on a pooled
// stream in its own goroutine, closes all but collectUnclosed and drops them all;
// then it makes collectRawGenerators raw generators, draws from each on s, and drops
// them. It returns once all that work is done.
func collectRound(t *testing.T, ctx *cuda.Context, s *cuda.Stream) {
	const n = 1 << 16
	gens := make([]*curand.Generator, collectGenerators)
	for i := range gens {
		var err error
		gens[i], err = curand.NewGenerator(ctx, curand.PseudoDefault, uint64(i))
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	for _, g := range gens {
		wg.Go(func() {
			err := ctx.WithStream(context.Background(), func(_ context.Context, ps *cuda.Stream) error {
				out, err := cuda.AllocFor[float32](ps, n)
				if err != nil {
					return err
				}
				defer out.Close()
				for range 4 {
					if err := curand.Uniform[float32](g, ps, out, n); err != nil {
						return err
					}
				}
				return ps.Synchronize()
			})
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	for _, g := range gens[collectUnclosed:] {
		require.NoError(t, g.Close())
	}
	clear(gens) // the first collectUnclosed are dropped without Close

	out, err := cuda.AllocFor[float32](s, n)
	require.NoError(t, err)
	defer out.Close()
	p, err := cuda.DevicePtr[float32](out)
	require.NoError(t, err)
	for i := range collectRawGenerators {
		var g *curandraw.OwnedGenerator
		require.NoError(t, ctx.Locked(func() error {
			var h curandraw.CurandGenerator
			if err := curandraw.CreateGenerator(&h, curandraw.CURAND_RNG_PSEUDO_DEFAULT); err != nil {
				return err
			}
			g = curandraw.OwnGenerator(h)
			return curandraw.SetPseudoRandomGeneratorSeed(h, uint64(1000+i))
		}))
		require.NoError(t, cuda.Enqueue(s, func(_ cudaraw.CUcontext, st cudaraw.CUstream) error {
			return ctx.Locked(func() error {
				if err := curandraw.SetStream(g.Handle(), st); err != nil {
					return err
				}
				return curandraw.GenerateUniform(g.Handle(), p, n)
			})
		}, cuda.Writes(out)))
		// g is dropped here, without Close.
	}
	require.NoError(t, s.Synchronize())
}
