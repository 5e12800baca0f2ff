package cuda_test

import (
	"context"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The hand-off on a GPU, with kernels whose results and timing are checked.

const gateNs = 100_000_000 // a gate kernel's 100 ms

// A gate kernel keeps one stream busy while another goroutine takes the buffer
// over: the take-over returns at once (the ordering is on the device), and the
// work runs in order.
func TestGPUHandOffTakeOver(t *testing.T) {
	_, m, s1 := loadKernels(t, cudatest.Kernels)
	ctx := m.Context()
	spin, fill, add := function(t, m, "spin"), function(t, m, "fill_u32"), function(t, m, "add_u32")
	s2, err := ctx.NewStream()
	require.NoError(t, err)
	defer s2.Close()
	const n = 1 << 20
	b, err := cuda.AllocFor[uint32](s1, n)
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, spin.Launch(s1, cuda.D1(1), cuda.D1(1), 0, uint64(gateNs)))
	require.NoError(t, fill.Launch(s1, cuda.D1(256), cuda.D1(256), 0, b, uint32(1), uint64(n)))

	took := make(chan time.Duration)
	go func() {
		start := time.Now()
		err := add.Launch(s2, cuda.D1(256), cuda.D1(256), 0, b, uint32(1), uint64(n))
		took <- time.Since(start)
		assert.NoError(t, err)
	}()
	d := <-took
	gateDone, err := s1.Query()
	require.NoError(t, err)
	t.Logf("take-over returned in %v while the gate ran", d)
	assert.False(t, gateDone, "the take-over returned while the gate still ran: it did not wait on the host")
	out := make([]uint32, n)
	require.NoError(t, cuda.CopyFromDevice(out, b))
	for i, v := range out {
		if v != 2 {
			t.Fatalf("element %d is %d: the add did not run after the fill", i, v)
		}
	}
}

// Two streams that only read one buffer run at the same time; a write after them
// waits for both.
func TestGPUReadersOverlap(t *testing.T) {
	_, m, s0 := loadKernels(t, cudatest.Kernels)
	ctx := m.Context()
	readSum, fill := function(t, m, "read_sum"), function(t, m, "fill_u32")
	ss := []*cuda.Stream{}
	for range 2 {
		s, err := ctx.NewStream()
		require.NoError(t, err)
		defer s.Close()
		ss = append(ss, s)
	}
	const n = 1 << 16
	b, err := cuda.AllocFor[uint32](s0, n)
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, fill.Launch(s0, cuda.D1(64), cuda.D1(256), 0, b, uint32(3), uint64(n)))

	const readNs = 50_000_000
	var starts, ends [2]*cuda.Event
	sums := make([]*cuda.DeviceBuffer, 2)
	for i, s := range ss {
		sums[i], err = cuda.AllocFor[uint64](s, 1)
		require.NoError(t, err)
		defer sums[i].Close()
		require.NoError(t, sums[i].Memset32Async(s, 0))
		starts[i], err = ctx.NewEvent(true)
		require.NoError(t, err)
		defer starts[i].Close()
		ends[i], err = ctx.NewEvent(true)
		require.NoError(t, err)
		defer ends[i].Close()
	}
	for i, s := range ss {
		require.NoError(t, readSum.Launch(s, cuda.D1(1), cuda.D1(32), 0, cuda.In(b), uint64(n), uint64(0), sums[i]))
		require.NoError(t, starts[i].Record(s))
		require.NoError(t, readSum.Launch(s, cuda.D1(1), cuda.D1(32), 0, cuda.In(b), uint64(n), uint64(readNs), sums[i]))
		require.NoError(t, ends[i].Record(s))
	}
	// A write after both reads: it must wait for them.
	require.NoError(t, b.Memset32Async(s0, 0))
	require.NoError(t, s0.Synchronize())
	for _, e := range ends {
		done, err := e.Query()
		require.NoError(t, err)
		assert.True(t, done, "the write waited for the readers")
	}
	first, err := cuda.Elapsed(starts[0], ends[0])
	require.NoError(t, err)
	span, err := cuda.Elapsed(starts[0], ends[1])
	require.NoError(t, err)
	start1, err := cuda.Elapsed(starts[0], starts[1])
	require.NoError(t, err)
	t.Logf("reader 1: %v; reader 2 started %v after reader 1 and ended %v after it started", first, start1, span)
	assert.Less(t, start1, first, "the readers overlap: the second starts before the first ends")
	assert.Less(t, span, 2*readNs*time.Nanosecond*9/10, "concurrent, not serial")
	for i := range sums {
		got := make([]uint64, 1)
		require.NoError(t, cuda.CopyFromDevice(got, sums[i]))
		assert.Equal(t, uint64(2*3*n), got[0], "reader %d read the fill twice", i)
	}
}

