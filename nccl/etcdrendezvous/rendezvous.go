// Package etcdrendezvous hands a communicator's unique id to its ranks through etcd
// (nccl.Rendezvous), the way torch elastic rendezvous does: each rank registers under
// the job's key with a lease, rank 0 publishes the id, and every rank returns once all
// of them are registered. A rank whose process dies stops renewing its lease, its key
// lapses, and the others wait for it again (or name it in their *nccl.TimeoutError).
// It is a package of its own so that only programs that use etcd import its client.
//
//	cli, _ := clientv3.New(clientv3.Config{Endpoints: []string{"etcd:2379"}})
//	rv := &etcdrendezvous.Rendezvous{Client: cli, Job: os.Getenv("JOB_ID"), Secret: secret}
//	comm, err := nccl.Join(ctx, rv, rank, nranks, dev)
//
// Keys, under Prefix + Job + "/": "ranks/<rank>" (the number of ranks the rank
// expects, with its lease), "id" (rank 0's id, sealed with the job's secret when
// there is one, with rank 0's lease), "done/<rank>" (the rank has the id) and
// "failed" (why the rendezvous failed: a rank that expects another number of ranks
// fails it for all, with nccl.ErrRejected; the key lapses a TTL later). Once
// every rank has the id, or a moment after a rank has it, each rank revokes its
// lease, which removes its keys. Use a job name per run: a name whose keys are still
// held by a run's live ranks makes a second rank of the same number fail with
// nccl.ErrRejected.
//
// With Watch, the rendezvous also watches the ranks for the communicator nccl.Join
// makes (nccl.WatchingRendezvous): each rank keeps its lease, renewed, and its key
// "ranks/<rank>" once the exchange is done, and watches the job's keys; a rank whose
// key goes without a "left/<rank>" before it (its lease lapsed: its process died,
// or it lost etcd for a TTL; or it revoked it: it aborted its communicator) is
// reported gone, so that the others' waits end with nccl.ErrRankGone within the TTL
// (and etcd's lease check, half a second). A rank that closes its communicators
// says so ("left/<rank>") before it revokes its lease. A rank that loses its own
// lease reports itself gone (the others take it for gone). The keys stay while the
// job's ranks live: use a job name per run (a rebuilt communicator included).
//
// Who may read and write the keys is etcd's own business (its users, roles and TLS,
// configured on the client); with a Secret, the id is sealed (AES-256-GCM under a key
// derived from the secret and the job), so that a reader of etcd without the secret
// cannot join the communicator, and a forged id fails to open.
package etcdrendezvous

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/nccl"
	"github.com/gocuda/gocuda/nccl/ncclraw"
)

// DefaultTTL is the lease of a rank's keys when Rendezvous.TTL is 0.
const DefaultTTL = 10 * time.Second

// DefaultPrefix is the keys' prefix when Rendezvous.Prefix is "".
const DefaultPrefix = "/gocuda/nccl/"

// Rendezvous exchanges the id through etcd.
type Rendezvous struct {
	// Client is the etcd client, configured with the endpoints and credentials.
	Client *clientv3.Client
	// Job names the communicator's run: its keys are under Prefix + Job + "/".
	Job string
	// Prefix is the keys' prefix; "" means DefaultPrefix.
	Prefix string
	// TTL is the lease of each rank's keys, renewed while the rank waits: a rank
	// that dies is gone from the rendezvous TTL later. 0 means DefaultTTL.
	TTL time.Duration
	// Timeout bounds the rendezvous when ctx has no deadline; 0 means
	// nccl.DefaultRendezvousTimeout.
	Timeout time.Duration
	// Secret is the job's secret (nccl.JobSecretFromEnv): the id is sealed with it.
	Secret []byte
	// Watch keeps each rank's lease and key once the exchange is done, for as long
	// as the rank's communicators from nccl.Join are open, so that they learn when
	// a rank is gone, within TTL (see the package's doc). Every rank must have the
	// same Watch (a rank with another is rejected, with nccl.ErrRejected).
	// ExchangeID alone never watches; nccl.Join does.
	Watch bool
}

// ExchangeID implements nccl.Rendezvous.
func (r *Rendezvous) ExchangeID(ctx context.Context, rank, nranks int, newID func() (ncclraw.NcclUniqueId, error)) (ncclraw.NcclUniqueId, error) {
	return r.exchange(ctx, rank, nranks, newID, nil)
}

