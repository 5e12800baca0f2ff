package cuda_test

import (
	"encoding/binary"
	"errors"
	"runtime"
	"sync"
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/resource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A capture that allocates, stages host data and closes its temporaries replays
// twice, after garbage collection, with the data as it was at the capture.
func TestCaptureReplay(t *testing.T) {
	cudatest.Check(t)
	ctx, s := cudatest.Stream(t)
	const n = 1 << 19 // 2 MiB of uint32: larger than the blocks the stream caches
	x, err := cuda.AllocFor[uint32](s, n)
	require.NoError(t, err)
	defer x.Close()
	y, err := cuda.AllocFor[uint32](s, n)
	require.NoError(t, err)
	defer y.Close()
	require.NoError(t, x.Memset32Async(s, 0))
	require.NoError(t, y.Memset32Async(s, 0))
	host := make([]uint32, n)
	for i := range host {
		host[i] = uint32(i)
	}

	g, err := ctx.Capture(func(cs *cuda.Stream) error {
		tmp, err := cuda.AllocFor[uint32](cs, n)
		if err != nil {
			return err
		}
		if err := tmp.Memset32Async(cs, 7); err != nil {
			return err
		}
		if err := cuda.CopyAsync(cs, y, tmp); err != nil {
			return err
		}
		if err := tmp.Close(); err != nil { // leased: freed with the graph
			return err
		}
		return cuda.CopyToDeviceAsync(cs, x, host) // a snapshot of host
	})
	require.NoError(t, err)
	assert.Equal(t, 4, g.Buffers(), "x, y, the temporary and the staging buffer")
	host[0], host[n-1] = 1<<31, 1<<31 // after the capture: not replayed
	runtime.GC()
	runtime.GC()

	e, err := g.Instantiate()
	require.NoError(t, err)
	require.NoError(t, g.Close(), "the executable keeps what it uses")
	require.ErrorIs(t, g.Close(), cuda.ErrClosed)
	for range 2 {
		require.NoError(t, x.Memset32Async(s, 1))
		require.NoError(t, e.Launch(s))
	}
	got := make([]uint32, n)
	require.NoError(t, cuda.CopyFromDevice(got, x))
	for i, v := range got {
		if v != uint32(i) {
			t.Fatalf("x[%d] = %d after the replays, want %d", i, v, i)
		}
	}
	require.NoError(t, cuda.CopyFromDevice(got, y))
	for i, v := range got {
		if v != 7 {
			t.Fatalf("y[%d] = %d after the replays, want 7", i, v)
		}
	}
	require.NoError(t, e.Close())
	require.ErrorIs(t, e.Close(), cuda.ErrClosed)
	require.ErrorIs(t, e.Launch(s), cuda.ErrClosed)
}

// Memory closed while a graph holds it stays usable by the graph's replays and is
// freed after the last one, once the graph and its executable are closed.
func TestCaptureKeepsClosedMemory(t *testing.T) {
	cudatest.Check(t)
	ctx, s := cudatest.Stream(t)
	const size = 4 << 20
	a, err := ctx.Alloc(s, size)
	require.NoError(t, err)
	out, err := ctx.Alloc(s, size)
	require.NoError(t, err)
	defer out.Close()
	require.NoError(t, a.Memset8Async(s, 3))
	g, err := ctx.Capture(func(cs *cuda.Stream) error { return cuda.CopyAsync(cs, out, a) })
	require.NoError(t, err)
	e, err := g.Instantiate()
	require.NoError(t, err)

	require.NoError(t, a.Close())
	require.ErrorIs(t, a.Memset8Async(s, 0), cuda.ErrClosed, "closed for new operations")
	postponed, leases := cuda.ReleasePostponedForTest(a)
	assert.True(t, postponed, "not freed while leased")
	assert.Equal(t, 2, leases, "the graph's and the executable's")
	require.NoError(t, e.Launch(s))
	require.NoError(t, g.Close())
	require.NoError(t, e.Launch(s), "the executable still holds a")
	require.NoError(t, e.Close())
	postponed, leases = cuda.ReleasePostponedForTest(a)
	assert.False(t, postponed, "freed with the last lease")
	assert.Zero(t, leases)
	got := make([]byte, size)
	require.NoError(t, cuda.CopyFromDevice(got, out))
	for i, v := range got {
		if v != 3 {
			t.Fatalf("out[%d] = %d, want 3", i, v)
		}
	}
}

// Operations that would invalidate a capture, or make replays read Go memory, fail
// with CaptureError, and so does the capture even when the function ignores them.
func TestCaptureRefuses(t *testing.T) {
	ctx, s := cudatest.Stream(t)
	b, err := cuda.AllocFor[uint32](s, 64)
	require.NoError(t, err)
	defer b.Close()
	sink := make([]uint32, 64)
	boom := errors.New("boom")
	for _, c := range []struct {
		name string
		f    func(cs *cuda.Stream) error
		want string
	}{
		{"synchronize", func(cs *cuda.Stream) error { _ = cs.Synchronize(); return nil }, "synchronizing"},
		{"query", func(cs *cuda.Stream) error { _, err := cs.Query(); return err }, "querying"},
		{"copy to Go memory", func(cs *cuda.Stream) error { _ = cuda.CopyFromDeviceAsync(cs, sink, b); return nil }, "Go memory"},
		{"function error", func(cs *cuda.Stream) error { _ = b.Memset32Async(cs, 1); return boom }, "boom"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, err := ctx.Capture(c.f)
			assert.Nil(t, g)
			var ce *cuda.CaptureError
			require.ErrorAs(t, err, &ce)
			assert.Contains(t, err.Error(), c.want)
		})
	}
	_, err = ctx.Capture(func(cs *cuda.Stream) error { return boom })
	assert.ErrorIs(t, err, boom)
	_, err = ctx.Capture(nil)
	assert.ErrorIs(t, err, cuda.ErrInvalidArgument)

	// A failed capture leases nothing: b is usable and freed as usual.
	require.NoError(t, b.Memset32Async(s, 2))
	require.NoError(t, cuda.CopyFromDevice(sink, b))
	assert.Equal(t, uint32(2), sink[63])

	// An executable refuses to launch into a capture.
	g, err := ctx.Capture(func(cs *cuda.Stream) error { return b.Memset32Async(cs, 5) })
	require.NoError(t, err)
	defer g.Close()
	e, err := g.Instantiate()
	require.NoError(t, err)
	defer e.Close()
	_, err = ctx.Capture(func(cs *cuda.Stream) error { return e.Launch(cs) })
	var ce *cuda.CaptureError
	require.ErrorAs(t, err, &ce)
}

