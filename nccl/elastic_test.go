package nccl_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/dl"
	"github.com/gocuda/gocuda/nccl"
	"github.com/gocuda/gocuda/nccl/ncclraw"
	"github.com/gocuda/gocuda/resource"
)

// Elastic communicators on the fake NCCL: ranks in goroutines join through the real
// TCP rendezvous on 127.0.0.1, watched (Liveness); a rank dies (its watch ends
// without a goodbye, and the fake makes the others' collectives wait for it); the
// survivors' waits fail with ErrRankGone, they shrink, and go on.

// joinRanks joins n ranks (every one on device 0: the fake does not care) through a
// TCP rendezvous with the given liveness (0: no watch). The ranks still in the slice
// are aborted when the test ends.
func joinRanks(t *testing.T, n int, liveness time.Duration) []*nccl.Comm {
	t.Helper()
	comms := make([]*nccl.Comm, n)
	errs := make([]error, n)
	ln := listen(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			rv := &nccl.TCPRendezvous{Addr: ln.Addr().String(), RetryInterval: 5 * time.Millisecond, Liveness: liveness}
			if r == 0 {
				rv.Listener = ln
			}
			comms[r], errs[r] = nccl.Join(ctx, rv, r, n, 0)
		})
	}
	wg.Wait()
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
		assert.Equal(t, liveness > 0, nccl.Watched(comms[r]))
	}
	t.Cleanup(func() {
		for _, c := range comms {
			if c != nil {
				_ = c.Abort()
			}
		}
	})
	return comms
}

// rankIO is a rank's stream and buffer.
type rankIO struct {
	s *cuda.Stream
	b *cuda.DeviceBuffer
}

func newRankIO(t *testing.T, c *nccl.Comm) rankIO {
	t.Helper()
	s, err := c.Context().NewStream()
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	b, err := cuda.AllocFor[float32](s, 16)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return rankIO{s, b}
}

// step is a training step's communication: an all-reduce, and the wait for it.
func (io rankIO) step(ctx context.Context, c *nccl.Comm) error {
	if err := nccl.AllReduce[float32](c, io.s, io.b, io.b, nccl.Sum); err != nil {
		return err
	}
	return c.Wait(ctx, io.s)
}

// kill makes rank die as its process would: its watch ends without a goodbye, and
// NCCL's other ranks wait for it.
func kill(f *nccl.FakeNCCL, c *nccl.Comm) {
	f.Kill(c.Handle())
	nccl.Die(c)
}

// eachRank runs f for the ranks concurrently.
func eachRank(ranks []int, f func(r int)) {
	var wg sync.WaitGroup
	for _, r := range ranks {
		wg.Go(func() { f(r) })
	}
	wg.Wait()
}

