package cuda_test

// Typed buffers, views (DeviceBuffer.Slice) and the ordering of a buffer's first use
// after its allocation on another stream.

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/resource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A buffer of AllocFor[T] takes typed copies of T only; an untyped one takes any.
func TestTypedCopies(t *testing.T) {
	ctx, s := memSetup(t)
	f, err := cuda.AllocFor[float32](s, 16)
	require.NoError(t, err)
	defer f.Close()
	require.ErrorIs(t, cuda.CopyToDevice(f, make([]float64, 8)), cuda.ErrInvalidArgument)
	require.ErrorIs(t, cuda.CopyToDeviceAsync(s, f, make([]int32, 16)), cuda.ErrInvalidArgument, "same size, other type")
	require.ErrorIs(t, cuda.CopyFromDevice(make([]uint32, 16), f), cuda.ErrInvalidArgument)
	require.ErrorIs(t, cuda.CopyFromDeviceAsync(s, make([]float64, 8), f), cuda.ErrInvalidArgument)
	err = cuda.CopyToDevice(f, make([]float64, 8))
	assert.Contains(t, err.Error(), "float64")
	assert.Contains(t, err.Error(), "float32")
	require.NoError(t, cuda.CopyToDevice(f, []float32{1, 2, 3}))

	u, err := ctx.Alloc(s, 64)
	require.NoError(t, err)
	defer u.Close()
	require.NoError(t, cuda.CopyToDevice(u, make([]float64, 8)))
	require.NoError(t, cuda.CopyToDevice(u, make([]byte, 64)))

	// Len on every kind.
	assert.Equal(t, 16, f.Len())
	assert.Equal(t, 64, u.Len())
	h, err := ctx.AllocHost(100)
	require.NoError(t, err)
	defer h.Close()
	assert.Equal(t, 100, h.Len())
	m, err := ctx.AllocManaged(100)
	require.NoError(t, err)
	defer m.Close()
	assert.Equal(t, 100, m.Len())
	w, err := cuda.Wrap(ctx, make([]int64, 512))
	require.NoError(t, err)
	defer w.Close()
	assert.Equal(t, 512, w.Len())
	require.ErrorIs(t, cuda.CopyAsync(s, f, w), cuda.ErrInvalidArgument, "4 KiB into 64 bytes")
	for _, mem := range []cuda.Memory{f, u, h, m, w} {
		assert.Equal(t, mem.Size()/mem.Len()*mem.Len(), mem.Size(), "%T", mem)
	}
}

// A view is part of its buffer: copies, memsets and launches on it touch only its
// elements, and its life is the buffer's.
func TestSlice(t *testing.T) {
	ctx, s := memSetup(t)
	if cudatest.Strict() {
		cudatest.Check(t)
	}
	b, err := cuda.AllocFor[uint32](s, 100)
	require.NoError(t, err)
	require.NoError(t, b.Memset32Async(s, 7))
	x, err := b.Slice(10, 20)
	require.NoError(t, err)
	assert.Equal(t, 20, x.Len())
	assert.Equal(t, 80, x.Size())
	assert.Equal(t, b.Ptr()+40, x.Ptr())
	assert.Same(t, ctx, x.Context())
	y, err := x.Slice(5, 5) // a view of a view is a view of b
	require.NoError(t, err)
	assert.Equal(t, b.Ptr()+60, y.Ptr())

	require.NoError(t, x.Memset32Async(s, 1))
	src := []uint32{9, 9, 9}
	require.NoError(t, cuda.CopyToDeviceAsync(s, y, src))
	require.ErrorIs(t, cuda.CopyToDeviceAsync(s, y, make([]uint32, 6)), cuda.ErrInvalidArgument, "past the view")
	require.ErrorIs(t, cuda.CopyToDeviceAsync(s, y, make([]float32, 1)), cuda.ErrInvalidArgument, "the element type")
	got := make([]uint32, 100)
	require.NoError(t, cuda.CopyFromDeviceAsync(s, got, b))
	require.NoError(t, s.Synchronize())
	for i, v := range got {
		want := uint32(7)
		switch {
		case i >= 15 && i < 18:
			want = 9
		case i >= 10 && i < 30:
			want = 1
		}
		require.Equal(t, want, v, "element %d", i)
	}

	// Bounds, as b[off:off+n] would check them.
	for _, bad := range [][2]int{{-1, 1}, {0, -1}, {101, 0}, {90, 11}, {50, 1 << 62}} {
		_, err := b.Slice(bad[0], bad[1])
		require.ErrorIs(t, err, cuda.ErrInvalidArgument, "%v", bad)
	}
	empty, err := b.Slice(100, 0)
	require.NoError(t, err)
	assert.Zero(t, empty.Len())

	// Closing a view closes the view only.
	require.NoError(t, y.Close())
	err = y.Close()
	require.ErrorIs(t, err, cuda.ErrClosed)
	require.ErrorIs(t, err, resource.ErrReleased)
	require.ErrorIs(t, y.Memset32Async(s, 0), cuda.ErrClosed)
	require.NoError(t, x.Memset32Async(s, 0), "the other views and the buffer stay")
	// Closing the buffer ends its views.
	require.NoError(t, b.Close())
	require.ErrorIs(t, x.Memset32Async(s, 0), cuda.ErrClosed)
	require.ErrorIs(t, cuda.CopyToDevice(x, src), cuda.ErrClosed)
	_, err = x.Slice(0, 1)
	require.ErrorIs(t, err, cuda.ErrClosed)
	require.NoError(t, x.Close())
	require.NoError(t, s.Synchronize())
}