// ExchangeIDWatching implements nccl.WatchingRendezvous: with Watch, it is
// ExchangeID followed by the watch of the ranks, which reports to m, and returns
// the TTL as its bound; without, it is ExchangeID and returns 0.
func (r *Rendezvous) ExchangeIDWatching(ctx context.Context, rank, nranks int, newID func() (ncclraw.NcclUniqueId, error), m *nccl.Membership) (ncclraw.NcclUniqueId, time.Duration, error) {
	if r == nil || !r.Watch || m == nil {
		id, err := r.exchange(ctx, rank, nranks, newID, nil)
		return id, 0, err
	}
	if m.Rank() != rank || m.NRanks() != nranks {
		return ncclraw.NcclUniqueId{}, 0, fmt.Errorf("etcdrendezvous: %w: a membership of rank %d of %d for rank %d of %d",
			cuda.ErrInvalidArgument, m.Rank(), m.NRanks(), rank, nranks)
	}
	id, err := r.exchange(ctx, rank, nranks, newID, m)
	if err != nil {
		return id, 0, err
	}
	return id, r.ttl(), nil
}

func (r *Rendezvous) ttl() time.Duration {
	if r.TTL <= 0 {
		return DefaultTTL
	}
	return max(r.TTL, time.Second)
}

func (r *Rendezvous) exchange(ctx context.Context, rank, nranks int, newID func() (ncclraw.NcclUniqueId, error), m *nccl.Membership) (ncclraw.NcclUniqueId, error) {
	var zero ncclraw.NcclUniqueId
	if r == nil || r.Client == nil || r.Job == "" || strings.Contains(r.Job, "/") {
		return zero, fmt.Errorf("etcdrendezvous: %w: a client and a job name without '/' are needed", cuda.ErrInvalidArgument)
	}
	if nranks < 1 || rank < 0 || rank >= nranks || nranks > 1<<20 {
		return zero, fmt.Errorf("etcdrendezvous: %w: rank %d of %d", cuda.ErrInvalidArgument, rank, nranks)
	}
	if _, ok := ctx.Deadline(); !ok {
		timeout := r.Timeout
		if timeout <= 0 {
			timeout = nccl.DefaultRendezvousTimeout
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	j := &join{r: r, rank: rank, nranks: nranks, prefix: r.prefix(), m: m}
	id, err := j.run(ctx, newID)
	if err != nil {
		return zero, err
	}
	return id, nil
}

func (r *Rendezvous) prefix() string {
	p := r.Prefix
	if p == "" {
		p = DefaultPrefix
	}
	return p + r.Job + "/"
}

// join is one rank's rendezvous.
type join struct {
	r            *Rendezvous
	rank, nranks int
	prefix       string
	lease        clientv3.LeaseID
	m            *nccl.Membership // the watch's; nil: none
}

// registration is the value of a rank's key: the number of ranks it expects, and
// whether it watches.
func (j *join) registration() string {
	if j.m != nil {
		return strconv.Itoa(j.nranks) + " watch"
	}
	return strconv.Itoa(j.nranks)
}

func (j *join) key(parts ...string) string { return j.prefix + strings.Join(parts, "/") }

func (j *join) run(ctx context.Context, newID func() (ncclraw.NcclUniqueId, error)) (ncclraw.NcclUniqueId, error) {
	var zero ncclraw.NcclUniqueId
	cli := j.r.Client
	ttl := j.r.ttl()
	lease, err := cli.Grant(ctx, int64(ttl/time.Second))
	if err != nil {
		return zero, j.failed(ctx, "granting a lease", err, nil)
	}
	j.lease = lease.ID
	kctx, stopKeepAlive := context.WithCancel(context.WithoutCancel(ctx))
	watching := false // the watch took the lease over
	defer func() {
		if !watching {
			stopKeepAlive()
		}
	}()
	renewals, err := cli.KeepAlive(kctx, lease.ID)
	if err != nil {
		return zero, j.failed(ctx, "renewing the lease", err, nil)
	}
	// The client wants its answers read; renewed is closed when they end.
	renewed := make(chan struct{})
	go func() {
		for range renewals {
		}
		close(renewed)
	}()
	// Whatever happens, the keys go: at once on a failure, once the others have the
	// id (or a moment after) on success.
	revoke := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_, _ = cli.Revoke(rctx, lease.ID)
	}

	// Register, unless a live rank holds the number.
	me := j.key("ranks", strconv.Itoa(j.rank))
	txn, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(me), "=", 0)).
		Then(clientv3.OpPut(me, j.registration(), clientv3.WithLease(lease.ID))).Commit()
	if err != nil {
		revoke()
		return zero, j.failed(ctx, "registering", err, nil)
	}
	if !txn.Succeeded {
		revoke()
		return zero, fmt.Errorf("%w: etcdrendezvous: job %s: rank %d joined twice (a live rank holds %s)", nccl.ErrRejected, j.r.Job, j.rank, me)
	}
	if j.rank == 0 {
		id, err := newID()
		if err != nil {
			revoke()
			return zero, err
		}
		if _, err := cli.Put(ctx, j.key("id"), string(j.seal(id)), clientv3.WithLease(lease.ID)); err != nil {
			revoke()
			return zero, j.failed(ctx, "publishing the id", err, nil)
		}
	}

	id, since, err := j.waitAll(ctx)
	if err != nil {
		if errors.Is(err, nccl.ErrRejected) {
			j.reject(ctx, err, ttl)
		}
		revoke()
		return zero, err
	}
	if j.m != nil {
		// The keys stay, under the lease kept alive, while the rank's communicators
		// are open.
		watching = true
		go j.watch(stopKeepAlive, renewed)
		return id, nil
	}
	// Tell the others this rank has the id, and give the slower ones a moment to
	// read it before this rank's keys go.
	if _, err := cli.Put(ctx, j.key("done", strconv.Itoa(j.rank)), "", clientv3.WithLease(lease.ID)); err == nil {
		wctx, cancel := context.WithTimeout(ctx, doneGrace)
		// From the revision this rank began waiting at, keeping deleted keys, so
		// that the done key of a rank that has gone since (its lease revoked) is
		// counted all the same.
		_, _ = j.waitFor(wctx, "done/", since, true, func(kvs map[string]string) (bool, error) {
			return len(kvs) >= j.nranks, nil
		})
		cancel()
	}
	revoke()
	return id, nil
}