// TestElasticShrinkFake: rank 1 of 4 dies while the others wait for their step's
// work (the GPU's executor paused: the work stays pending, as a collective whose
// peer is gone does); their Wait fails with a *RankGoneError naming rank 1 within
// the liveness, the communicator kept; they shrink (NCCL_SHRINK_ABORT, rank 1
// excluded), are renumbered 0, 1, 2, and go on; the parents are aborted. The new
// communicator is watched: when its rank 2 (rank 3 before) dies, the others learn
// it in its numbering.
func TestElasticShrinkFake(t *testing.T) {
	cudatest.Require(t)
	f := nccl.InstallFakeNCCL(t)
	const liveness = 2 * time.Second
	comms := joinRanks(t, 4, liveness)
	ios := make([]rankIO, 4)
	for r, c := range comms {
		ios[r] = newRankIO(t, c)
		require.NoError(t, ios[r].step(t.Context(), c), "rank %d", r)
	}
	survivors := []int{0, 2, 3}
	parents := make([]ncclraw.NcclComm, 4)
	for r, c := range comms {
		parents[r] = c.Handle()
	}

	// The step's work is pending when rank 1 dies.
	require.NoError(t, cudatest.Pause())
	t.Cleanup(func() { _ = cudatest.Resume() })
	for _, r := range survivors {
		require.NoError(t, cuda.CopyAsync(ios[r].s, ios[r].b, ios[r].b))
		require.NoError(t, nccl.AllReduce[float32](comms[r], ios[r].s, ios[r].b, ios[r].b, nccl.Sum))
	}
	errs := make([]error, 4)
	took := make([]time.Duration, 4)
	var start time.Time
	var started sync.WaitGroup
	started.Add(1)
	var wg sync.WaitGroup
	for _, r := range survivors {
		wg.Go(func() {
			started.Wait()
			errs[r] = comms[r].Wait(t.Context(), ios[r].s)
			took[r] = time.Since(start)
		})
	}
	time.Sleep(20 * time.Millisecond)
	start = time.Now()
	started.Done()
	kill(f, comms[1])
	wg.Wait()
	require.NoError(t, cudatest.Resume())
	for _, r := range survivors {
		var gone *nccl.RankGoneError
		require.ErrorAs(t, errs[r], &gone, "rank %d", r)
		assert.ErrorIs(t, errs[r], nccl.ErrRankGone)
		assert.NotErrorIs(t, errs[r], nccl.ErrAborted, "kept for Shrink")
		assert.Equal(t, []int{1}, gone.Ranks)
		assert.Equal(t, r, gone.Rank)
		assert.Equal(t, 4, gone.Size)
		assert.Less(t, took[r], liveness, "rank %d: within the bound", r)
		t.Logf("rank %d learned of rank 1's death in %v", r, took[r])
		assert.True(t, f.Live(parents[r]), "not aborted")
		assert.ErrorIs(t, comms[r].Err(), nccl.ErrRankGone)
	}
	// A collective on a communicator that lost a rank fails before NCCL.
	calls, _, _ := f.Snapshot()
	err := nccl.AllReduce[float32](comms[0], ios[0].s, ios[0].b, ios[0].b, nccl.Sum)
	assert.ErrorIs(t, err, nccl.ErrRankGone)
	after, _, _ := f.Snapshot()
	assert.Len(t, after, len(calls))

	// The survivors shrink.
	shrunk := make([]*nccl.Comm, 4)
	eachRank(survivors, func(r int) {
		var gone *nccl.RankGoneError
		require.ErrorAs(t, errs[r], &gone)
		shrunk[r], errs[r] = comms[r].Shrink(t.Context(), gone.Ranks)
	})
	for i, r := range survivors {
		require.NoError(t, errs[r], "rank %d", r)
		c := shrunk[r]
		t.Cleanup(func() { _ = c.Abort() })
		assert.Equal(t, i, c.Rank(), "rank %d renumbered", r)
		assert.Equal(t, 3, c.Size())
		assert.Equal(t, nccl.RankAfter(r, []int{1}), c.Rank())
		assert.True(t, nccl.Watched(c))
		assert.False(t, f.Live(parents[r]), "rank %d: the parent is aborted", r)
		assert.ErrorIs(t, comms[r].Close(), cuda.ErrClosed)
	}
	shrinks := f.ShrinksSnapshot()
	require.Len(t, shrinks, 3)
	for _, sh := range shrinks {
		assert.Equal(t, []int{1}, sh.Exclude)
		assert.Equal(t, int32(ncclraw.NCCL_SHRINK_ABORT), sh.Flags)
		assert.Equal(t, int32(0), sh.Blocking, "non-blocking")
		assert.Equal(t, 3, sh.Size)
		assert.Contains(t, parents, sh.Parent)
	}
	_, aborted, _ := f.Snapshot()
	for _, r := range survivors {
		assert.Contains(t, aborted, parents[r])
	}

	// They go on: a step on the new communicator.
	eachRank(survivors, func(r int) { errs[r] = ios[r].step(t.Context(), shrunk[r]) })
	for _, r := range survivors {
		require.NoError(t, errs[r], "rank %d", r)
		assert.Len(t, f.CallsOn(shrunk[r].Handle()), 1)
	}

	// The new communicator's rank 2 (rank 3 of the job) dies: the others learn it in
	// the new numbering.
	kill(f, shrunk[3])
	eachRank([]int{0, 2}, func(r int) { errs[r] = ios[r].step(t.Context(), shrunk[r]) })
	for _, r := range []int{0, 2} {
		var gone *nccl.RankGoneError
		require.ErrorAs(t, errs[r], &gone, "rank %d", r)
		assert.Equal(t, []int{2}, gone.Ranks)
		assert.Equal(t, 3, gone.Size)
	}
	// Closing a communicator that lost a rank aborts it: its pending work would
	// wait for ever.
	finalized := f.Finalized
	h := shrunk[0].Handle()
	require.NoError(t, shrunk[0].Close())
	_, aborted, _ = f.Snapshot()
	assert.Contains(t, aborted, h)
	assert.Equal(t, finalized, f.Finalized)
}

