package nccl_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/nccl"
)

// The membership watch of TCPRendezvous, without NCCL: ranks in goroutines join
// with ExchangeIDWatching and their own Membership, over TCP on 127.0.0.1.

// watchRanks joins nranks ranks with a watch of the given liveness (per rank, so
// that a test can make them differ) and returns their memberships and errors.
func watchRanks(t *testing.T, nranks int, liveness func(rank int) time.Duration, secret []byte) ([]*nccl.Membership, []error) {
	t.Helper()
	ln := listen(t)
	addr := ln.Addr().String()
	_, newID, _ := fakeID(7)
	ms := make([]*nccl.Membership, nranks)
	errs := make([]error, nranks)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for r := range nranks {
		ms[r] = nccl.NewMembership(r, nranks)
		wg.Go(func() {
			rv := &nccl.TCPRendezvous{Addr: addr, RetryInterval: 5 * time.Millisecond, Liveness: liveness(r), Secret: secret}
			if r == 0 {
				rv.Listener = ln
			}
			var bound time.Duration
			_, bound, errs[r] = rv.ExchangeIDWatching(ctx, r, nranks, newID, ms[r])
			if errs[r] == nil {
				assert.Equal(t, liveness(r), bound, "rank %d", r)
			}
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, m := range ms {
			m.Close(true)
		}
	})
	return ms, errs
}

func same(d time.Duration) func(int) time.Duration { return func(int) time.Duration { return d } }

// waitGone waits until m reports want (or more), and returns how long it took.
func waitGone(t *testing.T, m *nccl.Membership, want []int, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	timeout := time.After(limit)
	for {
		ch := m.Changed()
		got := m.Ranks()
		if len(got) > 0 {
			require.Equal(t, want, got, "rank %d", m.Rank())
			return time.Since(start)
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("rank %d: no rank reported gone in %v", m.Rank(), limit)
		}
	}
}

// A rank that leaves without a goodbye (its process exits: its connection ends)
// is reported to every other rank at once, rank 0 relaying; a rank that leaves
// cleanly is not reported.
func TestTCPWatchRankGone(t *testing.T) {
	const liveness = 5 * time.Second
	ms, errs := watchRanks(t, 5, same(liveness), nil)
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	ms[4].Close(true) // leaves cleanly
	time.Sleep(100 * time.Millisecond)
	ms[2].Close(false) // dies
	for _, r := range []int{0, 1, 3} {
		took := waitGone(t, ms[r], []int{2}, liveness)
		assert.Less(t, took, time.Second, "rank %d: a closed connection is news at once", r)
	}
	for _, r := range []int{0, 1, 3} {
		assert.Equal(t, []int{2}, ms[r].Ranks(), "rank %d: rank 4 left cleanly", r)
	}
}

// Rank 0 dying is seen by every rank (its connection ends), with the secret too.
func TestTCPWatchRank0Gone(t *testing.T) {
	ms, errs := watchRanks(t, 3, same(5*time.Second), jobSecret)
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	ms[0].Close(false)
	for _, r := range []int{1, 2} {
		took := waitGone(t, ms[r], []int{0}, 5*time.Second)
		assert.Less(t, took, time.Second, "rank %d", r)
	}
}

// A rank whose host hangs (its connection open, no beats) is reported by rank 0
// once a liveness passed without a word, and relayed; a hung rank 0 is reported by
// every rank after a liveness. A live rank is never reported meanwhile.
func TestTCPWatchSilentRank(t *testing.T) {
	const liveness = 400 * time.Millisecond
	for _, silent := range []int{2, 0} {
		ms, errs := watchRanks(t, 4, same(liveness), nil)
		for r, err := range errs {
			require.NoError(t, err, "rank %d", r)
		}
		time.Sleep(2 * liveness) // beats keep the live ranks in
		for _, m := range ms {
			require.Empty(t, m.Ranks(), "rank %d", m.Rank())
		}
		start := time.Now()
		nccl.FreezeMembership(ms[silent])
		for r, m := range ms {
			if r == silent { // it hears the others drop it, or sees them leave
				continue
			}
			waitGone(t, m, []int{silent}, 5*liveness)
			took := time.Since(start)
			assert.GreaterOrEqual(t, took, liveness*3/4-beatSlack, "rank %d: not before the liveness ran out", r)
			assert.Less(t, took, liveness+time.Second, "rank %d: within the liveness, and a round trip", r)
		}
	}
}

// beatSlack is how much earlier than a liveness a silent rank may be reported: its
// last beat went out up to a beat interval (liveness/4) before it fell silent.
const beatSlack = 50 * time.Millisecond

// Every rank must watch with the same liveness: a rank with another, or without
// a watch where rank 0 has one, is rejected; rank 0 fails too.
func TestTCPWatchLivenessMismatch(t *testing.T) {
	for name, liveness := range map[string]func(int) time.Duration{
		"another liveness": func(r int) time.Duration { return time.Duration(r+1) * time.Second },
		"no watch":         func(r int) time.Duration { return time.Duration(1-r) * time.Second },
	} {
		t.Run(name, func(t *testing.T) {
			_, errs := watchRanks(t, 2, liveness, nil)
			assert.ErrorIs(t, errs[0], nccl.ErrRejected)
			assert.ErrorIs(t, errs[1], nccl.ErrRejected)
			assert.Contains(t, errs[0].Error(), "liveness")
		})
	}
}

// ExchangeID alone never watches, whatever Liveness says; a membership of another
// rank is an invalid argument.
func TestTCPWatchExchangeIDAlone(t *testing.T) {
	ln := listen(t)
	addr := ln.Addr().String()
	id, newID, _ := fakeID(2)
	res := runRanks(t.Context(), 2, []int{0, 1}, func(r int) nccl.Rendezvous {
		rv := &nccl.TCPRendezvous{Addr: addr, Liveness: time.Second}
		if r == 0 {
			rv.Listener = ln
		}
		return rv
	}, newID)
	for r, got := range res {
		require.NoError(t, got.err, "rank %d", r)
		assert.Equal(t, id, got.id)
	}
	_, _, err := (&nccl.TCPRendezvous{Addr: addr, Liveness: time.Second}).ExchangeIDWatching(t.Context(), 1, 2, newID, nccl.NewMembership(0, 2))
	assert.Error(t, err)
	// Without a liveness, no watch: a bound of 0.
	_, bound, err := (&nccl.TCPRendezvous{}).ExchangeIDWatching(t.Context(), 0, 1, newID, nccl.NewMembership(0, 1))
	require.NoError(t, err)
	assert.Zero(t, bound)
}

// The membership: reports are idempotent and ordered; Done closes with the last
// holder; ranks out of range are ignored.
func TestMembership(t *testing.T) {
	m := nccl.NewMembership(1, 4)
	assert.Empty(t, m.Ranks())
	ch := m.Changed()
	m.Gone(3, 9, -1)
	select {
	case <-ch:
	default:
		t.Fatal("no change")
	}
	ch = m.Changed()
	m.Gone(3)
	select {
	case <-ch:
		t.Fatal("a report of a rank already gone is no news")
	default:
	}
	m.Gone(0)
	assert.Equal(t, []int{0, 3}, m.Ranks())
	assert.True(t, slices.IsSorted(m.Ranks()))
	select {
	case <-m.Done():
		t.Fatal("done while held")
	default:
	}
	m.Close(true)
	<-m.Done()
	assert.True(t, m.Leaving())
	m.Close(false) // again: nothing
	assert.True(t, m.Leaving())
	var _ nccl.WatchingRendezvous = &nccl.TCPRendezvous{}
}
