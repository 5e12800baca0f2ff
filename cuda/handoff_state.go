package cuda

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gocuda/gocuda/cuda/cudaraw"
)

// Hand-off: ordering memory's uses across streams on the device.
//
// Every operation the package queues orders itself after the earlier conflicting
// uses of each buffer it touches that were queued on other streams, with an event
// recorded on each such stream and waited for by the operation's stream
// (cuStreamWaitEvent): the host never waits. A buffer (the allocation, for views)
// keeps one use per stream since its last write: the stream, its generation then, and
// whether that stream wrote. A read waits for the writes on other streams; a write
// waits for every use on other streams and then, when nothing else touched the
// buffer meanwhile, becomes its only use. So readers on different streams never wait
// for each other, and the common case, a buffer used on one stream, costs a few
// atomic loads and no lock (only); the usual launch and Enqueue then do not even
// hold the buffer: the stream's read lock, which they take anyway, keeps it
// (memBase.fastUse).
//
// The bookkeeping is updated after the operation is queued and before it returns: an
// operation that happens before another in Go (a channel send, a WaitGroup) is seen
// by it. Operations that race (no happens-before between them) are recorded
// conservatively: when another call held the buffer between an operation's plan and
// its record, or a stream it waited for was locked by a call at its plan, the
// operation adds its use instead of replacing the others, so that the free, which
// waits for every use recorded, never runs before any of them.
//
// This file holds that machinery: each allocation's uses (access), an operation's
// plan and record, the sets of uses to wait for (deps) and the waits on the device
// (handOff, fenceFor). The API is in handoff.go, a launch's hand-off in
// handoff_launch.go.

// use is a stream's use of memory since the memory's last write.
type use struct {
	s     *stream
	gen   uint64 // s's generation at the use
	write bool   // the stream wrote (some of its uses since the last write did)
	// synced: the stream has waited for every write on other streams recorded
	// since, so that its next read waits for nothing; it waited for everything
	// those streams had done up to the memory's use number waited.
	synced bool
	seq    uint64 // the memory's use number at the stream's last use
	waited uint64
}

// complete reports whether the use's work is known to have finished: its stream was
// handed to a new holder after a query found its work done.
func (u use) complete() bool { return u.gen <= u.s.doneGen.Load() }

// current reports whether u's stream is still in the generation of the use (the
// caller holds the stream's lock).
func (u use) current() bool { return !u.s.closed.Load() && u.s.gen.Load() == u.gen }

// access is the hand-off state of an allocation (memBase.acc; views use their
// root's).
type access struct {
	// only is set when the memory has exactly one use, on that stream, with its
	// generation and write flag in onlyTag (gen<<1 | write): operations on it
	// read these and take no lock.
	only    atomic.Pointer[stream]
	onlyTag atomic.Uint64

	mu     sync.Mutex
	uses   []use  // one per stream; mu
	seq    uint64 // uses recorded (slow path); mu
	inline [2]use
}

// planned is what plan learned for record.
type planned struct {
	users uint64 // the allocation's hold at the plan (see hold)
	fast  bool   // the use is already recorded: nothing to do
	// busy: a stream waited for had calls queuing work at the plan, which may
	// include fast uses of the memory (fastUse) queued after the hand-off's event:
	// the operation is not alone.
	busy bool
	seq  uint64 // for a read: the use number up to which it waits for the writes
}

// plan adds to d the uses that an operation on t must wait for: for a read, the
// writes on other streams; for a write, every use on other streams. The caller
// holds m.
func (m *memBase) plan(t *stream, write bool, d *deps) planned {
	o := m.owner()
	if cs := t.capture.Load(); cs != nil {
		// Captured, not run: leased for the graph; Exec.Launch orders it.
		cs.add(o, write)
		return planned{fast: true}
	}
	p := planned{users: o.hold.users.Load()}
	a := &o.acc
	if a.onlyOn(t, write) {
		p.fast = true
		return p
	}
	a.mu.Lock()
	// Operations that use the memory without holding it (fastUse) take the general
	// path from here on, until a record makes a stream its only user again.
	if s := a.only.Load(); s != nil && s != t {
		a.only.Store(nil)
	}
	p.seq = a.seq
	if !write {
		for _, u := range a.uses {
			if u.s == t && u.synced {
				p.seq = u.waited
				a.mu.Unlock()
				return p // ordered after every write already
			}
		}
	}
	for _, u := range a.uses {
		if u.s != t && (write || u.write) && !u.complete() {
			d.add(u)
			// A fast use of the memory on u.s that read only before it was cleared
			// above may still be queuing (under u.s's read lock): its work may come
			// after the event the hand-off records. Then the operation does not
			// replace u.s's use, nor count as synced (record).
			if !u.s.mu.TryLock() {
				p.busy = true
			} else {
				u.s.mu.Unlock()
			}
		}
	}
	a.mu.Unlock()
	return p
}