// doneGrace bounds how long a rank that has the id waits for the others to say
// they have it too before its keys go.
const doneGrace = 5 * time.Second

// waitAll waits until every rank is registered and the id is published, and
// returns the id; a rank that expects another number of ranks is an error matching
// nccl.ErrRejected.
//
// It also returns the revision it began at.
func (j *join) waitAll(ctx context.Context) (ncclraw.NcclUniqueId, int64, error) {
	var id ncclraw.NcclUniqueId
	var idErr error
	var missing []int
	since, err := j.waitFor(ctx, "", 0, false, func(kvs map[string]string) (bool, error) {
		missing = missing[:0]
		if why, ok := kvs["failed"]; ok {
			return false, fmt.Errorf("%w: etcdrendezvous: job %s: %s", nccl.ErrRejected, j.r.Job, why)
		}
		for r := range j.nranks {
			v, ok := kvs["ranks/"+strconv.Itoa(r)]
			if !ok {
				missing = append(missing, r)
				continue
			}
			if v != j.registration() {
				n, watch, _ := strings.Cut(v, " ")
				if n != strconv.Itoa(j.nranks) {
					return false, fmt.Errorf("%w: etcdrendezvous: job %s: rank %d expects %s ranks, rank %d expects %d", nccl.ErrRejected, j.r.Job, r, n, j.rank, j.nranks)
				}
				return false, fmt.Errorf("%w: etcdrendezvous: job %s: rank %d watches the ranks (%t), rank %d (%t): every rank's Watch must be the same",
					nccl.ErrRejected, j.r.Job, r, watch == "watch", j.rank, j.m != nil)
			}
		}
		sealed, ok := kvs["id"]
		if !ok {
			if !slices.Contains(missing, 0) {
				missing = append([]int{0}, missing...) // rank 0 registered but has not published yet
			}
			return false, nil
		}
		if len(missing) > 0 {
			return false, nil
		}
		id, idErr = j.open([]byte(sealed))
		return true, idErr
	})
	if err != nil {
		var te *nccl.TimeoutError
		if errors.As(err, &te) {
			te.Missing = slices.Clone(missing)
		}
		return id, 0, err
	}
	return id, since, nil
}

