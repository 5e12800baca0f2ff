package resource

import (
	"errors"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gocuda/gocuda/internal/rescore"
)

const (
	laneNonBlocking = 0
	laneBlocking    = 1
)

// workerDelay is how long the background worker lets releases coalesce
// after being woken before it drains the non-blocking lane.
const workerDelay = 100 * time.Millisecond

// lane is a lock-free Treiber stack of queued registrations: push is one
// CAS, taking everything is one Swap, the empty check one Load.
type lane struct {
	head     atomic.Pointer[Registration]
	_        [56]byte // keep the heads on their own cache lines
	pending  atomic.Int64
	released atomic.Uint64
}

// queue is the releaser: lanes, worker, capture gate, counters and hooks.
// The package-level functions use std; tests build isolated queues.
type queue struct {
	lanes [2]lane

	wake      chan struct{} // buffered(1): finalizer → worker wake-up
	stop      chan struct{}
	done      chan struct{}
	startOnce sync.Once
	started   atomic.Bool
	stopOnce  sync.Once
	delay     time.Duration

	// Capture gate. mu is held only for these transitions, never while
	// collecting garbage or running releases.
	mu       sync.Mutex
	cond     sync.Cond
	captures int // graph captures in progress
	waiters  int // BeginCapture calls waiting for running releases
	reclaims int // Reclaim calls running releases
	inflight int // records taken from a lane and not yet finished
	sleepers int // goroutines waiting on cond

	// gate is the part of the capture gate that every release passes, so
	// that passing it takes no lock: the low 32 bits count the release
	// functions executing right now (any path), the high bits the captures
	// in progress or starting (captures+waiters, changed only with mu
	// held, together with those fields).
	gate atomic.Int64

	hooks     atomic.Pointer[rescore.ContextHooks]
	onFailure atomic.Pointer[func(Failure)]

	registered atomic.Uint64
	explicit   atomic.Uint64
	cancelled  atomic.Uint64
	failed     atomic.Uint64
	dropped    atomic.Uint64
	fired      atomic.Uint64

	leakOn atomic.Bool
	leakMu sync.Mutex
	leaks  map[leakKey]uint64
}

// std is the default queue used by the package-level API. It is a value,
// not a pointer, so that Drain's empty check is a single atomic load from
// a fixed address.
var std queue

func init() {
	std.init(workerDelay)
	if on, err := strconv.ParseBool(os.Getenv("GOCUDA_LEAKS")); err == nil && on {
		std.leakOn.Store(true)
	}
}

func newQueue(delay time.Duration) *queue {
	q := new(queue)
	q.init(delay)
	return q
}

func (q *queue) init(delay time.Duration) {
	q.wake = make(chan struct{}, 1)
	q.stop = make(chan struct{})
	q.done = make(chan struct{})
	q.delay = delay
	q.cond.L = &q.mu
	q.leaks = make(map[leakKey]uint64)
}

// start launches the worker once; the fast path is one atomic load.
func (q *queue) start() {
	q.startOnce.Do(func() {
		q.started.Store(true)
		go q.worker()
	})
}

// close stops the worker (tests).
func (q *queue) close() {
	q.stopOnce.Do(func() { close(q.stop) })
	if q.started.Load() {
		<-q.done
	}
}

// worker drains the non-blocking lane in the background. It sleeps on the
// wake channel while there is nothing to do, then lets a burst of
// finalizers coalesce for q.delay before draining.
func (q *queue) worker() {
	exited := false
	defer func() {
		if exited {
			close(q.done)
		} else {
			// A release function called runtime.Goexit: keep a worker.
			go q.worker()
		}
	}()
	t := time.NewTimer(time.Hour)
	t.Stop()
	for {
		select {
		case <-q.wake:
		case <-q.stop:
			exited = true
			return
		}
		if q.delay > 0 {
			t.Reset(q.delay)
			select {
			case <-t.C:
			case <-q.stop:
				exited = true
				return
			}
		}
		q.drainLane(laneNonBlocking)
	}
}

