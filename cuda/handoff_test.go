package cuda_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requireFake skips tests that order work through the fake driver's pause and delay
// controls (CI); on a GPU the kernel tests of handoff_gpu_test.go cover the same.
func requireFake(t *testing.T) {
	t.Helper()
	if !cudatest.Strict() {
		t.Skip("orders work through the fake driver's pause and delay controls (CI)")
	}
	cudatest.Check(t)
}

// streams returns n new streams of ctx, closed when the test ends.
func streams(t *testing.T, ctx *cuda.Context, n int) []*cuda.Stream {
	out := make([]*cuda.Stream, n)
	for i := range out {
		s, err := ctx.NewStream()
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		out[i] = s
	}
	return out
}

// A buffer used on another stream is ordered after its earlier uses on the device:
// with the fake's executor paused, every operation is queued before any runs, and it
// then interleaves the streams at random, so an unordered read would see stale data.
func TestHandOffOrdersUses(t *testing.T) {
	ctx, _ := memSetup(t)
	requireFake(t)
	ss := streams(t, ctx, 3)
	s1, s2, s3 := ss[0], ss[1], ss[2]
	h2, err := ctx.AllocHost(4096)
	require.NoError(t, err)
	defer h2.Close()
	h3, err := ctx.AllocHost(4096)
	require.NoError(t, err)
	defer h3.Close()
	for i := range 100 {
		b, err := cuda.AllocFor[uint32](s1, 1024)
		require.NoError(t, err)
		require.NoError(t, cudatest.Pause())
		v := uint32(i + 1)
		require.NoError(t, b.Memset32Async(s1, v))    // write on s1
		require.NoError(t, cuda.CopyAsync(s2, h2, b)) // read on s2: after the write
		require.NoError(t, b.Memset32Async(s3, v+1))  // write on s3: after the read
		require.NoError(t, cuda.CopyAsync(s1, h3, b)) // read on s1: after the second write
		require.NoError(t, cudatest.Resume())
		for _, s := range ss {
			require.NoError(t, s.Synchronize())
		}
		assert.Equal(t, v, cuda.HostSlice[uint32](h2)[1023], "round %d: read on s2 after the write on s1", i)
		assert.Equal(t, v+1, cuda.HostSlice[uint32](h3)[0], "round %d: read on s1 after the write on s3", i)
		require.NoError(t, b.Close())
	}
}

// Reads on different streams wait for the last write only, never for each other;
// a write waits for every reader. Counted in hand-off waits, through copies and
// launches with In.
func TestHandOffReadsDoNotSerialize(t *testing.T) {
	ctx, _ := memSetup(t)
	_, m, _ := loadKernels(t)
	readSum := function(t, m, "read_sum")
	ss := streams(t, ctx, 4)
	b, err := cuda.AllocFor[uint32](ss[0], 1024)
	require.NoError(t, err)
	defer b.Close()
	counters := make([]*cuda.DeviceBuffer, 4) // each stream's own, allocated there
	for i := range counters {
		counters[i], err = cuda.AllocFor[uint64](ss[i], 1)
		require.NoError(t, err)
		defer counters[i].Close()
	}
	read := func(i int) int64 {
		before := cuda.HandOffsForTest(ss...)
		require.NoError(t, readSum.Launch(ss[i], cuda.D1(1), cuda.D1(32), 0, cuda.In(b), uint64(1024), uint64(0), counters[i]))
		return cuda.HandOffsForTest(ss...) - before
	}
	require.NoError(t, b.Memset32Async(ss[0], 1))
	assert.EqualValues(t, 1, read(1), "reader 1 waits for the write")
	assert.EqualValues(t, 1, read(2), "reader 2 waits for the write only, not for reader 1")
	assert.EqualValues(t, 1, read(3))
	assert.EqualValues(t, 0, read(1), "a reader that has waited for the write waits for nothing")
	assert.Equal(t, 4, cuda.UsesForTest(b))

	before := cuda.HandOffsForTest(ss...)
	require.NoError(t, b.Memset32Async(ss[2], 2))
	assert.EqualValues(t, 3, cuda.HandOffsForTest(ss...)-before, "a write waits for the writer and the other readers")
	assert.Equal(t, 1, cuda.UsesForTest(b), "then it is the only use")
	for _, s := range ss {
		require.NoError(t, s.Synchronize())
	}
}