// A Close on another goroutine during a capture waits for its end instead of
// invalidating it; other goroutines keep using the GPU meanwhile.
func TestCaptureConcurrentClose(t *testing.T) {
	cudatest.Check(t)
	ctx, s := cudatest.Stream(t)
	other, err := ctx.Alloc(s, 4<<20)
	require.NoError(t, err)
	work, err := ctx.NewStream()
	require.NoError(t, err)
	defer work.Close()
	dst, err := cuda.AllocFor[uint32](s, 16)
	require.NoError(t, err)
	defer dst.Close()
	g, err := ctx.Capture(func(cs *cuda.Stream) error {
		var wg sync.WaitGroup
		wg.Go(func() {
			assert.NoError(t, other.Close())
			assert.ErrorIs(t, other.Close(), cuda.ErrClosed)
			b, err := cuda.AllocFor[uint32](work, 16)
			if assert.NoError(t, err) {
				assert.NoError(t, b.Memset32Async(work, 9))
				got := make([]uint32, 16)
				assert.NoError(t, cuda.CopyFromDeviceAsync(work, got, b))
				assert.Equal(t, uint32(9), got[15])
				assert.NoError(t, b.Close())
			}
		})
		wg.Wait()
		return dst.Memset32Async(cs, 4)
	})
	require.NoError(t, err)
	defer g.Close()
	e, err := g.Instantiate()
	require.NoError(t, err)
	defer e.Close()
	require.NoError(t, e.Launch(s))
	got := make([]uint32, 16)
	require.NoError(t, cuda.CopyFromDevice(got, dst))
	assert.Equal(t, uint32(4), got[0])
}

