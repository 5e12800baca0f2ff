package cuda_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// checkBed turns the stream checker on for the test, collecting its reports, and
// returns them with busy, which keeps work queued on a stream from completing: on
// the fake the executor is paused for the whole test, on a GPU a kernel spins there.
type checkBed struct {
	reports []cuda.StreamRace
	spin    *cuda.Function
}

func newCheckBed(t *testing.T, m *cuda.Module) *checkBed {
	b := &checkBed{spin: function(t, m, "spin")}
	prev := cuda.SetStreamCheckHandler(func(r cuda.StreamRace) { b.reports = append(b.reports, r) })
	cuda.StreamCheckForTest(true)
	t.Cleanup(func() {
		cuda.StreamCheckForTest(false)
		cuda.SetStreamCheckHandler(prev)
	})
	if cudatest.FakeLoaded() {
		require.NoError(t, cudatest.Pause())
		t.Cleanup(func() { require.NoError(t, cudatest.Resume()) })
	}
	return b
}

// busy keeps s's work from completing until the test ends (on a GPU: half a second, far longer than the checks take).
func (b *checkBed) busy(t *testing.T, s *cuda.Stream) {
	if !cudatest.FakeLoaded() {
		require.NoError(t, b.spin.Launch(s, cuda.D1(1), cuda.D1(1), 0, uint64(500_000_000)))
	}
}

// take returns the reports since the last take.
func (b *checkBed) take() []cuda.StreamRace {
	r := b.reports
	b.reports = nil
	return r
}

// here returns "streamcheck_test.go:N" for the line after this call plus delta.
func here(delta int) string {
	_, file, line, _ := runtime.Caller(1)
	return fmt.Sprintf("%s:%d", file[strings.LastIndex(file, "/")+1:], line+delta)
}

// assertRace asserts one report naming the earlier use's line and the racing one's.
func assertRace(t *testing.T, got []cuda.StreamRace, earlier, used string) {
	t.Helper()
	require.Len(t, got, 1)
	assert.Contains(t, got[0].Earlier, earlier, "the earlier use")
	assert.Contains(t, got[0].Used, used, "the racing use")
	assert.Contains(t, got[0].Error(), earlier)
	assert.Contains(t, got[0].Error(), used)
}