// TestElasticRank0Dies: rank 0 is the rendezvous's hub; when it dies the others see
// its connection end, and its collectives' waits (here the collective itself, which
// the fake keeps in progress) fail with ErrRankGone; they shrink without it.
func TestElasticRank0Dies(t *testing.T) {
	cudatest.Require(t)
	f := nccl.InstallFakeNCCL(t)
	comms := joinRanks(t, 3, 5*time.Second)
	ios := make([]rankIO, 3)
	for r, c := range comms {
		ios[r] = newRankIO(t, c)
	}
	kill(f, comms[0])
	start := time.Now()
	errs := make([]error, 3)
	eachRank([]int{1, 2}, func(r int) { errs[r] = ios[r].step(t.Context(), comms[r]) })
	assert.Less(t, time.Since(start), time.Second)
	shrunk := make([]*nccl.Comm, 3)
	eachRank([]int{1, 2}, func(r int) {
		var gone *nccl.RankGoneError
		if assert.ErrorAs(t, errs[r], &gone, "rank %d", r) {
			assert.Equal(t, []int{0}, gone.Ranks)
			shrunk[r], errs[r] = comms[r].Shrink(t.Context(), gone.Ranks)
		}
	})
	for _, r := range []int{1, 2} {
		require.NoError(t, errs[r], "rank %d", r)
		assert.Equal(t, r-1, shrunk[r].Rank())
		assert.Equal(t, 2, shrunk[r].Size())
		require.NoError(t, ios[r].step(t.Context(), shrunk[r]))
		require.NoError(t, shrunk[r].Close())
	}
}

// TestElasticSettles: NCCL reports the dead peer (ncclRemoteError) before the watch
// does: the wait gives the watch its bound, and the error is the *RankGoneError,
// carrying NCCL's result, the communicator kept for Shrink. Where the watch names
// nobody within its bound, the *AsyncError aborts the communicator, as without a
// watch.
func TestElasticSettles(t *testing.T) {
	cudatest.Require(t)
	t.Run("named", func(t *testing.T) {
		f := nccl.InstallFakeNCCL(t)
		comms := joinRanks(t, 3, 2*time.Second)
		io := newRankIO(t, comms[0])
		f.Lock()
		f.DeadPeer = ncclraw.NcclRemoteError
		f.Unlock()
		f.Kill(comms[2].Handle()) // NCCL knows at once
		go func() {
			time.Sleep(100 * time.Millisecond)
			nccl.Die(comms[2]) // the watch a moment later
		}()
		err := comms[0].Wait(t.Context(), io.s)
		var gone *nccl.RankGoneError
		require.ErrorAs(t, err, &gone)
		assert.Equal(t, []int{2}, gone.Ranks)
		assert.Equal(t, ncclraw.NcclRemoteError, gone.Result)
		assert.ErrorIs(t, err, ncclraw.ErrRemoteError)
		assert.NotErrorIs(t, err, nccl.ErrAborted)
		assert.True(t, f.Live(comms[0].Handle()))
		eachRank([]int{0, 1}, func(r int) {
			c, err := comms[r].Shrink(t.Context(), []int{2})
			if assert.NoError(t, err) {
				assert.NoError(t, c.Close())
			}
		})
	})
	t.Run("unnamed", func(t *testing.T) {
		f := nccl.InstallFakeNCCL(t)
		const liveness = 300 * time.Millisecond
		comms := joinRanks(t, 3, liveness)
		io := newRankIO(t, comms[0])
		h := comms[0].Handle()
		f.Lock()
		f.DeadPeer = ncclraw.NcclRemoteError
		f.Unlock()
		f.Kill(comms[2].Handle()) // its watch goes on: a network fault, say
		start := time.Now()
		err := comms[0].Wait(t.Context(), io.s)
		var ae *nccl.AsyncError
		require.ErrorAs(t, err, &ae)
		assert.ErrorIs(t, err, nccl.ErrAborted)
		assert.GreaterOrEqual(t, time.Since(start), liveness)
		assert.False(t, f.Live(h))
		assert.Less(t, time.Since(start), liveness+time.Second)
	})
}