// fire is the finalizer hook: it only records obj, flips the state and
// pushes the registration. No lock, no CUDA call, no allocation.
func (q *queue) fire(r *Registration, p unsafe.Pointer) {
	// Store obj first: if Release or Cancel won the state, this keeps obj
	// alive for as long as they may still use r.target().
	atomic.StorePointer(&r.obj, p)
	l := r.lane()
	// Count it pending before it can be claimed, so that a Release or
	// Cancel claiming it right away never drives pending negative.
	q.lanes[l].pending.Add(1)
	if !r.state.CompareAndSwap(stateArmed, stateQueued) {
		q.lanes[l].pending.Add(-1)
		return
	}
	q.fired.Add(1)
	q.push(l, r, l == laneNonBlocking)
}

// push adds r to lane l with one CAS. If wake is set and the lane was
// empty, it wakes the worker with a non-blocking send.
func (q *queue) push(l int, r *Registration, wake bool) {
	h := &q.lanes[l].head
	for {
		old := h.Load()
		r.next = old
		if h.CompareAndSwap(old, r) {
			if wake && old == nil {
				select {
				case q.wake <- struct{}{}:
				default:
				}
			}
			return
		}
	}
}

// pushBack returns an unfinished FIFO list to lane l (capture started
// mid-batch, or a release function called runtime.Goexit).
func (q *queue) pushBack(l int, list *Registration) {
	n := 1
	tail := list
	for tail.next != nil {
		tail = tail.next
		n++
	}
	h := &q.lanes[l].head
	for {
		old := h.Load()
		tail.next = old
		if h.CompareAndSwap(old, list) {
			break
		}
	}
	q.mu.Lock()
	q.inflight -= n
	q.signal()
	q.mu.Unlock()
	if l == laneNonBlocking {
		// Later pushes find the lane non-empty and do not wake the
		// worker: wake it now (it does nothing while the gate is closed).
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}

// signal wakes cond waiters; q.mu must be held.
func (q *queue) signal() {
	if q.sleepers > 0 {
		q.cond.Broadcast()
	}
}

// wait blocks on cond; q.mu must be held.
func (q *queue) wait() {
	q.sleepers++
	q.cond.Wait()
	q.sleepers--
}

// enter passes the capture gate for one release: it fails while a capture
// is in progress or about to start, and otherwise counts the release as
// running.
func (q *queue) enter() bool {
	for {
		v := q.gate.Load()
		if v>>gateShift != 0 {
			return false
		}
		if q.gate.CompareAndSwap(v, v+1) {
			return true
		}
	}
}

// leave ends a release started with enter.
func (q *queue) leave(fromLane bool) {
	v := q.gate.Add(-1)
	if !fromLane && v>>gateShift == 0 {
		// Nobody waits for this release: a BeginCapture waiting for
		// running releases has closed the gate first.
		return
	}
	q.mu.Lock()
	if fromLane {
		q.inflight--
	}
	q.signal()
	q.mu.Unlock()
}

// gateShift is the position of the capture count in gate; gateClosed
// counts one capture there.
const (
	gateShift        = 32
	gateClosed int64 = 1 << gateShift
)

// running returns the number of release functions executing right now.
func (q *queue) running() int { return int(q.gate.Load() & (gateClosed - 1)) }

// drainLane takes everything queued in lane l and runs it, unless the
// capture gate is closed. It returns the number of release functions run.
func (q *queue) drainLane(l int) (ran int) {
	q.mu.Lock()
	if q.captures+q.waiters > 0 {
		q.mu.Unlock()
		return 0
	}
	head := q.lanes[l].head.Swap(nil)
	if head == nil {
		q.mu.Unlock()
		return 0
	}
	// The stack is newest first: reverse it so releases run oldest first.
	var list *Registration
	n := 0
	for r := head; r != nil; n++ {
		next := r.next
		r.next = list
		list = r
		r = next
	}
	q.inflight += n
	q.mu.Unlock()

	rest := list
	defer func() {
		if rest != nil {
			q.pushBack(l, rest)
		}
	}()
	for rest != nil {
		if !q.enter() {
			break // a capture is starting: the rest waits for its end
		}
		r := rest
		rest = r.next
		r.next = nil
		switch {
		case r.state.CompareAndSwap(stateQueued, stateDone):
			if q.runQueued(l, r, false) {
				ran++
			}
		case r.state.CompareAndSwap(stateDeferred, stateDone):
			if q.runQueued(l, r, true) {
				ran++
			}
		default:
			// Claimed by Release or Cancel after it was queued; they did
			// the accounting.
			q.leave(true)
		}
	}
	return ran
}

// runQueued runs one record taken and claimed from lane l, as an explicit
// release if explicit (deferred by a capture), otherwise as a finalizer
// path release; q.enter has succeeded. It reports whether the release
// function ran (false if dropped).
func (q *queue) runQueued(l int, r *Registration, explicit bool) (ran bool) {
	p := atomic.LoadPointer(&r.obj)
	var err error
	dropped, finished := false, false
	defer func() {
		if !finished {
			err = errGoexit
		}
		q.lanes[l].pending.Add(-1)
		switch {
		case dropped:
			q.dropped.Add(1)
		case explicit:
			q.explicit.Add(1)
		default:
			q.lanes[l].released.Add(1)
		}
		if err != nil {
			q.failed.Add(1)
			q.report(Failure{Kind: r.kindName(), Err: err, Blocking: r.blocking, Explicit: explicit})
		}
		if !explicit && r.site != nil {
			q.countLeak(r)
		}
		atomic.StorePointer(&r.obj, nil)
		r.fn, r.ctx = nil, nil
		q.leave(true)
	}()
	err, dropped = q.execute(r, p)
	finished = true
	return !dropped
}

// runExplicit runs r's release for Release; q.enter has succeeded.
func (q *queue) runExplicit(r *Registration, p unsafe.Pointer) (err error) {
	dropped, finished := false, false
	defer func() {
		if !finished {
			err = errGoexit
		}
		switch {
		case dropped:
			q.dropped.Add(1)
			err = ErrContextDestroyed
		default:
			q.explicit.Add(1)
		}
		if err != nil && !dropped {
			q.failed.Add(1)
		}
		r.fn, r.ctx = nil, nil
		q.leave(false)
	}()
	err, dropped = q.execute(r, p)
	finished = true
	return err
}

var errGoexit = errors.New("resource: release function called runtime.Goexit")

// execute runs r's release function on obj p with r's context current. It
// reports dropped if the context no longer exists.
func (q *queue) execute(r *Registration, p unsafe.Pointer) (err error, dropped bool) {
	ctx := r.ctx
	if d, ok := ctx.(rescore.DirectContext); ok {
		alive, herr := callDirect(d)
		switch {
		case herr != nil:
			return herr, false
		case !alive:
			return nil, true
		}
		return releaseOutcome(invokeRelease(r, p))
	}
	h := q.hooks.Load()
	if ctx == nil || h == nil {
		return releaseOutcome(invokeRelease(r, p))
	}
	if h.Alive != nil {
		alive, herr := callAlive(h.Alive, ctx)
		if herr != nil {
			return herr, false
		}
		if !alive {
			return nil, true
		}
	}
	if h.Run == nil {
		return invokeRelease(r, p), false
	}
	c := &hookCall{r: r, p: p}
	rerr := callRun(h.Run, ctx, c.run)
	switch {
	case !c.called && errors.Is(rerr, ErrContextDestroyed):
		return nil, true
	case rerr != nil && c.called:
		return errors.Join(c.err, rerr), false
	case rerr != nil:
		return rerr, false
	case !c.called:
		return errors.New("resource: the context hook Run did not call the release function"), false
	}
	return releaseOutcome(c.err)
}

// releaseOutcome turns a release function's error into execute's result: an error
// wrapping ErrContextDestroyed says the context went (with the resource) before the
// release could run, which drops it.
func releaseOutcome(err error) (error, bool) {
	if err != nil && errors.Is(err, ErrContextDestroyed) {
		return nil, true
	}
	return err, false
}

// hookCall is the release function as the Run hook calls it: the call
// and its outcome in one allocation.
type hookCall struct {
	r      *Registration
	p      unsafe.Pointer
	called bool
	err    error
}

func (c *hookCall) run() {
	if c.called {
		return
	}
	c.called = true
	c.err = invokeRelease(c.r, c.p)
}

// invokeRelease calls the release function, turning a panic into a
// *PanicError. Its frame marks "inside a release function" for
// releaseDepth.
//
//go:noinline
func invokeRelease(r *Registration, p unsafe.Pointer) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = newPanicError(v)
		}
	}()
	return r.fn.call(p)
}