// One executable launched from many goroutines on their own streams: every replay
// is ordered with the others by the hand-off (each writes the same buffer).
func TestExecConcurrentLaunch(t *testing.T) {
	cudatest.Check(t)
	ctx, s := cudatest.Stream(t)
	const n = 1 << 18
	src, err := cuda.AllocFor[uint32](s, n)
	require.NoError(t, err)
	defer src.Close()
	dst, err := cuda.AllocFor[uint32](s, n)
	require.NoError(t, err)
	defer dst.Close()
	require.NoError(t, src.Memset32Async(s, 11))
	g, err := ctx.Capture(func(cs *cuda.Stream) error {
		if err := dst.Memset32Async(cs, 0); err != nil {
			return err
		}
		return cuda.CopyAsync(cs, dst, src)
	})
	require.NoError(t, err)
	e, err := g.Instantiate()
	require.NoError(t, err)
	require.NoError(t, g.Close())
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			ls, err := ctx.NewStream()
			if !assert.NoError(t, err) {
				return
			}
			defer ls.Close()
			for range 10 {
				assert.NoError(t, e.Launch(ls))
			}
		})
	}
	wg.Wait()
	got := make([]uint32, n)
	require.NoError(t, cuda.CopyFromDevice(got, dst))
	assert.Equal(t, uint32(11), got[0])
	assert.Equal(t, uint32(11), got[n-1])
	require.NoError(t, e.Close())
}

// Update makes an executable replay another capture of the same operations: a kernel
// and a memset retargeted to other buffers, without instantiating again. A capture
// of other operations is refused with GraphUpdateError and changes nothing.
func TestExecUpdate(t *testing.T) {
	cudatest.Check(t)
	_, m, s := loadKernels(t)
	ctx := s.Context()
	fill := function(t, m, "fill_u32")
	const n = 1 << 19
	bufs := make([]*cuda.DeviceBuffer, 4)
	for i := range bufs {
		b, err := cuda.AllocFor[uint32](s, n)
		require.NoError(t, err)
		defer b.Close()
		require.NoError(t, b.Memset32Async(s, 0))
		bufs[i] = b
	}
	capture := func(k, m *cuda.DeviceBuffer, v uint32) *cuda.Graph {
		g, err := ctx.Capture(func(cs *cuda.Stream) error {
			if err := fill.Launch(cs, cuda.D1(64), cuda.D1(256), 0, k, v, uint64(n)); err != nil {
				return err
			}
			return m.Memset32Async(cs, v+1)
		})
		require.NoError(t, err)
		return g
	}
	g1 := capture(bufs[0], bufs[1], 10)
	e, err := g1.Instantiate()
	require.NoError(t, err)
	defer e.Close()
	require.NoError(t, g1.Close())
	g2 := capture(bufs[2], bufs[3], 20)
	require.NoError(t, e.Update(g2))
	require.NoError(t, g2.Close())
	require.NoError(t, e.Launch(s))

	got := make([]uint32, n)
	check := func(b *cuda.DeviceBuffer, want uint32, kernel bool) {
		t.Helper()
		if kernel && cudatest.FakeLoaded() {
			return // the fake driver runs no kernel code: only memory checks
		}
		require.NoError(t, cuda.CopyFromDevice(got, b))
		assert.Equal(t, want, got[0])
		assert.Equal(t, want, got[n-1])
	}
	check(bufs[0], 0, true) // the first graph's targets, untouched
	check(bufs[1], 0, false)
	check(bufs[2], 20, true)
	check(bufs[3], 21, false)

	// Other operations: refused, the executable still replays the second graph.
	g3, err := ctx.Capture(func(cs *cuda.Stream) error { return bufs[0].Memset32Async(cs, 5) })
	require.NoError(t, err)
	defer g3.Close()
	err = e.Update(g3)
	var ue *cuda.GraphUpdateError
	require.ErrorAs(t, err, &ue)
	require.NoError(t, bufs[3].Memset32Async(s, 0))
	require.NoError(t, e.Launch(s))
	check(bufs[3], 21, false)
}