// TestJoinInitRankGone: a rank that dies between the rendezvous and the end of the
// init makes the others' Join fail with ErrRankGone at once, not at their deadline.
func TestJoinInitRankGone(t *testing.T) {
	cudatest.Require(t)
	f := nccl.InstallFakeNCCL(t)
	f.InitPolls = 1 << 30 // the init waits for every rank
	ln := listen(t)
	addr := ln.Addr().String()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	errs := make([]error, 3)
	start := time.Now()
	eachRank([]int{0, 1, 2}, func(r int) {
		rv := &nccl.TCPRendezvous{Addr: addr, RetryInterval: 5 * time.Millisecond, Liveness: 5 * time.Second}
		if r == 0 {
			rv.Listener = ln
		}
		if r == 2 { // the rendezvous, then death
			m := nccl.NewMembership(2, 3)
			_, _, err := rv.ExchangeIDWatching(ctx, 2, 3, nil, m)
			assert.NoError(t, err)
			time.Sleep(50 * time.Millisecond)
			m.Close(false)
			return
		}
		_, errs[r] = nccl.Join(ctx, rv, r, 3, 0)
	})
	for _, r := range []int{0, 1} {
		assert.ErrorIs(t, errs[r], nccl.ErrRankGone, "rank %d", r)
	}
	assert.Less(t, time.Since(start), 5*time.Second)
	_, aborted, _ := f.Snapshot()
	assert.Len(t, aborted, 2, "the inits are aborted")
}

