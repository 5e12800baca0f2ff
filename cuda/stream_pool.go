package cuda

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/internal/errs"
	"github.com/gocuda/gocuda/resource"
)

// The stream pool: a context lends streams per priority and kind (AcquireStream,
// WithStream), at most its stream limit at a time (context_limits.go), and takes
// them back at Close or when the Stream is dropped (leaseToken). A stream is lent
// again only once the work queued on it has finished.

// Priority is a stream priority: High, Normal, Low, or a number in the range of
// Context.StreamPriorityRange, where lower numbers are higher priorities. Numbers
// outside the range are clamped to it.
type Priority int

// Stream priorities.
const (
	// High is the device's greatest priority.
	High Priority = math.MinInt32
	// Normal is the driver's default priority (0). Current devices make it their
	// least priority, so that Low and Normal are the same there.
	Normal Priority = 0
	// Low is the device's least priority.
	Low Priority = math.MaxInt32
)

// maxIdleStreams is how many released streams a pool keeps for reuse; more are
// destroyed when released.
const maxIdleStreams = 32

// streamPool lends the streams of one priority and kind of a context.
type streamPool struct {
	cs       *ctxState
	priority int // resolved (clamped)
	nonBlock bool

	mu     sync.Mutex
	idle   []*stream     // released streams, the most recent last
	tokens []*leaseToken // free lease tokens
	lent   int           // streams lent now
	limit  int           // most streams lent at a time
	// waiters are acquirers waiting for a stream at the limit, in order.
	waiters []chan struct{}

	created, destroyed atomic.Int64 // streams (tests, status)
	peak               atomic.Int64 // most streams alive at once (lent and idle)
}

// AcquireStream lends a stream from the context's pool for the options' priority and
// kind: one that no one else holds and whose earlier work has finished, or a new one.
// Close returns it to the pool, as database/sql's Conn.Close does; a Stream dropped
// without Close goes back too, once it is unreachable. Use the Stream only until
// Close: every call through it fails with ErrClosed after that, even once the stream
// is lent again.
//
// The pool lends at most the context's stream limit (SetStreamLimit) at a time; at
// the limit, AcquireStream waits for a release or until ctx is done, running the
// garbage collector now and then meanwhile so that Streams dropped without Close
// come back even when nothing else would start a collection. A goroutine
// that holds a stream of a pool and waits for another of the same pool can wait
// forever if every holder does the same: take one stream per task (WithStream
// reuses the caller's). Long-lived streams come from NewStream.
func (c *Context) AcquireStream(ctx context.Context, opts ...StreamOption) (*Stream, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	p, err := c.streamPool(configOf(opts))
	if err != nil {
		return nil, err
	}
	return p.acquire(ctx, c)
}