// An ExecCache captures every call and updates its executable instead of
// instantiating while the operations stay the same.
func TestExecCache(t *testing.T) {
	cudatest.Check(t)
	ctx, s := cudatest.Stream(t)
	cache := cuda.NewExecCache[string](ctx)
	const n = 1 << 18
	got := make([]uint32, n)
	out, err := cuda.AllocFor[uint32](s, n)
	require.NoError(t, err)
	defer out.Close()
	var prev *cuda.DeviceBuffer
	for i := range 4 {
		b, err := cuda.AllocFor[uint32](s, n)
		require.NoError(t, err)
		v := uint32(100 + i)
		require.NoError(t, cache.Launch(s, "fill", func(cs *cuda.Stream) error { return b.Memset32Async(cs, v) }))
		require.NoError(t, cache.Launch(s, "copy", func(cs *cuda.Stream) error { return cuda.CopyAsync(cs, out, b) }))
		require.NoError(t, b.Close(), "kept by the cached executables until they move on")
		require.NoError(t, cuda.CopyFromDevice(got, out))
		assert.Equal(t, v, got[n-1], "call %d", i)
		postponed, leases := cuda.ReleasePostponedForTest(b)
		assert.True(t, postponed, "call %d: held by the cached executables", i)
		assert.Equal(t, 2, leases, "call %d", i)
		if prev != nil {
			postponed, leases := cuda.ReleasePostponedForTest(prev)
			assert.False(t, postponed, "call %d: the previous buffer is freed once they moved on", i)
			assert.Zero(t, leases, "call %d", i)
		}
		prev = b
	}
	st := cache.Stats()
	assert.Equal(t, cuda.ExecCacheStats{Captures: 8, Instantiations: 2, Updates: 6}, st)

	// Other operations under the same key: instantiated anew.
	b, err := cuda.AllocFor[uint32](s, n)
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, cache.Launch(s, "fill", func(cs *cuda.Stream) error {
		if err := b.Memset32Async(cs, 1); err != nil {
			return err
		}
		return b.Memset32Async(cs, 2)
	}))
	assert.Equal(t, 3, cache.Stats().Instantiations)
	require.NoError(t, cache.Close())
	postponed, leases := cuda.ReleasePostponedForTest(prev)
	assert.False(t, postponed, "freed with the cache")
	assert.Zero(t, leases)
	require.ErrorIs(t, cache.Close(), cuda.ErrClosed)
	require.ErrorIs(t, cache.Launch(s, "fill", func(cs *cuda.Stream) error { return nil }), cuda.ErrClosed)
}