// TestShrinkArguments: excluded ranks that are none, twice, out of range or the
// caller itself, a nil communicator, and a rank gone that is not excluded are
// invalid arguments, before NCCL is called; a closed communicator's error matches
// cuda.ErrClosed. A healthy communicator is shrunk with NCCL_SHRINK_DEFAULT and
// stays open.
func TestShrinkArguments(t *testing.T) {
	cudatest.Require(t)
	f := nccl.InstallFakeNCCL(t)
	comms := joinRanks(t, 3, 0)
	ctx := t.Context()
	for _, excl := range [][]int{nil, {}, {3}, {-1}, {1, 1}, {0}, {2, 0}} {
		_, err := comms[0].Shrink(ctx, excl)
		assert.ErrorIs(t, err, cuda.ErrInvalidArgument, "%v", excl)
	}
	_, err := (*nccl.Comm)(nil).Shrink(ctx, []int{1})
	assert.ErrorIs(t, err, cuda.ErrInvalidArgument)
	_, err = (*nccl.Comm)(nil).Rebuild(ctx, &nccl.ConnRendezvous{}, nil)
	assert.ErrorIs(t, err, cuda.ErrInvalidArgument)
	_, err = comms[1].Rebuild(ctx, &nccl.ConnRendezvous{}, []int{1})
	assert.ErrorIs(t, err, cuda.ErrInvalidArgument)
	assert.Empty(t, f.ShrinksSnapshot())

	// Healthy: NCCL_SHRINK_DEFAULT, the parent stays open and usable.
	io := newRankIO(t, comms[0])
	parent := comms[0].Handle()
	c, err := comms[0].Shrink(ctx, []int{2, 1})
	require.NoError(t, err)
	shrinks := f.ShrinksSnapshot()
	require.Len(t, shrinks, 1)
	assert.Equal(t, int32(ncclraw.NCCL_SHRINK_DEFAULT), shrinks[0].Flags)
	assert.Equal(t, []int{1, 2}, shrinks[0].Exclude)
	assert.Equal(t, 0, c.Rank())
	assert.Equal(t, 1, c.Size())
	assert.True(t, f.Live(parent))
	require.NoError(t, io.step(ctx, comms[0]))
	require.NoError(t, io.step(ctx, c))
	require.NoError(t, c.Close())
	require.NoError(t, comms[0].Close())
	_, err = comms[0].Shrink(ctx, []int{1})
	assert.ErrorIs(t, err, cuda.ErrClosed)
	assert.Len(t, f.ShrinksSnapshot(), 1)

	// A rank gone must be excluded.
	watched := joinRanks(t, 3, 5*time.Second)
	kill(f, watched[2])
	for {
		if errors.Is(watched[0].Err(), nccl.ErrRankGone) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	_, err = watched[0].Shrink(ctx, []int{1})
	assert.ErrorIs(t, err, cuda.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "rank 2 is gone")
	assert.Len(t, f.ShrinksSnapshot(), 1)

	assert.Equal(t, -1, nccl.RankAfter(2, []int{2}))
	assert.Equal(t, 1, nccl.RankAfter(3, []int{0, 2, 5}))
}

// TestShrinkMissingSymbol: with an NCCL older than 2.27 (no ncclCommShrink), Shrink
// returns the raw layer's *dl.SymbolError, and the communicator is left as it was;
// Rebuild, through a new rendezvous, is the way then.
func TestShrinkMissingSymbol(t *testing.T) {
	cudatest.Require(t)
	f := nccl.InstallFakeNCCL(t)
	f.FailShrink = &dl.SymbolError{Library: "nccl", Soname: ncclraw.Soname, Path: "/usr/lib/libnccl.so.2", Symbol: "ncclCommShrink",
		Err: "undefined symbol: ncclCommShrink"}
	comms := joinRanks(t, 3, 5*time.Second)
	kill(f, comms[1])
	errs := make([]error, 3)
	ios := make([]rankIO, 3)
	for _, r := range []int{0, 2} {
		ios[r] = newRankIO(t, comms[r])
	}
	eachRank([]int{0, 2}, func(r int) { errs[r] = ios[r].step(t.Context(), comms[r]) })
	for _, r := range []int{0, 2} {
		require.ErrorIs(t, errs[r], nccl.ErrRankGone)
		_, err := comms[r].Shrink(t.Context(), []int{1})
		var se *dl.SymbolError
		require.ErrorAs(t, err, &se)
		assert.ErrorIs(t, err, dl.ErrSymbolNotFound)
		assert.Equal(t, "ncclCommShrink", se.Symbol)
		assert.True(t, f.Live(comms[r].Handle()), "left as it was")
	}

	// Rebuild through a new rendezvous at the new rank 0 (rank 0 still).
	ln := listen(t)
	rebuilt := make([]*nccl.Comm, 3)
	old := []ncclraw.NcclComm{comms[0].Handle(), 0, comms[2].Handle()}
	inits := len(f.Inits)
	eachRank([]int{0, 2}, func(r int) {
		rv := &nccl.TCPRendezvous{Addr: ln.Addr().String(), RetryInterval: 5 * time.Millisecond, Liveness: 5 * time.Second}
		if nccl.RankAfter(r, []int{1}) == 0 {
			rv.Listener = ln
		}
		rebuilt[r], errs[r] = comms[r].Rebuild(t.Context(), rv, []int{1})
	})
	for _, r := range []int{0, 2} {
		require.NoError(t, errs[r], "rank %d", r)
		assert.Equal(t, nccl.RankAfter(r, []int{1}), rebuilt[r].Rank())
		assert.Equal(t, 2, rebuilt[r].Size())
		assert.True(t, nccl.Watched(rebuilt[r]))
		assert.False(t, f.Live(old[r]), "the failed communicator is aborted")
	}
	require.Len(t, f.Inits, inits+2)
	for _, in := range f.Inits[inits:] {
		assert.Equal(t, 2, in.NRanks)
	}
	eachRank([]int{0, 2}, func(r int) { errs[r] = ios[r].step(t.Context(), rebuilt[r]) })
	for _, r := range []int{0, 2} {
		require.NoError(t, errs[r])
		require.NoError(t, rebuilt[r].Close())
	}
}

// TestShrinkConcurrentRelease: Close or Abort from another goroutine during Shrink
// never hands NCCL a released communicator (the fake fails the test on a release
// during ncclCommShrink, and on a new communicator polled while it initializes
// after its parent's release): they wait for Shrink, or Shrink sees them and fails
// with cuda.ErrClosed.
func TestShrinkConcurrentRelease(t *testing.T) {
	cudatest.Require(t)
	f := nccl.InstallFakeNCCL(t)
	f.InitPolls = 20
	for i := range 30 {
		comms := joinRanks(t, 2, 0)
		var child *nccl.Comm
		var shrinkErr, releaseErr error
		var wg sync.WaitGroup
		wg.Go(func() { child, shrinkErr = comms[0].Shrink(t.Context(), []int{1}) })
		wg.Go(func() {
			if i%2 == 0 {
				releaseErr = comms[0].Close()
			} else {
				releaseErr = comms[0].Abort()
			}
		})
		wg.Wait()
		assert.NoError(t, releaseErr)
		if shrinkErr != nil {
			assert.ErrorIs(t, shrinkErr, cuda.ErrClosed, "%d", i)
			continue
		}
		require.NoError(t, child.Close())
	}
}

// TestShrinkEnds: a shrink whose new communicator never gets ready (a rank it keeps
// is dead) ends with its context, or with an Abort of the parent; the new
// communicator is aborted, the parent left as it was (for a deadline) or aborted.
func TestShrinkEnds(t *testing.T) {
	cudatest.Require(t)
	f := nccl.InstallFakeNCCL(t)
	comms := joinRanks(t, 3, 0)
	f.Kill(comms[2].Handle()) // NCCL's other ranks would wait for it

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err := comms[0].Shrink(ctx, []int{1})
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.True(t, f.Live(comms[0].Handle()))
	shrinks := f.ShrinksSnapshot()
	require.Len(t, shrinks, 1)
	assert.False(t, f.Live(shrinks[0].New), "the new communicator is aborted")

	done := make(chan error, 1)
	go func() { _, err := comms[0].Shrink(t.Context(), []int{1}); done <- err }()
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, comms[0].Abort())
	select {
	case err := <-done:
		assert.ErrorIs(t, err, nccl.ErrAborted)
	case <-time.After(5 * time.Second):
		t.Fatal("Shrink still waits after the parent's Abort")
	}
	shrinks = f.ShrinksSnapshot()
	require.Len(t, shrinks, 2)
	assert.False(t, f.Live(shrinks[1].New))
}

