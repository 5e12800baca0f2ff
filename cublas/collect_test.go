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
