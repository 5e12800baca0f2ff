package cuda_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/resource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// makeGarbage creates device, pinned, unified and wrapped buffers, modules, streams
// and events, uses them, and drops them all without Close.
//
//go:noinline
func makeGarbage(t *testing.T, ctx *cuda.Context, work *cuda.Stream, n int) {
	for i := 0; i < n; i++ {
		d, err := ctx.Alloc(work, 1<<20)
		require.NoError(t, err)
		require.NoError(t, d.Memset32Async(work, uint32(i)))
		h, err := ctx.AllocHost(64 << 10)
		require.NoError(t, err)
		h.Bytes()[0] = 1
		u, err := ctx.AllocManaged(64 << 10)
		require.NoError(t, err)
		u.Bytes()[0] = 1
		w, err := cuda.Wrap(ctx, make([]byte, 1<<20))
		require.NoError(t, err)
		require.NoError(t, cuda.CopyAsync(work, d, w))
		m, err := ctx.LoadModule(kernelsPTX)
		require.NoError(t, err)
		_, err = m.Function("empty")
		require.NoError(t, err)
		s, err := ctx.NewStream()
		require.NoError(t, err)
		e, err := ctx.NewEvent(false)
		require.NoError(t, err)
		require.NoError(t, e.Record(s))
	}
	require.NoError(t, work.Synchronize())
}

// liveMemory is what the package holds per kind: bytes in live buffers, and pool
// bytes in use beyond the package's cache of reusable blocks.
func liveMemory(t *testing.T, ctx *cuda.Context) (live [4]int64, used [4]int64, awaiting int64) {
	st, err := cuda.MemoryStatus()
	require.NoError(t, err)
	for _, c := range st.Contexts {
		if c.Device != ctx.Device() || !c.Primary {
			continue
		}
		for k, p := range c.Kinds {
			live[k] = p.Bytes
			used[k] = int64(p.Used) - p.Cached
		}
	}
	return live, used, st.WrappedAwaiting
}

// The seed test: with the GPU busy for most of a second on one stream, dropping and
// collecting every kind of object must delay neither the collecting goroutine nor a
// launch from another goroutine (releases that may wait for the GPU are held for
// Reclaim), and afterwards the memory must really come back.
func TestSeedCollectWhileGPUBusy(t *testing.T) {
	_, m, other := loadKernels(t, cudatest.Kernels)
	ctx := m.Context()
	spin := function(t, m, "spin")
	empty := function(t, m, "empty")
	busy, err := ctx.NewStream()
	require.NoError(t, err)
	defer busy.Close()
	work, err := ctx.NewStream()
	require.NoError(t, err)
	defer work.Close()

	// Warm up: pools exist, the launcher's path is hot, nothing is queued.
	makeGarbage(t, ctx, work, 1)
	_, err = resource.Reclaim()
	require.NoError(t, err)
	require.NoError(t, empty.Launch(other, cuda.D1(1), cuda.D1(1), 0))
	require.NoError(t, other.Synchronize())
	live0, used0, await0 := liveMemory(t, ctx)
	st0 := resource.Status()

	const n = 8
	makeGarbage(t, ctx, work, n)

	require.NoError(t, spin.Launch(busy, cuda.D1(1), cuda.D1(1), 0, uint64(900*time.Millisecond)))
	time.Sleep(10 * time.Millisecond) // the spin kernel is running

	var stop atomic.Bool
	var worst atomic.Int64
	var launches atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			t0 := time.Now()
			if err := empty.Launch(other, cuda.D1(1), cuda.D1(1), 0); err != nil {
				t.Error(err)
				return
			}
			if d := int64(time.Since(t0)); d > worst.Load() {
				worst.Store(d)
			}
			launches.Add(1)
			time.Sleep(200 * time.Microsecond)
		}
	}()

	var gcWorst time.Duration
	for i := 0; i < 2; i++ {
		t0 := time.Now()
		runtime.GC()
		gcWorst = max(gcWorst, time.Since(t0))
	}
	// A collection that waited for the GPU would return after the spin: an order,
	// not a time bound (the times are logged below).
	afterGC, err := busy.Query()
	require.NoError(t, err)
	// The non-blocking lane runs within about 100 ms: give it 400 ms, still inside
	// the spin, while the launcher keeps launching.
	time.Sleep(400 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	busyDone, err := busy.Query()
	require.NoError(t, err)
	mid := resource.Status()

	t.Logf("runtime.GC worst %v; %d launches meanwhile, worst %v; released non-blocking %d, pending blocking %d",
		gcWorst, launches.Load(), time.Duration(worst.Load()),
		mid.ReleasedNonBlocking-st0.ReleasedNonBlocking, mid.PendingBlocking)
	assert.False(t, afterGC, "the collecting goroutine waited for the GPU")
	assert.False(t, busyDone, "the spin kernel must still be running at the end of the window: "+
		"a launch from another goroutine that waited for the GPU would return after it")
	assert.Positive(t, launches.Load())
	// Streams, events and device buffers (and pinned and unified blocks) came back
	// during the spin; modules and wrapped memory wait for Reclaim.
	assert.GreaterOrEqual(t, mid.ReleasedNonBlocking-st0.ReleasedNonBlocking, uint64(4*n), "non-blocking releases ran during the spin")
	// None of the releases that may wait for the GPU ran during the spin: they are
	// held for Reclaim (at least the modules; wrapped buffers are held too once the
	// collector finds them, which for some can take a later cycle).
	assert.Equal(t, st0.ReleasedBlocking, mid.ReleasedBlocking, "no blocking release ran on the finalizer path")
	assert.GreaterOrEqual(t, mid.PendingBlocking, int64(n), "blocking releases are held for Reclaim")
	assert.Equal(t, st0.Failed, mid.Failed)

	require.NoError(t, busy.Synchronize())
	_, err = resource.Reclaim()
	require.NoError(t, err)
	require.NoError(t, ctx.Synchronize())
	live1, used1, await1 := liveMemory(t, ctx)
	end := resource.Status()
	assert.Equal(t, live0, live1, "live bytes per kind back to the start")
	assert.Equal(t, used0, used1, "pool bytes in use (less reusable cache) back to the start")
	assert.Equal(t, await0, await1, "no wrapped memory awaiting unregistration")
	assert.Zero(t, end.PendingBlocking)
	assert.Equal(t, st0.Failed, end.Failed, "no release failed")
}
