package cufft_test

import (
	"context"
	"math/big"
	"sync"
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/cufft"
	"github.com/gocuda/gocuda/cufft/cufftraw"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// collectSizes is how many transforms of different sizes a round of garbage runs at
// once, each on its own stream of the context's pool: each needs its own plan with a
// work area (so that no stream keeps it: workSizes), and the cache keeps
// MaxIdlePlans per context, so every round drops at least collectSizes-MaxIdlePlans
// plans (a round ends with at most MaxIdlePlans idle, and made at least collectSizes
// less the idle ones it started with).
const collectSizes = 2 * cufft.MaxIdlePlans

// workSizes returns collectSizes sizes of 1-D C2C transforms whose plans need a work
// area: primes from 1031 (Bluestein's algorithm), checked with raw plans.
func workSizes(t *testing.T) []int {
	var sizes []int
	for n := 1031; len(sizes) < collectSizes && n < 20000; n += 2 {
		if big.NewInt(int64(n)).ProbablyPrime(0) && workSize(t, n, cufftraw.CUFFT_C2C, 1) > 0 {
			sizes = append(sizes, n)
		}
	}
	require.Len(t, sizes, collectSizes, "primes whose plans need a work area")
	return sizes
}

// collectRawPlans is how many raw OwnedPlans a round makes, runs and drops.
const collectRawPlans = 2

// cuda's seed test for cuFFT plans: transforms of many sizes on many streams at once
// overflow the plan cache, and raw OwnedPlans are dropped without Close; collecting
// all that while the GPU is busy must not wait for it (cufftDestroy does:
// headers/cufft.toml), and Reclaim then destroys every plan, the idle ones too.
func TestCollectWhileGPUBusy(t *testing.T) {
	ctx, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cufftraw.Library())
	perRound := collectSizes - cufft.MaxIdlePlans + collectRawPlans
	sizes := workSizes(t)
	st := cudatest.CollectWhileBusy(t, ctx, perRound, func(n int) {
		for range n {
			collectRound(t, ctx, s, sizes)
		}
	})
	t.Logf("%+v", st)
	assert.Zero(t, cufft.IdlePlansForTest(ctx), "Reclaim empties the idle-plan cache")
	assert.Zero(t, cufft.StreamPlansForTest(ctx), "and drops the plans streams keep")
}

// collectRound runs a goroutine per size, each a forward and an inverse complex
// transform of its size on a pooled stream, then makes collectRawPlans raw 1-D plans,
// runs each once on s, and drops them; it returns once all that work is done.
func collectRound(t *testing.T, ctx *cuda.Context, s *cuda.Stream, sizes []int) {
	var wg sync.WaitGroup
	for _, size := range sizes {
		wg.Go(func() {
			err := ctx.WithStream(context.Background(), func(_ context.Context, ps *cuda.Stream) error {
				b, err := cuda.AllocFor[complex64](ps, size)
				if err != nil {
					return err
				}
				defer b.Close()
				if err := b.Memset32Async(ps, 0); err != nil {
					return err
				}
				for _, inverse := range []bool{false, true} {
					if err := cufft.FFT[complex64](ps, []int{size}, 1, b, b, inverse); err != nil {
						return err
					}
				}
				return ps.Synchronize()
			})
			assert.NoError(t, err)
		})
	}
	wg.Wait()

	const n = 1000 // not a size of the cached plans'
	b, err := cuda.AllocFor[complex64](s, n)
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, b.Memset32Async(s, 0))
	p, err := cuda.DevicePtr[cudaraw.CuComplex](b)
	require.NoError(t, err)
	for range collectRawPlans {
		var plan *cufftraw.OwnedPlan
		require.NoError(t, ctx.Locked(func() error {
			var h cufftraw.CufftHandle
			if err := cufftraw.Plan1d(&h, n, cufftraw.CUFFT_C2C, 1); err != nil {
				return err
			}
			plan = cufftraw.OwnPlan(h)
			return nil
		}))
		require.NoError(t, cuda.Enqueue(s, func(_ cudaraw.CUcontext, st cudaraw.CUstream) error {
			return ctx.Locked(func() error {
				if err := cufftraw.SetStream(plan.Handle(), st); err != nil {
					return err
				}
				return cufftraw.ExecC2C(plan.Handle(), p, p, cufftraw.CUFFT_FORWARD)
			})
		}, cuda.Writes(b)))
		// plan is dropped here, without Close.
	}
	require.NoError(t, s.Synchronize())
}
