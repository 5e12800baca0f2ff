package cusolver_test

import (
	"context"
	"sync"
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/cusolver"
	"github.com/gocuda/gocuda/cusolver/cusolverraw"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// collectStreams is how many goroutines, each on a stream of the context's pool, run
// Cholesky factorizations at once in a round of garbage: far more than
// MaxIdleHandles, so that the handle cache overflows and drops handles (to their
// OwnedDnHandle's blocking release).
const collectStreams = 32

// collectRawHandles is how many raw OwnedDnHandles a round makes, uses and drops:
// each is a blocking release the collector must hold for Reclaim.
const collectRawHandles = 2

// cuda's seed test for cuSOLVER handles: the dense operations on many streams at
// once overflow the handle cache, and raw OwnedDnHandles are dropped without Close;
// collecting all that while the GPU is busy must not wait for it (cusolverDnDestroy
// is classed blocking: headers/cusolver.toml), and Reclaim then destroys every
// handle, the idle ones too.
func TestCollectWhileGPUBusy(t *testing.T) {
	ctx, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cusolverraw.Library())
	st := cudatest.CollectWhileBusy(t, ctx, collectRawHandles, func(n int) {
		for range n {
			collectRound(t, ctx, s)
		}
	})
	t.Logf("%+v", st)
	assert.Zero(t, cusolver.IdleHandlesForTest(ctx), "Reclaim empties the idle-handle cache")
	assert.Zero(t, cusolver.KeptHandlesForTest(ctx), "and the handles streams keep")
}

// collectRound factors the identity on collectStreams pooled streams at once, then
// makes collectRawHandles raw handles, factors with each on s, and drops them; it
// returns once all that work is done.
func collectRound(t *testing.T, ctx *cuda.Context, s *cuda.Stream) {
	const n = 32
	eye := make([]float32, n*n)
	for i := range n {
		eye[i+i*n] = 1
	}
	var wg sync.WaitGroup
	for range collectStreams {
		wg.Go(func() {
			err := ctx.WithStream(context.Background(), func(_ context.Context, ps *cuda.Stream) error {
				a, err := cuda.AllocFor[float32](ps, n*n)
				if err != nil {
					return err
				}
				defer a.Close()
				if err := cuda.CopyToDeviceAsync(ps, a, eye); err != nil {
					return err
				}
				return cusolver.Potrf[float32](ps, cusolver.Lower, n, a, n)
			})
			assert.NoError(t, err)
		})
	}
	wg.Wait()

	a, err := cuda.AllocFor[float32](s, n*n)
	require.NoError(t, err)
	defer a.Close()
	require.NoError(t, cuda.CopyToDeviceAsync(s, a, eye))
	w, err := cuda.AllocFor[float32](s, 64<<10)
	require.NoError(t, err)
	defer w.Close()
	info, err := cuda.AllocFor[int32](s, 1)
	require.NoError(t, err)
	defer info.Close()
	pa, err := cuda.DevicePtr[float32](a)
	require.NoError(t, err)
	pw, err := cuda.DevicePtr[float32](w)
	require.NoError(t, err)
	pi, err := cuda.DevicePtr[int32](info)
	require.NoError(t, err)
	for range collectRawHandles {
		var h *cusolverraw.OwnedDnHandle
		require.NoError(t, ctx.Locked(func() (err error) {
			h, err = cusolverraw.NewOwnedDnHandle()
			return err
		}))
		require.NoError(t, cuda.Enqueue(s, func(_ cudaraw.CUcontext, st cudaraw.CUstream) error {
			return ctx.Locked(func() error {
				var lwork int32
				if err := cusolverraw.DnSpotrfBufferSize(h.Handle(), cusolver.Lower, n, pa, n, &lwork); err != nil {
					return err
				}
				if int(lwork) > w.Len() {
					return cuda.ErrInvalidArgument
				}
				if err := cusolverraw.DnSetStream(h.Handle(), st); err != nil {
					return err
				}
				return cusolverraw.DnSpotrf(h.Handle(), cusolver.Lower, n, pa, n, pw, lwork, pi)
			})
		}, cuda.Writes(a), cuda.Writes(w), cuda.Writes(info)))
		// h is dropped here, without Close.
	}
	require.NoError(t, s.Synchronize())
}