// The free of memory read on several streams waits for all of them (the strict fake
// reports a copy from freed memory).
func TestHandOffFreeJoinsReaders(t *testing.T) {
	ctx, _ := memSetup(t)
	requireFake(t)
	ss := streams(t, ctx, 3)
	hs := make([]*cuda.HostBuffer, 3)
	for i := range hs {
		h, err := ctx.AllocHost(1 << 16)
		require.NoError(t, err)
		defer h.Close()
		hs[i] = h
	}
	for i := range 50 {
		b, err := cuda.AllocFor[uint32](ss[0], 1<<14)
		require.NoError(t, err)
		require.NoError(t, cudatest.Pause())
		require.NoError(t, b.Memset32Async(ss[0], uint32(i)))
		for j := range 3 {
			require.NoError(t, cuda.CopyAsync(ss[j], hs[j], b))
		}
		require.NoError(t, b.Close())
		require.NoError(t, cudatest.Resume())
		for j, s := range ss {
			require.NoError(t, s.Synchronize())
			require.Equal(t, uint32(i), cuda.HostSlice[uint32](hs[j])[100], "round %d, reader %d", i, j)
		}
	}
}

// Synchronize waits for every use, and through the hand-off for the work that use
// waited for on another stream.
func TestSynchronizeWaitsAfterHandOff(t *testing.T) {
	ctx, _ := memSetup(t)
	requireFake(t)
	ss := streams(t, ctx, 2)
	for _, how := range []string{"device", "managed"} {
		b, err := cuda.AllocFor[uint32](ss[0], 256)
		require.NoError(t, err)
		mb, err := ctx.AllocManaged(1024)
		require.NoError(t, err)
		require.NoError(t, cudatest.Pause())
		require.NoError(t, cudatest.Delay(uintptr(ss[0].Handle()), 100*time.Millisecond))
		require.NoError(t, b.Memset32Async(ss[0], 7))
		require.NoError(t, cuda.CopyAsync(ss[1], mb, b)) // waits for ss[0] on the device
		start := time.Now()
		require.NoError(t, cudatest.Resume())
		switch how {
		case "device":
			require.NoError(t, b.Synchronize())
		case "managed":
			require.NoError(t, mb.Synchronize())
			assert.Equal(t, uint32(7), cuda.HostSlice[uint32](mb)[255], "unified memory is synchronized before the host reads it")
		}
		assert.GreaterOrEqual(t, time.Since(start), 80*time.Millisecond, "%s waited for the original stream", how)
		require.NoError(t, b.Close())
		require.NoError(t, mb.Close())
	}
}

// Enqueue orders raw work both ways: the stream waits for the earlier write, and a
// later use elsewhere waits for the stream.
func TestEnqueueOrdersRawWork(t *testing.T) {
	ctx, _ := memSetup(t)
	ss := streams(t, ctx, 3)
	b, err := cuda.AllocFor[uint32](ss[0], 256)
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, b.Memset32Async(ss[0], 1))

	before := cuda.HandOffsForTest(ss...)
	require.NoError(t, cuda.Enqueue(ss[1], noRawWork, cuda.Reads(b)))
	assert.EqualValues(t, 1, cuda.HandOffsForTest(ss...)-before, "a raw read waits for the write")
	require.NoError(t, cuda.Enqueue(ss[2], noRawWork, cuda.Writes(b)))
	assert.EqualValues(t, 3, cuda.HandOffsForTest(ss...)-before, "a raw write waits for the writer and the reader")
	require.NoError(t, b.Memset32Async(ss[0], 2))
	assert.EqualValues(t, 4, cuda.HandOffsForTest(ss...)-before, "later uses wait for the raw write")

	var nb *cuda.DeviceBuffer
	require.ErrorIs(t, cuda.Enqueue(ss[0], noRawWork, cuda.Reads(nb)), cuda.ErrInvalidArgument)
	require.ErrorIs(t, nb.Synchronize(), cuda.ErrInvalidArgument)
	for _, s := range ss {
		require.NoError(t, s.Synchronize())
	}
}