// A module whose kernels a graph replays stays loaded until the graph and its
// executables let go of it: Close shuts it for launches at once and the unload (a
// blocking release) runs at the next Reclaim after that.
func TestCaptureKeepsModule(t *testing.T) {
	cudatest.Check(t)
	cudatest.Require(t)
	ctx, err := cuda.Device(0).Context()
	require.NoError(t, err)
	s, err := ctx.NewStream()
	require.NoError(t, err)
	defer s.Close()
	m, err := ctx.LoadModule(kernelsPTX)
	require.NoError(t, err)
	fill := function(t, m, "fill_u32")
	const n = 4096
	b, err := cuda.AllocFor[uint32](s, n)
	require.NoError(t, err)
	defer b.Close()
	g, err := ctx.Capture(func(cs *cuda.Stream) error {
		return fill.Launch(cs, cuda.D1(16), cuda.D1(256), 0, b, uint32(6), uint64(n))
	})
	require.NoError(t, err)
	e, err := g.Instantiate()
	require.NoError(t, err)
	require.NoError(t, g.Close())

	require.NoError(t, m.Close())
	require.ErrorIs(t, fill.Launch(s, cuda.D1(16), cuda.D1(256), 0, b, uint32(1), uint64(n)), cuda.ErrClosed)
	require.NoError(t, e.Launch(s), "the executable still replays the kernel")
	require.NoError(t, s.Synchronize())
	if !cudatest.FakeLoaded() {
		got := make([]uint32, n)
		require.NoError(t, cuda.CopyFromDevice(got, b))
		assert.Equal(t, uint32(6), got[n-1])
	}
	_, err = resource.Reclaim()
	require.NoError(t, err)
	postponed, leases := cuda.ReleasePostponedForTest(m)
	assert.True(t, postponed, "not unloaded while leased (Reclaim ran)")
	assert.Equal(t, 1, leases)
	require.NoError(t, e.Close())
	postponed, leases = cuda.ReleasePostponedForTest(m)
	assert.False(t, postponed, "unloaded after the last lease")
	assert.Zero(t, leases)
	_, err = resource.Reclaim() // the unload, blocking, runs here
	require.NoError(t, err)
}

// A graph built by hand — memset, copy, kernel, child graph, captured work and a
// join — replays in dependency order; the memory its nodes use is leased; a kernel
// node's arguments are set anew in the executable.
func TestGraphByHand(t *testing.T) {
	cudatest.Check(t)
	_, m, s := loadKernels(t)
	ctx := s.Context()
	fill := function(t, m, "fill_u32")
	const n = 1 << 19
	buf := func() *cuda.DeviceBuffer {
		b, err := cuda.AllocFor[uint32](s, n)
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		require.NoError(t, b.Memset32Async(s, 0))
		return b
	}
	a, b, c, c2, d, e := buf(), buf(), buf(), buf(), buf(), buf()

	g, err := ctx.NewGraph()
	require.NoError(t, err)
	defer g.Close()
	n1, err := g.AddMemset(a, 3)
	require.NoError(t, err)
	n2, err := g.AddCopy(b, a, n1)
	require.NoError(t, err)
	nk, err := g.AddKernel(fill, cuda.D1(64), cuda.D1(256), 0, []cuda.Node{n2}, c, uint32(7), uint64(n))
	require.NoError(t, err)
	child, err := ctx.NewGraph()
	require.NoError(t, err)
	_, err = child.AddMemset(d, 9)
	require.NoError(t, err)
	nc, err := g.AddChild(child, nk)
	require.NoError(t, err)
	require.NoError(t, child.Close(), "g copied it")
	leaves, err := g.CaptureInto([]cuda.Node{nc}, func(cs *cuda.Stream) error { return e.Memset32Async(cs, 11) })
	require.NoError(t, err)
	require.Len(t, leaves, 1)
	_, err = g.AddEmpty(append(leaves, n2)...)
	require.NoError(t, err)
	assert.Equal(t, 5, g.Buffers(), "a, b, c, d, e")

	// Bad dependencies and closed memory are refused before any driver call.
	other, err := ctx.NewGraph()
	require.NoError(t, err)
	defer other.Close()
	_, err = other.AddEmpty(n1)
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)
	closed := buf()
	require.NoError(t, closed.Close())
	_, err = g.AddMemset(closed, 1)
	require.ErrorIs(t, err, cuda.ErrClosed)
	_, err = g.AddChild(g)
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)

	x, err := g.Instantiate()
	require.NoError(t, err)
	defer x.Close()
	require.NoError(t, a.Close(), "leased: freed with the graph")
	require.NoError(t, x.Launch(s))
	got := make([]uint32, n)
	check := func(m *cuda.DeviceBuffer, want uint32, kernel bool) {
		t.Helper()
		if kernel && cudatest.FakeLoaded() {
			return // the fake driver runs no kernel code
		}
		require.NoError(t, cuda.CopyFromDevice(got, m))
		assert.Equal(t, want, got[0])
		assert.Equal(t, want, got[n-1])
	}
	check(b, 3, false)
	check(c, 7, true)
	check(d, 9, false)
	check(e, 11, false)

	// The kernel node, retargeted in the executable.
	require.NoError(t, x.SetKernelArgs(nk, c2, uint32(8), uint64(n)))
	require.ErrorIs(t, x.SetKernelArgs(n1, c2), cuda.ErrInvalidArgument, "not a kernel node")
	require.NoError(t, x.Launch(s))
	check(c2, 8, true)
	if cudatest.FakeLoaded() {
		l := cudatest.Launches(0)
		require.NotEmpty(t, l)
		last := l[len(l)-1]
		assert.Equal(t, "fill_u32", last.Func)
		assert.Equal(t, uint64(c2.Ptr()), binary.LittleEndian.Uint64(last.Params))
	}
}