// drain is Drain for q.
func (q *queue) drain() {
	if q.lanes[laneNonBlocking].head.Load() != nil {
		q.drainLane(laneNonBlocking)
	}
}

// beginCapture closes the gate for a graph capture (rescore.BeginCapture).
func (q *queue) beginCapture() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.reclaims > 0 {
		return ErrReclaimInProgress
	}
	// Close the gate first: from here on no release starts, so the count
	// of running ones only goes down.
	if q.gate.Add(gateClosed)&(gateClosed-1) > 0 {
		// Wait for releases in progress (a routine drain or an explicit
		// Release on another goroutine), except those on our own stack
		// (BeginCapture called from a release function).
		q.waiters++
		self := -1
		for q.running() > 0 {
			if self < 0 {
				q.mu.Unlock()
				self = releaseDepth()
				q.mu.Lock()
				continue
			}
			if q.running() <= self {
				break
			}
			q.wait()
		}
		q.waiters--
	}
	q.captures++
	return nil
}

// endCapture reopens the gate when the last capture ends and runs what the
// non-blocking lane collected meanwhile (rescore.EndCapture).
func (q *queue) endCapture() {
	q.mu.Lock()
	if q.captures == 0 {
		q.mu.Unlock()
		panic("resource: EndCapture without matching BeginCapture")
	}
	q.captures--
	q.gate.Add(-gateClosed)
	open := q.captures+q.waiters == 0
	q.mu.Unlock()
	if open {
		q.drainLane(laneNonBlocking)
	}
}