// A launch with a view passes the view's address and holds the buffer.
func TestSliceLaunch(t *testing.T) {
	_, m, s := loadKernels(t)
	if !cudatest.FakeLoaded() {
		t.Skip("reads the launch records of the fake driver (CI)")
	}
	fill := function(t, m, "fill_u32")
	b, err := cuda.AllocFor[uint32](s, 1024)
	require.NoError(t, err)
	defer b.Close()
	v, err := b.Slice(256, 512)
	require.NoError(t, err)
	require.NoError(t, fill.Launch(s, cuda.D1(2), cuda.D1(256), 0, v, uint32(3), uint64(v.Len())))
	last := cudatest.Launches(cudatest.LaunchCount() - 1)
	require.Len(t, last, 1)
	assert.Equal(t, uint64(b.Ptr())+1024, binary.NativeEndian.Uint64(last[0].Params))
	require.NoError(t, s.Synchronize())
}

// Memory allocated on one stream and first used on another is used there only after
// the allocation: the second stream waits for the first. The fake driver is paused
// while a 100 ms delay is queued on the first stream, the buffer allocated there and
// used on the second, then resumed: its executor picks between the two streams at
// random, so without the wait the use would come first about half the time.
func TestFirstUseAfterAllocation(t *testing.T) {
	ctx, s1 := memSetup(t)
	if !cudatest.Strict() {
		t.Skip("orders work through the fake driver's pause and delay controls (CI)")
	}
	cudatest.Check(t)
	s2, err := ctx.NewStream()
	require.NoError(t, err)
	defer s2.Close()
	_, m, _ := loadKernels(t)
	fill := function(t, m, "fill_u32")

	for _, use := range []struct {
		name string
		op   func(b *cuda.DeviceBuffer) error
	}{
		{"copy", func(b *cuda.DeviceBuffer) error { return cuda.CopyToDeviceAsync(s2, b, []uint32{1}) }},
		{"memset", func(b *cuda.DeviceBuffer) error { return b.Memset32Async(s2, 1) }},
		{"launch", func(b *cuda.DeviceBuffer) error {
			return fill.Launch(s2, cuda.D1(1), cuda.D1(1), 0, b, uint32(1), uint64(1))
		}},
		{"batch", func(b *cuda.DeviceBuffer) error {
			var batch cuda.LaunchBatch
			if err := batch.Add(fill, cuda.D1(1), cuda.D1(1), 0, b, uint32(1), uint64(1)); err != nil {
				return err
			}
			return batch.Submit(s2)
		}},
	} {
		for i := range 8 {
			require.NoError(t, cudatest.Pause())
			require.NoError(t, cudatest.Delay(uintptr(s1.Handle()), 100*time.Millisecond))
			b, err := cuda.AllocFor[uint32](s1, 1)
			require.NoError(t, err)
			err = use.op(b)
			start := time.Now()
			require.NoError(t, cudatest.Resume())
			require.NoError(t, err, use.name)
			require.NoError(t, s2.Synchronize())
			require.GreaterOrEqual(t, time.Since(start), 80*time.Millisecond, "%s %d on s2 waited for the allocation on s1", use.name, i)
			require.NoError(t, s1.Synchronize())
			require.NoError(t, b.Close())
		}
	}
}

// The grid, block and dynamic shared memory reach the driver as given, on the usual
// launch's path (gocuda_launch) and on a hand-off's (gocuda_launch_after: the
// buffer's last use is on another stream).
func TestLaunchShape(t *testing.T) {
	_, m, s := loadKernels(t)
	if !cudatest.FakeLoaded() {
		t.Skip("reads the launch records of the fake driver (CI)")
	}
	fill := function(t, m, "fill_u32")
	other, err := s.Context().NewStream()
	require.NoError(t, err)
	defer other.Close()
	b, err := cuda.AllocFor[uint32](other, 4)
	require.NoError(t, err)
	defer b.Close()
	for _, c := range []struct {
		name        string
		grid, block cuda.Dim3
		shared      int
	}{
		{"hand-off", cuda.D3(2, 3, 4), cuda.D3(5, 6, 7), 96},
		{"usual", cuda.D3(7, 1, 9), cuda.D2(8, 2), 1024},
	} {
		require.NoError(t, fill.Launch(s, c.grid, c.block, c.shared, b, uint32(1), uint64(0)), c.name)
		last := cudatest.Launches(cudatest.LaunchCount() - 1)
		require.Len(t, last, 1, c.name)
		g, k := c.grid, c.block
		assert.Equal(t, [3]uint32{uint32(g.X), uint32(g.Y), uint32(g.Z)}, last[0].Grid, c.name)
		assert.Equal(t, [3]uint32{uint32(k.X), uint32(k.Y), uint32(max(k.Z, 1))}, last[0].Block, c.name)
		assert.Equal(t, uint32(c.shared), last[0].SharedMem, c.name)
		assert.Equal(t, uintptr(s.Handle()), last[0].Stream, c.name)
	}
	require.NoError(t, s.Synchronize())
}