// streamPool returns the context's pool for cfg.
func (c *Context) streamPool(cfg streamConfig) (*streamPool, error) {
	prio, err := c.resolvePriority(cfg.priority)
	if err != nil {
		return nil, err
	}
	nonBlock := !cfg.blocking
	if list := c.pools.Load(); list != nil {
		for _, p := range *list {
			if p.priority == prio && p.nonBlock == nonBlock {
				return p, nil
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var list []*streamPool
	if l := c.pools.Load(); l != nil {
		list = *l
	}
	for _, p := range list {
		if p.priority == prio && p.nonBlock == nonBlock {
			return p, nil
		}
	}
	p := &streamPool{cs: c.ctxState, priority: prio, nonBlock: nonBlock, limit: int(c.limits.streams.Load())}
	list = append(list[:len(list):len(list)], p) // copy on write: readers hold the old list
	c.pools.Store(&list)
	return p, nil
}

// resolvePriority clamps p to the context's range (read once).
func (c *Context) resolvePriority(p Priority) (int, error) {
	r := c.prio.Load()
	if r == nil {
		least, greatest, err := c.StreamPriorityRange()
		if err != nil {
			return 0, err
		}
		r = &[2]int{least, greatest}
		c.prio.Store(r)
	}
	// greatest ≤ least: lower numbers are higher priorities.
	return int(max(min(p, Priority(r[0])), Priority(r[1]))), nil
}

// acquire lends a stream.
func (p *streamPool) acquire(ctx context.Context, c *Context) (*Stream, error) {
	resource.Drain()
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.exit()
	s, err := p.take(ctx)
	if err != nil {
		return nil, err
	}
	// A new holder: a new generation, and everything before it complete (take
	// hands out only streams whose work has finished). No lock: no one else holds
	// the stream, and the calls of its earlier holders fail already (giveBack
	// moved it past their generation).
	gen := s.gen.Load()
	s.doneGen.Store(gen)
	s.gen.Store(gen + 1)
	out := &Stream{stream: s, ctx: c, lease: gen + 1}
	t := p.token(c)
	t.s, t.lease = s, gen+1
	out.tok.Store(t)
	return out, nil
}

// leaseToken gives a lent stream back to its pool when the Stream holding it is
// dropped without Close. A lent Stream is the only holder of its token, so the token
// becomes unreachable with it; its release, registered once with
// resource.ResourceFinalizer (non-blocking), then gives the stream back. Close
// instead takes the token from the Stream and returns it to the pool's free tokens,
// armed for the next lease: registering a finalizer per lease would cost more than
// the rest of AcquireStream and Close together.
type leaseToken struct {
	reg   resource.Registration
	pool  *streamPool
	s     *stream // the stream lent; nil while the token is free
	lease uint64
}

// token returns a free token of the pool, or a new one.
func (p *streamPool) token(c *Context) *leaseToken {
	p.mu.Lock()
	if n := len(p.tokens); n > 0 {
		t := p.tokens[n-1]
		p.tokens[n-1] = nil
		p.tokens = p.tokens[:n-1]
		p.mu.Unlock()
		return t
	}
	p.mu.Unlock()
	t := &leaseToken{pool: p}
	resource.ResourceFinalizer((*leaseToken).dropped, t, false, resource.Kind("stream pool"),
		resource.WithContext(c.res()), resource.CallerSkip(3), resource.At(&t.reg, finalizeToken))
	return t
}

// finalizeToken is a token's finalizer: it queues the release.
func finalizeToken(t *leaseToken) { t.reg.Finalized() }

// dropped is a token's release: the Stream holding it was dropped without Close.
func (t *leaseToken) dropped() error {
	if t.s != nil {
		giveBack(t.s, t.lease)
	}
	return nil
}

// take returns an idle stream whose work has finished, or a new stream; at the
// limit it waits for a release or until ctx is done. The caller is in the context.
func (p *streamPool) take(ctx context.Context) (*stream, error) {
	for {
		p.mu.Lock()
		if p.lent < p.limit {
			// The most recently released first: its memory is warm in the
			// stream's block cache. A stream still busy stays for later.
			for i := len(p.idle) - 1; i >= 0; i-- {
				s := p.idle[i]
				if s.dirty.Load() {
					if done, err := ready(cudaraw.StreamQueryIn(p.cs.h, s.h)); err != nil || !done {
						continue
					}
					s.dirty.Store(false)
				}
				p.idle = append(p.idle[:i], p.idle[i+1:]...)
				p.lent++
				p.mu.Unlock()
				return s, nil
			}
			p.lent++
			p.mu.Unlock()
			s, err := newStream(p.cs, p.nonBlock, p.priority, true)
			if err != nil {
				p.mu.Lock()
				p.lent--
				p.wakeLocked()
				p.mu.Unlock()
				return nil, err
			}
			s.pool = p
			live := p.created.Add(1) - p.destroyed.Load()
			for {
				old := p.peak.Load()
				if live <= old || p.peak.CompareAndSwap(old, live) {
					break
				}
			}
			return s, nil
		}
		ch := make(chan struct{})
		p.waiters = append(p.waiters, ch)
		p.mu.Unlock()
		if err := waitRelease(ctx, ch); err != nil {
			p.mu.Lock()
			for i, w := range p.waiters {
				if w == ch {
					p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
					break
				}
			}
			select {
			case <-ch: // woken meanwhile: pass the turn on
				p.wakeLocked()
			default:
			}
			p.mu.Unlock()
			return nil, fmt.Errorf("cuda: waiting for a pooled stream: %w", err)
		}
	}
}

// The first collection while an acquirer waits, and the longest interval between
// two: long enough that waits for a Close cost no collection, short enough that
// dropped streams come back without a noticeable stall.
const (
	firstWaitCollect = 10 * time.Millisecond
	maxWaitCollect   = time.Second
)

// waitRelease waits for ch (a release woke this waiter) or until ctx is done. A
// Stream dropped without Close goes back only once the collector finds it
// unreachable, and nothing may start a collection while the program waits here: so
// the wait runs one (collect) after firstWaitCollect, and again at doubling
// intervals up to maxWaitCollect, as an allocation that ran out of memory reclaims.
func waitRelease(ctx context.Context, ch chan struct{}) error {
	delay := firstWaitCollect
	t := time.NewTimer(delay)
	defer t.Stop()
	for {
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.C:
			collect()
			delay = min(2*delay, maxWaitCollect)
			t.Reset(delay)
		}
	}
}

// wakeLocked wakes the first waiter, if any. The caller holds p.mu.
func (p *streamPool) wakeLocked() {
	if len(p.waiters) > 0 {
		close(p.waiters[0])
		p.waiters = p.waiters[1:]
	}
}

// put takes back a released stream (already moved to a new generation): idle, or
// destroyed if the pool has maxIdleStreams idle.
func (p *streamPool) put(s *stream) {
	p.mu.Lock()
	p.lent--
	keep := len(p.idle) < maxIdleStreams
	if keep {
		p.idle = append(p.idle, s)
	}
	p.wakeLocked()
	p.mu.Unlock()
	if !keep {
		p.destroyed.Add(1)
		_ = s.reg.Release() // cuStreamDestroy does not wait for the GPU
	}
}

// setLimit changes the pool's limit, waking waiters it admits.
func (p *streamPool) setLimit(n int) {
	p.mu.Lock()
	p.limit = n
	for i := p.lent; i < n && len(p.waiters) > 0; i++ {
		p.wakeLocked()
	}
	p.mu.Unlock()
}

// giveBack ends the lease of s in generation lease: it waits for calls queuing work
// through the lease's Stream, moves the stream to a new generation (the Stream is
// closed from then on) and returns it to its pool. Work queued on it keeps running;
// the next holder gets the stream only once that work has finished.
func giveBack(s *stream, lease uint64) {
	lockCounting(&s.mu)
	if s.closed.Load() || s.gen.Load() != lease {
		s.mu.Unlock()
		return
	}
	s.gen.Add(1)
	s.mu.Unlock()
	s.pool.put(s)
}

// closeLease is Close for a pooled Stream: it gives the stream back and the token to
// the pool's free tokens.
func (s *Stream) closeLease() error {
	t := s.tok.Swap(nil)
	if t == nil {
		return errs.Closed("cuda: stream")
	}
	if s.cs.enter() != nil {
		return nil // the stream went with its context
	}
	giveBack(t.s, t.lease)
	s.cs.exit()
	p := t.pool
	t.s = nil
	p.mu.Lock()
	if len(p.tokens) < maxIdleStreams {
		p.tokens = append(p.tokens, t)
	}
	p.mu.Unlock()
	return nil
}
