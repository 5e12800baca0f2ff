package cublas_test

import (
	"context"
	"sync"
	"testing"

	"github.com/gocuda/gocuda/cublas"
	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// collectStreams is how many goroutines, each on a stream of the context's pool, run
// GEMMs at once in a round of garbage: far more than MaxIdleHandles, so that the
// handle cache overflows and drops handles (to their OwnedHandle's blocking release).
const collectStreams = 32

// collectRawHandles is how many raw OwnedHandles a round makes, uses and drops: each
// is a blocking release the collector must hold for Reclaim.
const collectRawHandles = 2

// cuda's seed test for cuBLAS handles: the idiomatic operations on many streams at
// once overflow the handle cache, and raw OwnedHandles are dropped without Close;
// collecting all that while the GPU is busy must not wait for it (cublasDestroy does:
// headers/cublas.toml), and Reclaim then destroys every handle, the idle ones too.
func TestCollectWhileGPUBusy(t *testing.T) {
	ctx, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cublasraw.Library())
	st := cudatest.CollectWhileBusy(t, ctx, collectRawHandles, func(n int) {
		for range n {
			collectRound(t, ctx, s)
		}
	})
	t.Logf("%+v", st)
	assert.Zero(t, cublas.IdleHandlesForTest(ctx), "Reclaim empties the idle-handle cache")
	assert.Zero(t, cublas.KeptHandlesForTest(ctx), "and the handles streams keep")
}

// collectRound runs collectStreams goroutines of GEMMs on pooled streams at once,
// then makes collectRawHandles raw handles, scales a vector with each on s, and drops
// them; it returns once all that work is done.
func collectRound(t *testing.T, ctx *cuda.Context, s *cuda.Stream) {
	const m = 64
	var wg sync.WaitGroup
	for range collectStreams {
		wg.Go(func() {
			err := ctx.WithStream(context.Background(), func(_ context.Context, ps *cuda.Stream) error {
				a, err := cuda.AllocFor[float32](ps, m*m)
				if err != nil {
					return err
				}
				defer a.Close()
				if err := a.Memset32Async(ps, 0); err != nil {
					return err
				}
				c, err := cuda.AllocFor[float32](ps, m*m)
				if err != nil {
					return err
				}
				defer c.Close()
				for range 8 {
					if err := cublas.Gemm[float32](ps, cublas.NoTrans, cublas.NoTrans, m, m, m, 1, a, m, a, m, 0, c, m); err != nil {
						return err
					}
				}
				return ps.Synchronize()
			})
			assert.NoError(t, err)
		})
	}
	wg.Wait()

	const n = 256
	x, err := cuda.AllocFor[float32](s, n)
	require.NoError(t, err)
	defer x.Close()
	require.NoError(t, x.Memset32Async(s, 0))
	p, err := cuda.DevicePtr[float32](x)
	require.NoError(t, err)
	for range collectRawHandles {
		var h *cublasraw.OwnedHandle
		require.NoError(t, ctx.Locked(func() (err error) {
			h, err = cublasraw.NewOwnedHandle()
			return err
		}))
		require.NoError(t, cuda.Enqueue(s, func(_ cudaraw.CUcontext, st cudaraw.CUstream) error {
			return ctx.Locked(func() error {
				if err := cublasraw.SetStream(h.Handle(), st); err != nil {
					return err
				}
				alpha := float32(2)
				return cublasraw.Sscal(h.Handle(), n, &alpha, p, 1)
			})
		}, cuda.Writes(x)))
		// h is dropped here, without Close.
	}
	require.NoError(t, s.Synchronize())
}

// collectManyObjects is how many objects TestGPUCollectManyWithHandles drops in all.
const collectManyObjects = 100_000

// The collection of 100,000 dropped objects, cuBLAS handles among them (streams
// that keep one from a GEMM, raw OwnedHandles), while the GPU is busy: as
// TestCollectWhileGPUBusy, at a larger scale; the slowest launch from another
// goroutine is logged.
func TestGPUCollectManyWithHandles(t *testing.T) {
	ctx, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cublasraw.Library())
	if cudatest.FakeLoaded() {
		t.Skip("the delays measured are the real driver's")
	}
	const rawPerRound, streamsPerRound, m = 8, 16, 16
	perRound := collectManyObjects / cudatest.CollectRounds
	st := cudatest.CollectWhileBusy(t, ctx, rawPerRound, func(n int) {
		for range n {
			a, err := cuda.AllocFor[float32](s, m*m)
			require.NoError(t, err)
			require.NoError(t, a.Memset32Async(s, 0))
			c, err := cuda.AllocFor[float32](s, m*m)
			require.NoError(t, err)
			for range streamsPerRound {
				x, err := ctx.NewStream()
				require.NoError(t, err)
				require.NoError(t, cublas.Gemm[float32](x, cublas.NoTrans, cublas.NoTrans, m, m, m, 1, a, m, a, m, 0, c, m))
				require.NoError(t, x.Synchronize())
			}
			for range rawPerRound {
				require.NoError(t, ctx.Locked(func() error {
					_, err := cublasraw.NewOwnedHandle()
					return err
				}))
			}
			for i := range perRound - streamsPerRound - rawPerRound - 2 {
				if i%10 == 0 {
					e, err := ctx.NewEvent(false)
					require.NoError(t, err)
					require.NoError(t, e.Record(s))
					continue
				}
				b, err := cuda.AllocFor[uint32](s, 64)
				require.NoError(t, err)
				require.NoError(t, b.Memset32Async(s, uint32(i)))
			}
			require.NoError(t, s.Synchronize())
		}
	})
	t.Logf("%d objects: slowest launch from another goroutine %v (%d launches), runtime.GC %v, %d blocking releases held",
		collectManyObjects, st.WorstLaunch, st.Launches, st.GC, st.HeldBlocking)
}
