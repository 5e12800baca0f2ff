package etcdrendezvous_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/gocuda/gocuda/nccl"
	"github.com/gocuda/gocuda/nccl/etcdrendezvous"
	"github.com/gocuda/gocuda/nccl/ncclraw"
)

// These tests run a real etcd server, embedded in the test process, on 127.0.0.1.

// server is an embedded etcd that can be stopped and started again on its data
// directory and ports.
type server struct {
	t          *testing.T
	dir        string
	client     url.URL
	peer       url.URL
	e          *embed.Etcd
	stopped    bool
	restarting sync.Mutex
}

func freeURL(t *testing.T) url.URL {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return url.URL{Scheme: "http", Host: ln.Addr().String()}
}

func startEtcd(t *testing.T) *server {
	s := &server{t: t, dir: t.TempDir(), client: freeURL(t), peer: freeURL(t)}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *server) start() {
	cfg := embed.NewConfig()
	cfg.Name = "test"
	cfg.Dir = s.dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{s.client}, []url.URL{s.client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{s.peer}, []url.URL{s.peer}
	cfg.InitialCluster = fmt.Sprintf("test=%s", s.peer.String())
	cfg.LogLevel = "error"
	e, err := embed.StartEtcd(cfg)
	require.NoError(s.t, err)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(20 * time.Second):
		e.Close()
		s.t.Fatal("etcd did not start")
	}
	s.e, s.stopped = e, false
}

func (s *server) stop() {
	if !s.stopped {
		s.e.Close()
		s.stopped = true
	}
}

func (s *server) newClient(t *testing.T) *clientv3.Client {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.client.String()}, DialTimeout: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	return cli
}

func testID(seed byte) (ncclraw.NcclUniqueId, func() (ncclraw.NcclUniqueId, error), *atomic.Int32) {
	var id ncclraw.NcclUniqueId
	for i := range id.Internal {
		id.Internal[i] = seed + byte(i)*3 + 1
	}
	var calls atomic.Int32
	return id, func() (ncclraw.NcclUniqueId, error) { calls.Add(1); return id, nil }, &calls
}

type result struct {
	id  ncclraw.NcclUniqueId
	err error
	dur time.Duration // the exchange's, from the start of all ranks
}