// The free after a consumer's read runs on the consumer's stream, ordered after the
// producer through the consumer's wait (the strict fake reports a free before a
// use).
func TestHandOffFreeAfterConsumer(t *testing.T) {
	ctx, _ := memSetup(t)
	requireFake(t)
	ss := streams(t, ctx, 2)
	h, err := ctx.AllocHost(4096)
	require.NoError(t, err)
	defer h.Close()
	for i := range 50 {
		b, err := cuda.AllocFor[uint32](ss[0], 1024)
		require.NoError(t, err)
		require.NoError(t, cudatest.Pause())
		require.NoError(t, cudatest.Delay(uintptr(ss[0].Handle()), time.Millisecond))
		require.NoError(t, b.Memset32Async(ss[0], uint32(i)))
		require.NoError(t, cuda.CopyAsync(ss[1], h, b))
		before := cuda.DisposalWaitsForTest(ctx)
		require.NoError(t, b.Close())
		assert.Zero(t, cuda.DisposalWaitsForTest(ctx)-before, "no join: freed on the consumer's stream")
		require.NoError(t, cudatest.Resume())
		require.NoError(t, ss[1].Synchronize())
		require.Equal(t, uint32(i), cuda.HostSlice[uint32](h)[1023])
	}
}

// The stream checker reports an address from Ptr, taken while work on it was
// outstanding, that is launched on another stream that nothing ordered — with both
// call sites — and nothing once an Enqueue of the memory ordered that stream, or
// after Synchronize.
func TestStreamCheck(t *testing.T) {
	ctx, _ := memSetup(t)
	if cudatest.Strict() {
		cudatest.Check(t)
	}
	_, m, _ := loadKernels(t)
	fill, spin := function(t, m, "fill_u32"), function(t, m, "spin")
	ss := streams(t, ctx, 2)
	var reports []cuda.StreamRace
	prev := cuda.SetStreamCheckHandler(func(r cuda.StreamRace) { reports = append(reports, r) })
	defer cuda.SetStreamCheckHandler(prev)
	cuda.StreamCheckForTest(true)
	defer cuda.StreamCheckForTest(false)

	b, err := cuda.AllocFor[uint32](ss[0], 1024)
	require.NoError(t, err)
	defer b.Close()
	// Outstanding work: the fake's executor is paused, or a kernel spins on a GPU.
	if cudatest.FakeLoaded() {
		require.NoError(t, cudatest.Pause())
	} else {
		require.NoError(t, spin.Launch(ss[0], cuda.D1(1), cuda.D1(1), 0, uint64(200_000_000)))
	}
	require.NoError(t, b.Memset32Async(ss[0], 1))
	p := b.Ptr()
	require.NoError(t, fill.Launch(ss[0], cuda.D1(1), cuda.D1(32), 0, p, uint32(2), uint64(1024)))
	assert.Empty(t, reports, "the same stream is ordered")
	require.NoError(t, fill.Launch(ss[1], cuda.D1(1), cuda.D1(32), 0, p+64, uint32(2), uint64(16)))
	require.Len(t, reports, 1, "another stream that nothing ordered")
	r := reports[0]
	assert.Equal(t, p+64, r.Addr)
	assert.Contains(t, r.Taken, "handoff_test.go")
	assert.Contains(t, r.Used, "handoff_test.go")
	assert.NotEqual(t, r.Taken, r.Used)
	assert.Contains(t, r.Error(), "with no wait ordering the two")
	assert.Contains(t, r.Earlier, "handoff_test.go")

	require.NoError(t, cuda.Enqueue(ss[1], noRawWork, cuda.Writes(b)))
	require.NoError(t, fill.Launch(ss[1], cuda.D1(1), cuda.D1(32), 0, p, uint32(2), uint64(1024)))
	assert.Len(t, reports, 1, "ordered by Enqueue")
	if cudatest.FakeLoaded() {
		require.NoError(t, cudatest.Resume())
	}

	// After Synchronize nothing is outstanding: nothing to report.
	require.NoError(t, b.Memset32Async(ss[0], 3))
	require.NoError(t, b.Synchronize())
	fp := b.Ptr()
	c2, err := cuda.AllocFor[uint32](ss[1], 16)
	require.NoError(t, err)
	defer c2.Close()
	require.NoError(t, fill.Launch(ss[1], cuda.D1(1), cuda.D1(32), 0, fp, uint32(2), uint64(1024)))
	assert.Len(t, reports, 1)
	for _, s := range ss {
		require.NoError(t, s.Synchronize())
	}
}