// Every route by which memory reaches the GPU is checked: a race with an earlier
// use on another stream is reported with both call sites, and work ordered by the
// hand-off, an Enqueue of the memory, cuda.In or an event wait is not.
func TestStreamCheckRoutes(t *testing.T) {
	ctx, _ := memSetup(t)
	if cudatest.Strict() {
		cudatest.Check(t)
	}
	_, m, _ := loadKernels(t)
	fill, readSum := function(t, m, "fill_u32"), function(t, m, "read_sum")
	ss := streams(t, ctx, 3)
	alloc := func(n int) *cuda.DeviceBuffer {
		b, err := cuda.AllocFor[uint32](ss[0], n)
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		return b
	}
	h, err := ctx.AllocHost(4096)
	require.NoError(t, err)
	t.Cleanup(func() { h.Close() })
	ev, err := ctx.NewEvent(false)
	require.NoError(t, err)
	t.Cleanup(func() { ev.Close() })
	bed := newCheckBed(t, m)                     // after the cleanups above: they run once the executor resumed
	var take func() []cuda.StreamRace = bed.take // a test of the stream checker: its raw addresses race on purpose

	// Copies and memsets: a raw launch on ss[2] that no use of the memory announced,
	// then the package's operation on ss[1]; announced with an Enqueue of the memory
	// on ss[2] (its event covers the raw launch before it) or an event wait, none.
	t.Run("Copy", func(t *testing.T) {
		b := alloc(1024)
		p := b.Ptr()
		bed.busy(t, ss[2])
		raw := here(1)
		require.NoError(t, fill.Launch(ss[2], cuda.D1(1), cuda.D1(32), 0, p, uint32(1), uint64(1024)))
		copied := here(1)
		require.NoError(t, cuda.CopyAsync(ss[1], h, b))
		assertRace(t, take(), raw, copied)

		b2 := alloc(1024)
		require.NoError(t, fill.Launch(ss[2], cuda.D1(1), cuda.D1(32), 0, b2.Ptr(), uint32(1), uint64(1024)))
		require.NoError(t, ev.Record(ss[2]))
		require.NoError(t, ss[1].WaitEvent(ev))
		require.NoError(t, cuda.CopyAsync(ss[1], h, b2))
		assert.Empty(t, take(), "ordered by an event wait")
	})
	t.Run("Memset", func(t *testing.T) {
		b := alloc(1024)
		bed.busy(t, ss[2])
		raw := here(1)
		require.NoError(t, fill.Launch(ss[2], cuda.D1(1), cuda.D1(32), 0, b.Ptr()+64, uint32(1), uint64(16)))
		set := here(1)
		require.NoError(t, b.Memset32Async(ss[1], 7))
		got := take()
		assertRace(t, got, raw, set)
		assert.Equal(t, b.Ptr()+64, got[0].Addr)

		b2 := alloc(1024)
		require.NoError(t, fill.Launch(ss[2], cuda.D1(1), cuda.D1(32), 0, b2.Ptr(), uint32(1), uint64(1024)))
		require.NoError(t, cuda.Enqueue(ss[2], noRawWork, cuda.Writes(b2)))
		require.NoError(t, b2.Memset32Async(ss[1], 7))
		assert.Empty(t, take(), "ordered by the hand-off after an Enqueue of the memory")
	})
	// A library call: every library queues its calls through cuda.Enqueue with
	// their memory among the uses (cudalib's Pool.Run), which is checked there.
	t.Run("LibraryCall", func(t *testing.T) {
		b := alloc(1024)
		bed.busy(t, ss[2])
		raw := here(1)
		require.NoError(t, fill.Launch(ss[2], cuda.D1(1), cuda.D1(32), 0, b.Ptr(), uint32(1), uint64(1024)))
		call := here(1)
		require.NoError(t, cuda.Enqueue(ss[1], noRawWork, cuda.Reads(b)))
		assertRace(t, take(), raw, call)

		// The other way: the library call first, a raw write on another stream.
		b2 := alloc(1024)
		p := b2.Ptr()
		bed.busy(t, ss[1])
		call = here(1)
		require.NoError(t, cuda.Enqueue(ss[1], noRawWork, cuda.Writes(b2)))
		raw = here(1)
		require.NoError(t, fill.Launch(ss[2], cuda.D1(1), cuda.D1(32), 0, p, uint32(1), uint64(1024)))
		assertRace(t, take(), call, raw)
	})
	// cuda.In: readers on two streams after a write on a third are ordered after
	// it and not with each other; a later write waits for both.
	t.Run("In", func(t *testing.T) {
		b := alloc(1024)
		out := alloc(2)
		bed.busy(t, ss[0])
		require.NoError(t, b.Memset32Async(ss[0], 1))
		require.NoError(t, readSum.Launch(ss[1], cuda.D1(1), cuda.D1(32), 0, cuda.In(b), uint64(1024), uint64(0), out))
		require.NoError(t, readSum.Launch(ss[2], cuda.D1(1), cuda.D1(32), 0, cuda.In(b), uint64(1024), uint64(0), out))
		require.NoError(t, b.Memset32Async(ss[0], 2))
		assert.Empty(t, take())
	})
	// A kernel node built by hand with a raw address is checked when its graph is
	// launched, naming the launch and where the node was added.
	t.Run("GraphNode", func(t *testing.T) {
		b := alloc(1024)
		g, err := ctx.NewGraph()
		require.NoError(t, err)
		defer g.Close()
		added := here(1)
		_, err = g.AddKernel(fill, cuda.D1(1), cuda.D1(32), 0, nil, b.Ptr(), uint32(3), uint64(1024))
		require.NoError(t, err)
		x, err := g.Instantiate()
		require.NoError(t, err)
		defer x.Close()
		bed.busy(t, ss[2])
		set := here(1)
		require.NoError(t, b.Memset32Async(ss[2], 1))
		launched := here(1)
		require.NoError(t, x.Launch(ss[1]))
		got := take()
		assertRace(t, got, set, launched)
		assert.Contains(t, got[0].Used, added, "the node's site")
		assert.Contains(t, got[0].Taken, added)

		// The other way round (the graph's raw write, then a memset), and back,
		// each ordered by an event wait.
		require.NoError(t, ev.Record(ss[1]))
		require.NoError(t, ss[2].WaitEvent(ev))
		require.NoError(t, b.Memset32Async(ss[2], 1))
		require.NoError(t, ev.Record(ss[2]))
		require.NoError(t, ss[1].WaitEvent(ev))
		require.NoError(t, x.Launch(ss[1]))
		assert.Empty(t, take(), "ordered by event waits")
	})
	// A raw address in a batch is checked when the batch is submitted.
	t.Run("Batch", func(t *testing.T) {
		b := alloc(1024)
		var batch cuda.LaunchBatch
		require.NoError(t, batch.Add(fill, cuda.D1(1), cuda.D1(32), 0, b.Ptr(), uint32(3), uint64(1024)))
		bed.busy(t, ss[2])
		set := here(1)
		require.NoError(t, b.Memset32Async(ss[2], 1))
		submitted := here(1)
		require.NoError(t, batch.Submit(ss[1]))
		assertRace(t, take(), set, submitted)
		require.NoError(t, batch.Submit(ss[1]))
		assert.Empty(t, take(), "the same stream")
		require.NoError(t, ev.Record(ss[1]))
		require.NoError(t, ss[2].WaitEvent(ev))
		require.NoError(t, batch.Submit(ss[2]))
		assert.Empty(t, take(), "ordered by an event wait")
	})
	// A peer copy: the package orders the copy after the memory's uses it knows
	// (in both contexts), not after a raw launch nothing announced.
	t.Run("Peer", func(t *testing.T) {
		// The context's Close waits for its work: let the executor run then.
		if cudatest.FakeLoaded() {
			t.Cleanup(func() { require.NoError(t, cudatest.Pause()) })
		}
		own := peerContext(t)
		if cudatest.FakeLoaded() {
			t.Cleanup(func() { require.NoError(t, cudatest.Resume()) })
		}
		s1, err := own.NewStream()
		require.NoError(t, err)
		defer s1.Close()
		d, err := cuda.AllocFor[uint32](s1, 1024)
		require.NoError(t, err)
		defer d.Close()
		b := alloc(1024)
		bed.busy(t, ss[2])
		raw := here(1)
		require.NoError(t, fill.Launch(ss[2], cuda.D1(1), cuda.D1(32), 0, b.Ptr(), uint32(1), uint64(1024)))
		copied := here(1)
		require.NoError(t, cuda.CopyAsync(s1, d, b))
		assertRace(t, take(), raw, copied)

		b2 := alloc(1024)
		require.NoError(t, fill.Launch(ss[2], cuda.D1(1), cuda.D1(32), 0, b2.Ptr(), uint32(1), uint64(1024)))
		require.NoError(t, cuda.Enqueue(ss[2], noRawWork, cuda.Writes(b2)))
		require.NoError(t, cuda.CopyAsync(s1, d, b2))
		assert.Empty(t, take(), "ordered by the hand-off")
		// The copy is recorded on b2's context's default stream, after a wait for
		// the copy: a write of b2 on another stream is ordered after both.
		require.NoError(t, b2.Memset32Async(ss[1], 0))
		assert.Empty(t, take(), "ordered by the hand-off")
	})
}