// fastUse reports whether an operation queuing work on t, under t's read lock
// (lockOpen), may use the allocation m without holding it: m is open and its one
// use is a use on t (onlyOn). Such an operation records nothing and orders nothing,
// and is kept safe by the stream's lock instead of m's hold (two read-modify-writes
// fewer per operand): m's release shuts the hold and then drains the streams of m's
// uses (retire), so that it waits for the operation or the operation sees the hold
// shut; and an operation on another stream that orders itself after m's uses
// clears only, which sends later operations to the general path, and tries the
// locks of the streams it waits for (plan): where a call holds one, the operation
// keeps that stream's use (record), as for a racing operation that held m. A use
// that a fast operation queues is therefore never missed by a free, nor dropped
// by a hand-off.
func (m *memBase) fastUse(t *stream, write bool) bool {
	return !m.hold.closed() && m.acc.onlyOn(t, write)
}

// onlyOn reports whether the allocation's one use is on t, in t's generation, and
// a write if write: an operation on t then waits for nothing and records nothing
// (plan's fast case). Enqueue and Launch test it for each use as they hold it.
func (a *access) onlyOn(t *stream, write bool) bool {
	if a.only.Load() != t {
		return false
	}
	tag := a.onlyTag.Load()
	return tag>>1 == t.gen.Load() && (!write || tag&1 == 1)
}

// record records that an operation planned with p was queued on t. The caller
// still holds m.
func (m *memBase) record(t *stream, write bool, p planned) {
	if streamCheck.on.Load() {
		checkUsed(m.owner(), t, write)
	}
	if p.fast {
		return
	}
	o := m.owner()
	a := &o.acc
	gen := t.gen.Load()
	a.mu.Lock()
	// First, no plan takes the fast path on the uses about to change: a plan that
	// read only before this store entered the memory's hold before it, which the
	// load of now below sees (sequentially consistent atomics), so this operation
	// does not take itself for the only user and keeps that plan's stream's use.
	a.only.Store(nil)
	now := o.hold.users.Load()
	// Alone: this operation was the only call holding the memory at its plan, and
	// none entered since (the counts of enters agree).
	alone := uint32(p.users)&insideMax == 1 && p.users>>32 == now>>32 && !p.busy
	a.seq++
	if write && alone {
		clear(a.uses)
		a.uses = append(a.inline[:0], use{s: t, gen: gen, write: true, synced: true, seq: a.seq, waited: a.seq})
	} else {
		// t waited for the writes there were at the plan: it is synced unless
		// another call may have added one since.
		found := false
		keep := a.uses[:0]
		for _, u := range a.uses {
			switch {
			case u.s == t:
				u.gen, u.write, u.synced, u.seq, found = gen, u.write || write, alone, a.seq, true
				u.waited = p.seq
			case u.complete():
				continue // finished: nothing will wait for it
			case write:
				u.synced = false // a write it has not waited for
			}
			keep = append(keep, u)
		}
		clear(a.uses[len(keep):])
		a.uses = keep
		if !found {
			if a.uses == nil {
				a.uses = a.inline[:0]
			}
			a.uses = append(a.uses, use{s: t, gen: gen, write: write, synced: alone, seq: a.seq, waited: p.seq})
		}
	}
	if len(a.uses) == 1 {
		u := a.uses[0]
		tag := u.gen << 1
		if u.write {
			tag |= 1
		}
		a.onlyTag.Store(tag)
		a.only.Store(u.s)
	} else {
		a.only.Store(nil)
	}
	a.mu.Unlock()
}

// allocated records the allocation of m on s, in generation gen: a write, so that
// work on other streams waits for it.
func (m *memBase) allocated(s *stream, gen uint64) {
	a := &m.acc
	a.uses = append(a.inline[:0], use{s: s, gen: gen, write: true, synced: true})
	a.onlyTag.Store(gen<<1 | 1)
	a.only.Store(s)
}

// freeStream returns a use whose stream, still in the generation of that use, has
// waited on the device for the work of every other use not known complete: freeing
// there needs no join. Either the only use, or a reader that waited for the
// writes, when the other uses are writes it waited for (a consumer after its
// producer).
func freeStream(uses []use) (use, bool) {
	if len(uses) == 1 {
		return uses[0], true
	}
	for _, u := range uses {
		if !u.synced {
			continue
		}
		covered := true
		for _, v := range uses {
			if v.s != u.s && !v.complete() && (!v.write || v.seq > u.waited) {
				covered = false
				break
			}
		}
		if covered {
			return u, true
		}
	}
	return use{}, false
}

// takeUses returns m's uses and forgets them; the caller has shut m's hold (no
// operation records any more).
func (m *memBase) takeUses() []use {
	a := &m.acc
	a.mu.Lock()
	defer a.mu.Unlock()
	u := a.uses
	a.uses = nil
	a.only.Store(nil)
	return u
}

