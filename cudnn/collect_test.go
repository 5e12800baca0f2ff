package cudnn_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/cudnn"
	"github.com/gocuda/gocuda/cudnn/cudnnraw"
)

// collectStreams is how many goroutines, each on a stream of the context's pool, run
// convolutions and activations at once in a round of garbage: far more than
// MaxIdleHandles, so that the handle cache overflows and drops handles (to their
// OwnedHandle's blocking release).
const collectStreams = 32

// collectRawHandles is how many raw OwnedHandles a round makes, uses and drops
// without Close: each is a blocking release (cudnnDestroy waits for the GPU:
// headers/cudnn.toml) that the collector must hold for Reclaim. The descriptors
// dropped with them are of the non-blocking class and are not counted.
const collectRawHandles = 2

// cuda's seed test for cuDNN handles: the idiomatic operations on many streams at
// once overflow the handle cache, and raw OwnedHandles and descriptors are dropped
// without Close; collecting all that while the GPU is busy must not wait for it
// (cudnnDestroy does), and Reclaim then destroys every handle, the idle ones too.
func TestCollectWhileGPUBusy(t *testing.T) {
	ctx, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cudnnraw.Library())
	st := cudatest.CollectWhileBusy(t, ctx, collectRawHandles, func(n int) {
		for range n {
			collectRound(t, ctx, s)
		}
	})
	t.Logf("%+v", st)
	assert.Zero(t, cudnn.IdleHandlesForTest(ctx), "Reclaim empties the idle-handle cache")
	assert.Zero(t, cudnn.KeptHandlesForTest(ctx), "and the handles streams keep")
}

// collectRound runs collectStreams goroutines of convolutions and activations on
// pooled streams at once, then makes collectRawHandles raw handles with their
// descriptors (tensor, activation, filter, convolution), runs a ReLU with each on s,
// and drops them; it returns once all that work is done.
func collectRound(t *testing.T, ctx *cuda.Context, s *cuda.Stream) {
	xs, ws := cudnn.Tensor4D{N: 1, C: 4, H: 16, W: 16}, cudnn.Filter{K: 8, C: 4, R: 3, S: 3}
	conv := cudnn.Conv{PadH: 1, PadW: 1}
	ys, err := cudnn.ConvolutionOutputShape(xs, ws, conv)
	require.NoError(t, err)
	relu := cudnn.Activation{Mode: cudnn.ReLU}

	var wg sync.WaitGroup
	for range collectStreams {
		wg.Go(func() {
			err := ctx.WithStream(context.Background(), func(_ context.Context, ps *cuda.Stream) error {
				x, err := cuda.AllocFor[float32](ps, xs.Len())
				if err != nil {
					return err
				}
				defer x.Close()
				w, err := cuda.AllocFor[float32](ps, ws.Len())
				if err != nil {
					return err
				}
				defer w.Close()
				y, err := cuda.AllocFor[float32](ps, ys.Len())
				if err != nil {
					return err
				}
				defer y.Close()
				for _, b := range []*cuda.DeviceBuffer{x, w} {
					if err := b.Memset32Async(ps, 0); err != nil {
						return err
					}
				}
				for range 4 {
					if err := cudnn.Convolve[float32](ps, conv, 1, x, xs, w, ws, 0, y); err != nil {
						return err
					}
					if err := cudnn.Activate[float32](ps, relu, ys, 1, y, 0, y); err != nil {
						return err
					}
				}
				return ps.Synchronize()
			})
			assert.NoError(t, err)
		})
	}
	wg.Wait()

	const n, c, h, w = 2, 3, 4, 5
	x, err := cuda.AllocFor[float32](s, n*c*h*w)
	require.NoError(t, err)
	defer x.Close()
	require.NoError(t, x.Memset32Async(s, 0))
	px, err := cuda.DevicePtr[float32](x)
	require.NoError(t, err)
	p := unsafe.Pointer(px)
	for range collectRawHandles {
		var hd *cudnnraw.OwnedHandle
		require.NoError(t, ctx.Locked(func() (err error) {
			hd, err = cudnnraw.NewOwnedHandle()
			return err
		}))
		td, err := cudnnraw.NewOwnedTensorDescriptor()
		require.NoError(t, err)
		require.NoError(t, cudnnraw.SetTensor4dDescriptor(td.Handle(), cudnnraw.CUDNN_TENSOR_NCHW, cudnnraw.CUDNN_DATA_FLOAT, n, c, h, w))
		ad, err := cudnnraw.NewOwnedActivationDescriptor()
		require.NoError(t, err)
		require.NoError(t, cudnnraw.SetActivationDescriptor(ad.Handle(), cudnnraw.CUDNN_ACTIVATION_RELU, cudnnraw.CUDNN_NOT_PROPAGATE_NAN, 0))
		fd, err := cudnnraw.NewOwnedFilterDescriptor()
		require.NoError(t, err)
		require.NoError(t, cudnnraw.SetFilter4dDescriptor(fd.Handle(), cudnnraw.CUDNN_DATA_FLOAT, cudnnraw.CUDNN_TENSOR_NCHW, 8, c, 3, 3))
		cd, err := cudnnraw.NewOwnedConvolutionDescriptor()
		require.NoError(t, err)
		require.NoError(t, cudnnraw.SetConvolution2dDescriptor(cd.Handle(), 1, 1, 1, 1, 1, 1, cudnnraw.CUDNN_CROSS_CORRELATION, cudnnraw.CUDNN_DATA_FLOAT))
		require.NoError(t, cuda.Enqueue(s, func(_ cudaraw.CUcontext, st cudaraw.CUstream) error {
			return ctx.Locked(func() error {
				if err := cudnnraw.SetStream(hd.Handle(), st); err != nil {
					return err
				}
				alpha, beta := float32(1), float32(0)
				return cudnnraw.ActivationForward(hd.Handle(), ad.Handle(), unsafe.Pointer(&alpha), td.Handle(), p,
					unsafe.Pointer(&beta), td.Handle(), p)
			})
		}, cuda.Writes(x)))
		// Done before the objects are dropped: the collector may release the
		// descriptors (non-blocking lane) as soon as they are unreachable.
		require.NoError(t, s.Synchronize())
		runtime.KeepAlive([]any{hd, td, ad, fd, cd})
		// hd, td, ad, fd and cd are dropped here, without Close.
	}
}