// On a GPU: a program with a real race (a raw write on one stream, a copy of the
// memory on another that nothing orders after it) is reported with both sites; the
// same program ordered by an event wait is not, and copies what the kernel wrote.
func TestGPUStreamCheck(t *testing.T) {
	_, m, _ := loadKernels(t, cudatest.Kernels)
	ctx := m.Context()
	fill := function(t, m, "fill_u32")
	ss := streams(t, ctx, 2)
	ev, err := ctx.NewEvent(false)
	require.NoError(t, err)
	defer ev.Close()
	bed := newCheckBed(t, m)
	var take func() []cuda.StreamRace = bed.take // a test of the stream checker: its raw addresses race on purpose
	const n = 1 << 16
	run := func(ordered bool) (out []uint32, raw, copied string) {
		b, err := cuda.AllocFor[uint32](ss[0], n)
		require.NoError(t, err)
		defer b.Close()
		require.NoError(t, b.Memset32(0))
		bed.busy(t, ss[1])
		raw = here(1)
		require.NoError(t, fill.Launch(ss[1], cuda.D1(64), cuda.D1(256), 0, b.Ptr(), uint32(9), uint64(n)))
		if ordered {
			require.NoError(t, ev.Record(ss[1]))
			require.NoError(t, ss[0].WaitEvent(ev))
		}
		out = make([]uint32, n)
		copied = here(1)
		require.NoError(t, cuda.CopyFromDeviceAsync(ss[0], out, b))
		require.NoError(t, ss[0].Synchronize())
		require.NoError(t, ss[1].Synchronize())
		return out, raw, copied
	}
	_, raw, copied := run(false)
	assertRace(t, take(), raw, copied)

	out, _, _ := run(true)
	assert.Empty(t, take())
	want := make([]uint32, n)
	for i := range want {
		want[i] = 9 // the CPU's reference: the kernel's fill
	}
	assert.Equal(t, want, out)
}