// reject tells the other ranks that the rendezvous failed: a key "failed" with the
// reason, under a lease of its own that outlives this rank's keys by ttl (so that
// a rank that reads after this one left still learns it).
func (j *join) reject(ctx context.Context, err error, ttl time.Duration) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	cli := j.r.Client
	l, gerr := cli.Grant(cctx, max(1, int64(ttl/time.Second)))
	if gerr != nil {
		return
	}
	k := j.key("failed")
	_, _ = cli.Txn(cctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, fmt.Sprintf("rank %d: %v", j.rank, err), clientv3.WithLease(l.ID))).Commit()
}

// waitFor watches the keys under the job's prefix + sub until done says the state
// is complete, reading the state once (at revision rev, or the latest with rev 0)
// and then following every change from that revision, so that none is missed; with
// keep, deleted keys stay (what was ever there counts). It returns the revision of
// its first read.
func (j *join) waitFor(ctx context.Context, sub string, rev int64, keep bool, done func(map[string]string) (bool, error)) (int64, error) {
	cli := j.r.Client
	base := j.prefix + sub
	first := int64(0)
	for {
		opts := []clientv3.OpOption{clientv3.WithPrefix()}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := cli.Get(ctx, base, opts...)
		if err != nil {
			return first, j.failed(ctx, "reading the job's keys", err, nil)
		}
		if first == 0 {
			first = resp.Header.Revision
			if rev > 0 {
				first = rev
			}
		}
		at := resp.Header.Revision
		if rev > 0 {
			at, rev = rev, 0 // a restart reads the latest
		}
		kvs := map[string]string{}
		for _, kv := range resp.Kvs {
			kvs[strings.TrimPrefix(string(kv.Key), j.prefix)] = string(kv.Value)
		}
		if ok, err := done(kvs); ok || err != nil {
			return first, err
		}
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		ch := cli.Watch(wctx, base, clientv3.WithPrefix(), clientv3.WithRev(at+1))
		ok, err := j.follow(ctx, ch, kvs, keep, done)
		cancel()
		if ok || err != nil {
			return first, err
		}
		// The watch ended (etcd restarted, a compaction, no leader): read again.
		if ctx.Err() != nil {
			return first, j.failed(ctx, "waiting for the other ranks", ctx.Err(), nil)
		}
	}
}

// follow applies the watch's events to kvs until done says complete, the watch
// ends (false, nil) or ctx ends.
func (j *join) follow(ctx context.Context, ch clientv3.WatchChan, kvs map[string]string, keep bool, done func(map[string]string) (bool, error)) (bool, error) {
	for {
		select {
		case <-ctx.Done():
			return false, j.failed(ctx, "waiting for the other ranks", ctx.Err(), nil)
		case w, open := <-ch:
			if !open || w.Canceled || w.Err() != nil {
				return false, nil
			}
			for _, ev := range w.Events {
				k := strings.TrimPrefix(string(ev.Kv.Key), j.prefix)
				if ev.Type == clientv3.EventTypeDelete {
					if !keep {
						delete(kvs, k) // a lease that lapsed: that rank is gone
					}
				} else {
					kvs[k] = string(ev.Kv.Value)
				}
			}
			if ok, err := done(kvs); ok || err != nil {
				return ok, err
			}
		}
	}
}

// failed is the error of a step that failed: the context's end as a
// *nccl.TimeoutError (Missing filled in by the caller), else the etcd error.
func (j *join) failed(ctx context.Context, what string, err error, missing []int) error {
	if ctx.Err() != nil {
		return &nccl.TimeoutError{Rank: j.rank, NRanks: j.nranks, Missing: missing,
			Err: fmt.Errorf("etcdrendezvous: job %s: %s: %w", j.r.Job, what, ctx.Err())}
	}
	return fmt.Errorf("etcdrendezvous: job %s: rank %d: %s: %w", j.r.Job, j.rank, what, err)
}

// seal returns the id as published: sealed under the job's key with a random
// nonce when there is a secret, else as it is.
func (j *join) seal(id ncclraw.NcclUniqueId) []byte {
	if j.r.Secret == nil {
		return append([]byte(nil), id.Internal[:]...)
	}
	aead := j.aead()
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	return aead.Seal(nonce, nonce, id.Internal[:], []byte(j.r.Job))
}

