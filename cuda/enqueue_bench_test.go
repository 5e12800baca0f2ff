package cuda_test

import (
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/stretchr/testify/require"
)

// BenchmarkEnqueue is the hand-off's own cost: cuda.Enqueue around a function that
// queues nothing, with the three uses of a GEMM (two reads, one write) on one
// stream. It needs no kernel: on the fake driver and on a GPU it measures the same
// Go code.
func BenchmarkEnqueue(b *testing.B) {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		b.Skip(err)
	}
	s, err := ctx.NewStream()
	require.NoError(b, err)
	defer s.Close()
	var bufs [3]*cuda.DeviceBuffer
	for i := range bufs {
		bufs[i], err = cuda.AllocFor[float32](s, 1024)
		require.NoError(b, err)
		defer bufs[i].Close()
	}
	uses := []cuda.Use{cuda.Reads(bufs[0]), cuda.Reads(bufs[1]), cuda.Writes(bufs[2])}
	noop := func(cudaraw.CUcontext, cudaraw.CUstream) error { return nil }
	for b.Loop() {
		if err := cuda.Enqueue(s, noop, uses...); err != nil {
			b.Fatal(err)
		}
	}
	require.NoError(b, s.Synchronize())
}