// maxReclaimRounds bounds Reclaim's collect-and-release rounds. A second
// round is only made when the first found something, to release objects
// that were reachable only from objects released in the round before.
const maxReclaimRounds = 4

// reclaim is Reclaim for q.
func (q *queue) reclaim() (int, error) {
	total := 0
	// The caches above this package (rescore.OnReclaim) let go of what they hold
	// first, so that this collection finds it and this Reclaim destroys it.
	rescore.RunReclaim()
	for round := 0; round < maxReclaimRounds; round++ {
		before := q.fired.Load()
		collectGarbage()
		n, err := q.releaseAll()
		total += n
		if err != nil {
			return total, err
		}
		if q.fired.Load() == before {
			break
		}
	}
	return total, nil
}

// releaseAll runs both lanes now and waits for releases that other
// goroutines took from the lanes before us.
func (q *queue) releaseAll() (int, error) {
	q.mu.Lock()
	if q.captures+q.waiters > 0 {
		q.mu.Unlock()
		return 0, ErrCaptureInProgress
	}
	q.reclaims++
	q.mu.Unlock()

	n := q.drainLane(laneNonBlocking)
	n += q.drainLane(laneBlocking)

	q.mu.Lock()
	if q.inflight > 0 {
		q.mu.Unlock()
		nested := releaseDepth() > 0
		q.mu.Lock()
		// Called from a release function, our own batch is in flight:
		// waiting would deadlock, so only run what we took.
		for !nested && q.inflight > 0 {
			q.wait()
		}
	}
	q.reclaims--
	q.mu.Unlock()
	return n, nil
}