// TestDroppedWatchedComm: a watched communicator dropped without Close or Abort ends
// its rank's watch once collected (without a goodbye: the others take the rank for
// gone), with no NCCL call on the finalizer goroutine; Reclaim releases it.
func TestDroppedWatchedComm(t *testing.T) {
	cudatest.Require(t)
	f := nccl.InstallFakeNCCL(t)
	comms := joinRanks(t, 2, 5*time.Second)
	h := comms[1].Handle()
	comms[1] = nil
	deadline := time.Now().Add(10 * time.Second)
	for !errors.Is(comms[0].Err(), nccl.ErrRankGone) {
		require.True(t, time.Now().Before(deadline), "rank 0 never learned that rank 1 is gone")
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	assert.True(t, f.Live(h), "held for Reclaim")
	_, err := resource.Reclaim()
	require.NoError(t, err)
	assert.False(t, f.Live(h))
}

// TestCleanCloseIsNotGone: ranks that close their communicators at the end of the
// job say goodbye: the others do not take them for gone.
func TestCleanCloseIsNotGone(t *testing.T) {
	cudatest.Require(t)
	nccl.InstallFakeNCCL(t)
	comms := joinRanks(t, 3, 5*time.Second)
	require.NoError(t, comms[2].Close())
	require.NoError(t, comms[1].Close())
	time.Sleep(200 * time.Millisecond)
	assert.NoError(t, comms[0].Err())
	require.NoError(t, comms[0].Close())
}