// Launches handing buffers off in opposite directions while both streams close:
// launchAfter read-locks both streams, in address order, so this never deadlocks.
func TestHandOffOppositeDirectionsWithClose(t *testing.T) {
	ctx, _ := memSetup(t)
	_, m, s0 := loadKernels(t)
	fill := function(t, m, "fill_u32")
	n := 2000
	if testing.Short() {
		n = 200
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range n {
			ss := make([]*cuda.Stream, 2)
			bs := make([]*cuda.DeviceBuffer, 2)
			for i := range ss {
				var err error
				ss[i], err = ctx.NewStream()
				require.NoError(t, err)
				bs[i], err = cuda.AllocFor[uint32](ss[i], 64)
				require.NoError(t, err)
			}
			var wg sync.WaitGroup
			for i := range 2 {
				wg.Go(func() { // bs[i] was last used on ss[i]: hand it to the other stream
					err := fill.Launch(ss[1-i], cuda.D1(1), cuda.D1(64), 0, bs[i], uint32(i), uint64(64))
					if err != nil {
						assert.ErrorIs(t, err, cuda.ErrClosed)
					}
				})
				wg.Go(func() { assert.NoError(t, ss[i].Close()) })
			}
			wg.Wait()
			for _, b := range bs {
				require.NoError(t, b.Close())
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("deadlock: launches handing off in opposite directions against Close")
	}
	require.NoError(t, s0.Synchronize())
}

// Launches that use a buffer without holding it (its one use is on their stream,
// memBase.fastUse) race a launch handing it to another stream and its Close: the
// free runs after every launch that was queued, in whatever order the fake's
// executor interleaves the streams (a use after free is a violation).
func TestFastUseRacesHandOffAndClose(t *testing.T) {
	ctx, _ := memSetup(t)
	requireFake(t)
	_, m, _ := loadKernels(t)
	fill := function(t, m, "fill_u32")
	ss := streams(t, ctx, 2)
	s1, s2 := ss[0], ss[1]
	rounds := 300
	if testing.Short() {
		rounds = 50
	}
	for i := range rounds {
		require.NoError(t, cudatest.SetSeed(int64(i)))
		b, err := cuda.AllocFor[uint32](s1, 64)
		require.NoError(t, err)
		require.NoError(t, cudatest.Pause())
		started := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { // on s1, b's one use: the launches hold nothing
			close(started)
			for range 1000 {
				if err := fill.Launch(s1, cuda.D1(1), cuda.D1(64), 0, b, uint32(1), uint64(64)); err != nil {
					assert.ErrorIs(t, err, cuda.ErrClosed)
					return
				}
			}
		})
		wg.Go(func() {
			<-started
			assert.NoError(t, fill.Launch(s2, cuda.D1(1), cuda.D1(64), 0, b, uint32(2), uint64(64)))
			assert.NoError(t, b.Close())
		})
		wg.Wait()
		require.NoError(t, cudatest.Resume())
		for _, s := range ss {
			require.NoError(t, s.Synchronize())
		}
	}
}

// Every host wait for the GPU has a form that takes a context.Context: with the GPU
// held (the fake's executor paused), each returns the context's error once it ends,
// and waits to the end once the GPU goes on.
func TestSynchronizeContextEnds(t *testing.T) {
	ctx, _ := memSetup(t)
	requireFake(t)
	s := streams(t, ctx, 1)[0]
	b, err := cuda.AllocFor[uint32](s, 256)
	require.NoError(t, err)
	defer b.Close()
	ev, err := ctx.NewEvent(false)
	require.NoError(t, err)
	defer ev.Close()
	require.NoError(t, cudatest.Pause())
	resumed := false
	defer func() {
		if !resumed {
			_ = cudatest.Resume()
		}
	}()
	require.NoError(t, b.Memset32Async(s, 1))
	require.NoError(t, ev.Record(s))
	waits := map[string]func(context.Context) error{
		"Stream":       s.SynchronizeContext,
		"Event":        ev.SynchronizeContext,
		"Context":      ctx.SynchronizeContext,
		"DeviceBuffer": b.SynchronizeContext,
	}
	for name, wait := range waits {
		c, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		err := wait(c)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded, name)
	}
	require.NoError(t, cudatest.Resume())
	resumed = true
	for name, wait := range waits {
		require.NoError(t, wait(context.Background()), name)
	}
}