// ranks runs the given ranks' ExchangeID concurrently, each with a client of its own.
func ranks(ctx context.Context, t *testing.T, s *server, rv func(cli *clientv3.Client) *etcdrendezvous.Rendezvous, nranks int, which []int,
	newID func() (ncclraw.NcclUniqueId, error)) map[int]result {
	var mu sync.Mutex
	out := map[int]result{}
	clients := make([]*clientv3.Client, len(which))
	for i := range which {
		clients[i] = s.newClient(t)
	}
	var wg sync.WaitGroup
	start := time.Now()
	for i, r := range which {
		wg.Go(func() {
			id, err := rv(clients[i]).ExchangeID(ctx, r, nranks, newID)
			mu.Lock()
			out[r] = result{id, err, time.Since(start)}
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

func allRanks(n int) []int {
	r := make([]int, n)
	for i := range r {
		r[i] = i
	}
	return r
}

// 32 ranks join, each through its own client; the id is rank 0's, made once; the
// job's keys are gone afterwards.
func TestRendezvous32Ranks(t *testing.T) {
	s := startEtcd(t)
	id, newID, calls := testID(5)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res := ranks(ctx, t, s, func(cli *clientv3.Client) *etcdrendezvous.Rendezvous {
		return &etcdrendezvous.Rendezvous{Client: cli, Job: "job32", TTL: 5 * time.Second}
	}, 32, allRanks(32), newID)
	var took time.Duration
	for r, got := range res {
		require.NoError(t, got.err, "rank %d", r)
		assert.Equal(t, id, got.id, "rank %d", r)
		took = max(took, got.dur)
	}
	assert.Equal(t, int32(1), calls.Load())
	t.Logf("32 ranks joined in %v", took)
	left, err := s.newClient(t).Get(ctx, etcdrendezvous.DefaultPrefix+"job32/", clientv3.WithPrefix())
	require.NoError(t, err)
	assert.Zero(t, left.Count, "the job's keys are gone")
}

// Ranks that come late (rank 0 last) still join; a rank that dies after it
// registered lets its lease lapse, and the others, which wait for it again, name it
// when their deadline passes; a replacement that comes before the deadline joins.
func TestRendezvousLateAndDeadRanks(t *testing.T) {
	s := startEtcd(t)
	const ttl = 2 * time.Second
	rv := func(cli *clientv3.Client) *etcdrendezvous.Rendezvous {
		return &etcdrendezvous.Rendezvous{Client: cli, Job: "late", TTL: ttl}
	}
	id, newID, _ := testID(9)

	// Rank 3 registers, then its process dies: its client goes without a word.
	dead := s.newClient(t)
	dctx, kill := context.WithCancel(t.Context())
	deadDone := make(chan error, 1)
	go func() { _, err := rv(dead).ExchangeID(dctx, 3, 4, newID); deadDone <- err }()
	waitForKey(t, s, etcdrendezvous.DefaultPrefix+"late/ranks/3", true)
	dead.Close() // before the rank can revoke its lease: as if its process died
	kill()
	<-deadDone
	waitForKey(t, s, etcdrendezvous.DefaultPrefix+"late/ranks/3", false) // the lease lapses

	// Ranks 1 and 2 now, rank 0 last; rank 3 is gone (its lease lapses): they wait
	// for it and name it when their deadline passes.
	ctx, cancel := context.WithTimeout(t.Context(), 3*ttl)
	defer cancel()
	res := ranks(ctx, t, s, rv, 4, []int{1, 2, 0}, newID)
	for r, got := range res {
		var te *nccl.TimeoutError
		require.ErrorAs(t, got.err, &te, "rank %d", r)
		assert.Equal(t, []int{3}, te.Missing, "rank %d", r)
	}

	// Again, with a replacement rank 3 that comes late but in time.
	ctx, cancel = context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var late result
	lateClient := s.newClient(t)
	wg.Go(func() {
		time.Sleep(500 * time.Millisecond)
		late.id, late.err = rv(lateClient).ExchangeID(ctx, 3, 4, newID)
	})
	res = ranks(ctx, t, s, rv, 4, []int{0, 1, 2}, newID)
	wg.Wait()
	require.NoError(t, late.err)
	assert.Equal(t, id, late.id)
	for r, got := range res {
		require.NoError(t, got.err, "rank %d", r)
		assert.Equal(t, id, got.id, "rank %d", r)
	}
}

// etcd restarts while the ranks wait: the clients reconnect, the leases (kept by
// etcd on its disk) and watches carry on, and the ranks join.
func TestRendezvousEtcdRestart(t *testing.T) {
	s := startEtcd(t)
	rv := func(cli *clientv3.Client) *etcdrendezvous.Rendezvous {
		return &etcdrendezvous.Rendezvous{Client: cli, Job: "restart", TTL: 10 * time.Second}
	}
	id, newID, _ := testID(2)
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var first map[int]result
	wg.Go(func() { first = ranks(ctx, t, s, rv, 3, []int{1, 2}, newID) })
	waitForKey(t, s, etcdrendezvous.DefaultPrefix+"restart/ranks/2", true)
	waitForKey(t, s, etcdrendezvous.DefaultPrefix+"restart/ranks/1", true)
	s.stop()
	time.Sleep(500 * time.Millisecond)
	s.start()
	last := ranks(ctx, t, s, rv, 3, []int{0}, newID)
	wg.Wait()
	for _, res := range []map[int]result{first, last} {
		for r, got := range res {
			require.NoError(t, got.err, "rank %d", r)
			assert.Equal(t, id, got.id, "rank %d", r)
		}
	}
}

// A rank that cannot reach etcd (partitioned) ends at its deadline with a
// *TimeoutError, and the others, which never saw it, name it.
func TestRendezvousPartitionedRank(t *testing.T) {
	s := startEtcd(t)
	rv := func(cli *clientv3.Client) *etcdrendezvous.Rendezvous {
		return &etcdrendezvous.Rendezvous{Client: cli, Job: "part", TTL: 5 * time.Second}
	}
	_, newID, _ := testID(4)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	nowhere := freeURL(t)
	cut, err := clientv3.New(clientv3.Config{Endpoints: []string{nowhere.String()}, DialTimeout: time.Second})
	require.NoError(t, err)
	defer cut.Close()
	var wg sync.WaitGroup
	var partErr error
	wg.Go(func() { _, partErr = rv(cut).ExchangeID(ctx, 2, 3, newID) })
	res := ranks(ctx, t, s, rv, 3, []int{0, 1}, newID)
	wg.Wait()
	var te *nccl.TimeoutError
	require.ErrorAs(t, partErr, &te)
	for r, got := range res {
		require.ErrorAs(t, got.err, &te, "rank %d", r)
		assert.Equal(t, []int{2}, te.Missing, "rank %d", r)
	}
}

// A rank that expects another number of ranks, or joins under a number a live rank
// holds, is rejected; an id sealed with another secret does not open.
func TestRendezvousRejections(t *testing.T) {
	s := startEtcd(t)
	_, newID, _ := testID(1)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	// Rank 1 expects 3 ranks, rank 0 two.
	other := &etcdrendezvous.Rendezvous{Client: s.newClient(t), Job: "count2", TTL: 5 * time.Second}
	first := &etcdrendezvous.Rendezvous{Client: s.newClient(t), Job: "count2", TTL: 5 * time.Second}
	var wg sync.WaitGroup
	var e0 error
	wg.Go(func() { _, e0 = first.ExchangeID(ctx, 0, 2, newID) })
	_, e1 := other.ExchangeID(ctx, 1, 3, newID)
	wg.Wait()
	require.ErrorIs(t, e1, nccl.ErrRejected)
	require.ErrorIs(t, e0, nccl.ErrRejected)

	// Joining twice: a live rank 1 holds the number.
	tctx, tcancel := context.WithTimeout(ctx, 2*time.Second)
	defer tcancel()
	holder := &etcdrendezvous.Rendezvous{Client: s.newClient(t), Job: "twice", TTL: 5 * time.Second}
	go func() { _, _ = holder.ExchangeID(tctx, 1, 2, newID) }()
	waitForKey(t, s, etcdrendezvous.DefaultPrefix+"twice/ranks/1", true)
	_, err := (&etcdrendezvous.Rendezvous{Client: s.newClient(t), Job: "twice"}).ExchangeID(tctx, 1, 2, newID)
	require.ErrorIs(t, err, nccl.ErrRejected)

	// Another secret: rank 1 cannot open rank 0's id.
	sec := func(secret string) func(cli *clientv3.Client) *etcdrendezvous.Rendezvous {
		return func(cli *clientv3.Client) *etcdrendezvous.Rendezvous {
			return &etcdrendezvous.Rendezvous{Client: cli, Job: "secret", TTL: 5 * time.Second, Secret: []byte(secret)}
		}
	}
	sctx, scancel := context.WithTimeout(ctx, 3*time.Second)
	defer scancel()
	wg.Go(func() { ranks(sctx, t, s, sec("the job's secret, 16+ bytes"), 2, []int{0}, newID) })
	res := ranks(sctx, t, s, sec("another secret, also 16+ bytes"), 2, []int{1}, newID)
	wg.Wait()
	require.ErrorIs(t, res[1].err, nccl.ErrAuthentication)

	// Bad arguments.
	_, err = (&etcdrendezvous.Rendezvous{Client: s.newClient(t), Job: "a/b"}).ExchangeID(ctx, 0, 1, newID)
	require.Error(t, err)
	_, err = (&etcdrendezvous.Rendezvous{Client: s.newClient(t), Job: "x"}).ExchangeID(ctx, 2, 2, newID)
	require.Error(t, err)
}

// waitForKey waits until key exists (or, with exists false, until it is gone).
func waitForKey(t *testing.T, s *server, key string, exists bool) {
	cli := s.newClient(t)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := cli.Get(t.Context(), key)
		if err == nil && (resp.Count > 0) == exists {
			return
		}
	}
	t.Fatalf("%s: never became exists=%v", key, exists)
}

// With Watch, the ranks go on watching each other once the exchange is done: a rank
// that aborts (its lease revoked) is reported gone at once, a rank whose process
// dies (its client gone without a word) once its lease lapses, within the TTL and
// etcd's lease check; a rank that leaves cleanly is not reported. Every rank must
// watch, or none.
func TestRendezvousWatch(t *testing.T) {
	s := startEtcd(t)
	const ttl = 2 * time.Second
	_, newID, _ := testID(3)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const n = 4
	clients := make([]*clientv3.Client, n)
	ms := make([]*nccl.Membership, n)
	errs := make([]error, n)
	for r := range n {
		clients[r] = s.newClient(t)
		ms[r] = nccl.NewMembership(r, n)
		t.Cleanup(func() { ms[r].Close(true) })
	}
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			rv := &etcdrendezvous.Rendezvous{Client: clients[r], Job: "watch", TTL: ttl, Watch: true}
			var bound time.Duration
			_, bound, errs[r] = rv.ExchangeIDWatching(ctx, r, n, newID, ms[r])
			assert.Equal(t, ttl, bound)
		})
	}
	wg.Wait()
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	waitGone := func(m *nccl.Membership, want []int, limit time.Duration) time.Duration {
		start := time.Now()
		for deadline := start.Add(limit); ; {
			ch := m.Changed()
			if got := m.Ranks(); len(got) >= len(want) {
				assert.Equal(t, want, got, "rank %d", m.Rank())
				return time.Since(start)
			}
			select {
			case <-ch:
			case <-time.After(time.Until(deadline)):
				t.Fatalf("rank %d: ranks %v gone, not %v, after %v", m.Rank(), m.Ranks(), want, limit)
			}
		}
	}

	ms[3].Close(true) // leaves cleanly
	time.Sleep(300 * time.Millisecond)
	ms[2].Close(false) // aborts
	for _, r := range []int{0, 1} {
		took := waitGone(ms[r], []int{2}, ttl)
		assert.Less(t, took, time.Second, "rank %d: a revoked lease is news at once", r)
	}
	clients[1].Close() // its process dies
	took := waitGone(ms[0], []int{1, 2}, 3*ttl)
	t.Logf("a dead rank reported in %v (TTL %v)", took, ttl)
	assert.Less(t, took, ttl+1500*time.Millisecond, "within the TTL and etcd's lease check")

	// One rank watches, the other not: rejected.
	var e0, e1 error
	m0 := nccl.NewMembership(0, 2)
	defer m0.Close(true)
	mctx, mcancel := context.WithTimeout(ctx, 10*time.Second)
	defer mcancel()
	wg.Go(func() {
		rv := &etcdrendezvous.Rendezvous{Client: s.newClient(t), Job: "mixed", TTL: ttl, Watch: true}
		_, _, e0 = rv.ExchangeIDWatching(mctx, 0, 2, newID, m0)
	})
	wg.Go(func() {
		_, e1 = (&etcdrendezvous.Rendezvous{Client: s.newClient(t), Job: "mixed", TTL: ttl}).ExchangeID(mctx, 1, 2, newID)
	})
	wg.Wait()
	assert.ErrorIs(t, e0, nccl.ErrRejected)
	assert.ErrorIs(t, e1, nccl.ErrRejected)
	assert.NoError(t, mctx.Err(), "no timeout")
	var _ nccl.WatchingRendezvous = &etcdrendezvous.Rendezvous{}
}