// Event nodes, built by hand and captured: a graph records an event that another
// graph waits for; the graphs lease the event, whose Close (destroy) is postponed
// until they let go of it.
func TestGraphEvents(t *testing.T) {
	cudatest.Check(t)
	ctx, s := cudatest.Stream(t)
	s2, err := ctx.NewStream()
	require.NoError(t, err)
	defer s2.Close()
	const n = 1 << 18
	a, err := cuda.AllocFor[uint32](s, n)
	require.NoError(t, err)
	defer a.Close()
	b, err := cuda.AllocFor[uint32](s, n)
	require.NoError(t, err)
	defer b.Close()
	ev, err := ctx.NewEvent(false)
	require.NoError(t, err)
	ev2, err := ctx.NewEvent(false)
	require.NoError(t, err)

	producer, err := ctx.NewGraph()
	require.NoError(t, err)
	set, err := producer.AddMemset(a, 5)
	require.NoError(t, err)
	_, err = producer.AddEventRecord(ev, set)
	require.NoError(t, err)
	consumer, err := ctx.NewGraph()
	require.NoError(t, err)
	wait, err := consumer.AddEventWait(ev)
	require.NoError(t, err)
	_, err = consumer.AddCopy(b, a, wait)
	require.NoError(t, err)
	// A captured record leases its event too.
	captured, err := ctx.Capture(func(cs *cuda.Stream) error {
		if err := a.Memset32Async(cs, 5); err != nil {
			return err
		}
		return ev2.Record(cs)
	})
	require.NoError(t, err)

	px, err := producer.Instantiate()
	require.NoError(t, err)
	cx, err := consumer.Instantiate()
	require.NoError(t, err)
	kx, err := captured.Instantiate()
	require.NoError(t, err)
	for _, g := range []*cuda.Graph{producer, consumer, captured} {
		require.NoError(t, g.Close())
	}
	require.NoError(t, ev.Close())
	require.NoError(t, ev2.Close())
	require.ErrorIs(t, ev.Record(s), cuda.ErrClosed, "closed for new uses at once")
	require.NoError(t, kx.Launch(s))
	require.NoError(t, px.Launch(s))
	require.NoError(t, cx.Launch(s2))
	got := make([]uint32, n)
	require.NoError(t, s.Synchronize())
	require.NoError(t, s2.Synchronize())
	require.NoError(t, cuda.CopyFromDevice(got, b))
	assert.Equal(t, uint32(5), got[n-1])
	for _, e := range []*cuda.Event{ev, ev2} {
		postponed, leases := cuda.ReleasePostponedForTest(e)
		assert.True(t, postponed, "not destroyed while leased")
		assert.Equal(t, 1+btoi(e == ev), leases, "the executables that record or wait for it")
	}
	for _, x := range []*cuda.Exec{px, cx, kx} {
		require.NoError(t, x.Close())
	}
	for _, e := range []*cuda.Event{ev, ev2} {
		postponed, leases := cuda.ReleasePostponedForTest(e)
		assert.False(t, postponed, "destroyed with the last lease")
		assert.Zero(t, leases)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