// open reverses seal; an id that does not open (another secret, a forgery) is an
// error matching nccl.ErrAuthentication.
func (j *join) open(b []byte) (ncclraw.NcclUniqueId, error) {
	var id ncclraw.NcclUniqueId
	plain := b
	if j.r.Secret != nil {
		aead := j.aead()
		if len(b) < aead.NonceSize() {
			return id, fmt.Errorf("%w: etcdrendezvous: job %s: the published id is not sealed with the job's secret", nccl.ErrAuthentication, j.r.Job)
		}
		var err error
		if plain, err = aead.Open(nil, b[:aead.NonceSize()], b[aead.NonceSize():], []byte(j.r.Job)); err != nil {
			return id, fmt.Errorf("%w: etcdrendezvous: job %s: the published id does not open with the job's secret", nccl.ErrAuthentication, j.r.Job)
		}
	}
	if len(plain) != len(id.Internal) {
		return id, fmt.Errorf("%w: etcdrendezvous: job %s: the published id has %d bytes", nccl.ErrProtocol, j.r.Job, len(plain))
	}
	copy(id.Internal[:], plain)
	return id, nil
}

func (j *join) aead() cipher.AEAD {
	h := hmac.New(sha256.New, j.r.Secret)
	h.Write([]byte("gocuda-nccl etcd id\x00"))
	h.Write(binary.BigEndian.AppendUint32(nil, uint32(len(j.r.Job))))
	h.Write([]byte(j.r.Job))
	block, err := aes.NewCipher(h.Sum(nil))
	if err != nil {
		panic(err) // a 32-byte key is always valid
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return aead
}

// watch is the membership watch: it reports a rank whose key goes without a
// "left/<rank>" first (every rank's key was there when the exchange ended), until
// the membership is done; it then says whether this rank leaves cleanly, and
// revokes the lease (its keys go at once, so that an abort is news at once too). A
// lease that is lost (the renewals end on their own) means the others take this
// rank for gone: it reports itself.
func (j *join) watch(stopKeepAlive context.CancelFunc, renewed <-chan struct{}) {
	cli := j.r.Client
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-j.m.Done():
		case <-renewed:
			j.m.Gone(j.rank)
			<-j.m.Done()
		}
		cancel()
	}()
	ranks, leaving := j.key("ranks")+"/", j.key("left")+"/"
	left := map[int]bool{}
	pause := time.Duration(0)
	for ctx.Err() == nil {
		select { // after a watch or a read that failed (etcd restarting, no leader)
		case <-ctx.Done():
			continue
		case <-time.After(pause):
		}
		pause = min(max(2*pause, 10*time.Millisecond), time.Second)
		resp, err := cli.Get(ctx, j.prefix, clientv3.WithPrefix())
		if err != nil {
			continue
		}
		present := map[int]bool{}
		for _, kv := range resp.Kvs {
			if r, ok := rankOf(string(kv.Key), leaving); ok {
				left[r] = true
			}
			if r, ok := rankOf(string(kv.Key), ranks); ok {
				present[r] = true
			}
		}
		var gone []int
		for r := range j.nranks {
			if !present[r] && !left[r] {
				gone = append(gone, r)
			}
		}
		j.m.Gone(gone...)
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for w := range cli.Watch(wctx, j.prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1)) {
			if w.Canceled || w.Err() != nil {
				break
			}
			for _, ev := range w.Events {
				k := string(ev.Kv.Key)
				if r, ok := rankOf(k, leaving); ok && ev.Type == clientv3.EventTypePut {
					left[r] = true
				}
				if r, ok := rankOf(k, ranks); ok && ev.Type == clientv3.EventTypeDelete && !left[r] {
					j.m.Gone(r)
				}
			}
			pause = 0
		}
		wcancel()
	}
	// Done: leave, cleanly or not.
	rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
	defer rcancel()
	if j.m.Leaving() {
		_, _ = cli.Put(rctx, j.key("left", strconv.Itoa(j.rank)), "", clientv3.WithLease(j.lease))
	}
	stopKeepAlive()
	_, _ = cli.Revoke(rctx, j.lease)
}

// rankOf parses the rank of a key prefix + "<rank>".
func rankOf(key, prefix string) (int, bool) {
	s, ok := strings.CutPrefix(key, prefix)
	if !ok {
		return 0, false
	}
	r, err := strconv.Atoi(s)
	return r, err == nil
}