// snapshotUses returns a copy of m's uses.
func (m *memBase) snapshotUses(d *deps) {
	a := &m.owner().acc
	a.mu.Lock()
	for _, u := range a.uses {
		if !u.complete() {
			d.add(u)
		}
	}
	a.mu.Unlock()
}

// deps is a set of uses to wait for, one per stream, without allocating for the
// first few.
type deps struct {
	n      int
	inline [4]use
	more   []use
}

// add adds u, keeping the later generation for a stream already there (the event
// recorded for it covers the earlier one).
func (d *deps) add(u use) {
	for i := range d.n {
		x := d.at(i)
		if x.s == u.s {
			x.gen = max(x.gen, u.gen)
			return
		}
	}
	if d.n < len(d.inline) {
		d.inline[d.n] = u
	} else {
		d.more = append(d.more, u)
	}
	d.n++
}

// without returns a copy of d without its i-th use.
func (d *deps) without(i int) *deps {
	out := new(deps)
	for j := range d.n {
		if j != i {
			out.add(*d.at(j))
		}
	}
	return out
}

func (d *deps) at(i int) *use {
	if i < len(d.inline) {
		return &d.inline[i]
	}
	return &d.more[i-len(d.inline)]
}

// handOff makes work queued on t from now on wait, on the device, for the uses in
// d: an event recorded now on each use's stream (its final event if it was closed)
// that t waits for.
func (ms *memState) handOff(d *deps, t *stream) error {
	for i := range d.n {
		if err := ms.orderAfter(*d.at(i), t); err != nil {
			return err
		}
	}
	return nil
}

// orderAfter makes work queued on t from now on wait for u's work. u's stream is
// of ms's context; t may be of another (copyPeer).
func (ms *memState) orderAfter(u use, t *stream) error {
	t.waits.Add(1)
	s := u.s
	ev, err := ms.getHandoffEvent()
	if err != nil {
		return err
	}
	s.mu.RLock()
	if !s.closed.Load() {
		err = cudaraw.EventRecordIn(ms.cs.h, ev, s.h)
		s.mu.RUnlock()
		if err == nil {
			// In t's context: t may be of another context than u's stream (a copy
			// between devices waits for the source's uses; the event may be of
			// another context or device).
			err = t.use(func(h cudaraw.CUstream) error { return cudaraw.StreamWaitEventIn(t.cs.h, h, ev, 0) })
		}
		if err == nil && streamCheck.on.Load() {
			checkOrdered(s, t)
		}
		// The wait is queued (or failed): the event may be recorded again.
		ms.putHandoffEvent(ev)
		return err
	}
	s.mu.RUnlock()
	ms.putHandoffEvent(ev)
	final, err := waitableFinal(ms.cs, s)
	if err != nil || final == nil {
		return err
	}
	err = t.use(func(h cudaraw.CUstream) error { return cudaraw.StreamWaitEventIn(t.cs.h, h, final.h, 0) })
	if err == nil && streamCheck.on.Load() {
		checkOrdered(s, t)
	}
	return err
}

// fenceFor returns a fence for the work of the uses in d: the one use's fence, or
// an event recorded on the disposal stream after it waited for all of them.
func (ms *memState) fenceFor(d *deps) (fence, error) {
	switch d.n {
	case 0:
		return fence{done: true}, nil
	case 1:
		return ms.fenceAfter(*d.at(0))
	}
	j, err := ms.cs.disposalStream()
	if err != nil {
		return fence{}, err
	}
	if err := ms.handOff(d, j); err != nil {
		return fence{}, err
	}
	ev, err := ms.getEvent()
	if err != nil {
		return fence{}, err
	}
	if err := j.use(func(h cudaraw.CUstream) error { return cudaraw.EventRecordIn(ms.cs.h, ev, h) }); err != nil {
		ms.putEvent(ev)
		return fence{}, err
	}
	return fence{ev: ev}, nil
}

// usesOf puts the uses not known complete in d.
func usesOf(uses []use, d *deps) {
	for _, u := range uses {
		if u.s != nil && !u.complete() {
			d.add(u)
		}
	}
}

// errHandOff wraps a hand-off failure.
func errHandOff(err error) error {
	return fmt.Errorf("cuda: ordering after another stream's work: %w", err)
}

// finalOf returns the event marking the end of s's work before its generation moved
// on (nil if the stream could not record one).
func finalOf(s *stream) *event {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.final
}

// waitableFinal returns s's final event; where s could not record one (event
// creation failed when it was destroyed), it waits for the whole context instead,
// which is rare and the only way left to order after s's work.
func waitableFinal(c *ctxState, s *stream) (*event, error) {
	if final := finalOf(s); final != nil {
		return final, nil
	}
	return nil, cudaraw.CtxSynchronizeIn(c.h)
}