// The free of a buffer read on several streams happens after all of them: the
// memory freed is reallocated and overwritten at once, and the readers still sum
// what they were given (compute-sanitizer memcheck runs this too).
func TestGPUFreeAfterReaders(t *testing.T) {
	_, m, s0 := loadKernels(t, cudatest.Kernels)
	ctx := m.Context()
	readSum, fill := function(t, m, "read_sum"), function(t, m, "fill_u32")
	ss := streams(t, ctx, 3)
	const n = 1 << 16
	for round := range 5 {
		b, err := cuda.AllocFor[uint32](s0, n)
		require.NoError(t, err)
		require.NoError(t, fill.Launch(s0, cuda.D1(64), cuda.D1(256), 0, b, uint32(1), uint64(n)))
		sums := make([]*cuda.DeviceBuffer, len(ss))
		for i, s := range ss {
			sums[i], err = cuda.AllocFor[uint64](s, 1)
			require.NoError(t, err)
			require.NoError(t, sums[i].Memset32Async(s, 0))
			require.NoError(t, readSum.Launch(s, cuda.D1(1), cuda.D1(32), 0, cuda.In(b), uint64(n), uint64(20_000_000), sums[i]))
		}
		require.NoError(t, b.Close())
		// Reuse the freed memory at once, on every stream.
		for _, s := range append(ss, s0) {
			r, err := cuda.AllocFor[uint32](s, n)
			require.NoError(t, err)
			require.NoError(t, fill.Launch(s, cuda.D1(64), cuda.D1(256), 0, r, uint32(1000), uint64(n)))
			require.NoError(t, r.Close())
		}
		for i := range sums {
			got := make([]uint64, 1)
			require.NoError(t, cuda.CopyFromDevice(got, sums[i]))
			require.Equal(t, uint64(n), got[0], "round %d: reader %d summed freed memory", round, i)
			require.NoError(t, sums[i].Close())
		}
	}
}

// Synchronize after a hand-off still waits for the original stream, so that code
// this package cannot order may then use the address; unified memory written by a
// kernel is synchronized before the host reads it.
func TestGPUSynchronizeForForeignCodeAndManaged(t *testing.T) {
	_, m, s1 := loadKernels(t, cudatest.Kernels)
	ctx := m.Context()
	spin, fill, add := function(t, m, "spin"), function(t, m, "fill_u32"), function(t, m, "add_u32")
	s2, err := ctx.NewStream()
	require.NoError(t, err)
	defer s2.Close()
	b, err := cuda.AllocFor[uint32](s1, 1024)
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, spin.Launch(s1, cuda.D1(1), cuda.D1(1), 0, uint64(gateNs)))
	require.NoError(t, fill.Launch(s1, cuda.D1(4), cuda.D1(256), 0, b, uint32(5), uint64(1024)))
	require.NoError(t, add.Launch(s2, cuda.D1(4), cuda.D1(256), 0, b, uint32(1), uint64(1024)))
	start := time.Now()
	require.NoError(t, b.Synchronize())
	assert.GreaterOrEqual(t, time.Since(start), 90*time.Millisecond, "waited for the gate on the original stream")
	p := b.Ptr()
	out := make([]uint32, 1024)
	func() { // the foreign code, here the raw layer on a locked thread
		lockContext(t, ctx.Handle())
		defer runtime.UnlockOSThread()
		require.NoError(t, cudaraw.MemcpyDtoH(unsafe.Pointer(&out[0]), p, 4096))
	}()
	assert.Equal(t, uint32(6), out[1023])

	mb, err := ctx.AllocManaged(4096)
	require.NoError(t, err)
	defer mb.Close()
	require.NoError(t, spin.Launch(s2, cuda.D1(1), cuda.D1(1), 0, uint64(20_000_000)))
	require.NoError(t, fill.Launch(s2, cuda.D1(4), cuda.D1(256), 0, mb, uint32(9), uint64(1024)))
	require.NoError(t, mb.Synchronize())
	assert.Equal(t, uint32(9), cuda.HostSlice[uint32](mb)[1023], "the host reads unified memory after the kernel")
}

// A priority switch inside WithStream runs on a stream of that priority, ordered
// after the caller's work and before the caller's next work.
func TestGPUPrioritySwitch(t *testing.T) {
	_, m, _ := loadKernels(t, cudatest.Kernels)
	ctx := m.Context()
	spin, fill, add := function(t, m, "spin"), function(t, m, "fill_u32"), function(t, m, "add_u32")
	_, greatest, err := ctx.StreamPriorityRange()
	require.NoError(t, err)
	var out []uint32
	err = ctx.WithStream(context.Background(), func(c context.Context, s *cuda.Stream) error {
		b, err := cuda.AllocFor[uint32](s, 1024)
		require.NoError(t, err)
		defer b.Close()
		require.NoError(t, spin.Launch(s, cuda.D1(1), cuda.D1(1), 0, uint64(20_000_000)))
		require.NoError(t, fill.Launch(s, cuda.D1(4), cuda.D1(256), 0, b, uint32(1), uint64(1024)))
		require.NoError(t, ctx.WithStream(c, func(_ context.Context, hi *cuda.Stream) error {
			var p int32
			func() {
				lockContext(t, ctx.Handle())
				defer runtime.UnlockOSThread()
				require.NoError(t, cudaraw.StreamGetPriority(hi.Handle(), &p))
			}()
			assert.Equal(t, int32(greatest), p)
			// Raw work on hi with the buffer's address, ordered by Enqueue.
			return cuda.Enqueue(hi, func(c cudaraw.CUcontext, h cudaraw.CUstream) error {
				return cudaraw.MemsetD32AsyncIn(c, b.Ptr(), 10, 1024, h)
			}, cuda.Writes(b))
		}, cuda.WithPriority(cuda.High)))
		require.NoError(t, add.Launch(s, cuda.D1(4), cuda.D1(256), 0, b, uint32(100), uint64(1024)))
		out = make([]uint32, 1024)
		return cuda.CopyFromDeviceAsync(s, out, b) // pageable: done when it returns
	})
	require.NoError(t, err)
	assert.Equal(t, uint32(110), out[1023], "fill, then the High stream's raw memset, then the caller's add")
}
