package cuda

import (
	"errors"

	"github.com/gocuda/gocuda/cuda/cudaraw"
)

// How a copy or memset runs: queued on the caller's stream or, for the forms without
// one, on the stream syncStreamFor picks; ordered after the memory's conflicting
// uses on other streams (hand-off) and recorded as their use; then, for the forms
// that wait, waited for on a flag slot (copyflag.go) or an event, holding no lock.
// The staged and bounced copies (staged.go, bounce.go) run through it too.

// run queues op, which uses a (writing it if aWrite) and reads b (b may be nil; both
// acquired by the caller, and released here), in their context, which the caller has
// entered: on s, or with s nil on the stream syncStreamFor picks, and then waits for
// op. Either way op is ordered after the conflicting uses of a and b on other streams
// (hand-off) and recorded as their use.
func run(s *Stream, op func(h cudaraw.CUstream) error, a *memBase, aWrite bool, b *memBase) error {
	return runOn(s, func(t *stream) error { return op(t.h) }, a, aWrite, b, 0)
}

// runOn is run for an op that takes the stream (with its handle, t.h). bytes, when
// positive, is the size of the copy that ends op: the synchronous form's wait polls
// for as long as that copy should take before it blocks (waitCopy).
func runOn(s *Stream, op func(t *stream) error, a *memBase, aWrite bool, b *memBase, bytes int) error {
	ms := a.ms
	return runRecorded(s, func(t *stream, w *waiter) error {
		if err := op(t); err != nil || w.ev == 0 {
			return err
		}
		if err := cudaraw.EventRecordIn(ms.cs.h, w.ev, t.h); err != nil {
			return &errUnrecorded{err}
		}
		return nil
	}, a, aWrite, b, bytes, evSync)
}

// evMode says when runRecorded gives its op something to signal after its work
// for the wait: for the synchronous forms only (evSync), always, or never; with
// evFlag, a flag slot when one is free (the op is a copyRecord), else an event.
type evMode uint8

const (
	evSync evMode = iota
	evAlways
	evNever
	evFlag evMode = 4
)

// waiter is what an op signals after its work for runRecorded's wait: a flag
// slot (flag.word not nil) or an event (ev not 0), and the stream it queued on.
type waiter struct {
	ev   cudaraw.CUevent
	flag flagSlot
	t    *stream
}

// runRecorded is runOn for an op that signals w after its work itself (as evs
// says), failing with an *errUnrecorded when only the signal failed; it then waits
// for the signal.
func runRecorded(s *Stream, op func(t *stream, w *waiter) error, a *memBase, aWrite bool, b *memBase, bytes int, evs evMode) error {
	ms := a.ms
	var w waiter
	mode := evs &^ evFlag
	err := queue(ms, s, op, a, aWrite, b, &w, mode == evAlways || (mode == evSync && s == nil), evs&evFlag != 0)
	a.leave()
	if b != nil {
		b.leave()
	}
	switch {
	case w.flag.word != nil:
		// Wait for the copy holding no lock, then give the slot back, unless
		// the stream may still write it (a failed op queued no write).
		reuse := true
		if err == nil {
			reuse, err = ms.waitFlag(&w.flag, w.t, bytes)
		}
		if reuse {
			ms.putFlag(w.flag)
		}
	case w.ev != 0:
		// Wait for the copy holding no lock, then give the event back.
		if err == nil {
			err = ms.waitCopy(w.ev, bytes)
		}
		ms.putHandoffEvent(w.ev)
	}
	if err != nil {
		return ms.cs.faulted(err, "a copy or memset", w.t)
	}
	return nil
}

// queue queues op for run; with withWait it also gives op in *w something to
// signal after its work: a flag slot when flag allows one and one is free, else an
// event to record.
func queue(ms *memState, s *Stream, op func(t *stream, w *waiter) error, a *memBase, aWrite bool, b *memBase, w *waiter, withWait, flag bool) error {
	var t *stream
	if s != nil {
		t = s.stream
	} else {
		t = ms.syncStreamFor(a)
	}
	if withWait && flag {
		w.flag = ms.getFlag()
	}
	if withWait && w.flag.word == nil {
		// A plain event: the GPU completes it sooner than a blocking-sync one, and
		// the wait blocks all the same once it stops polling (the primary context
		// is CU_CTX_SCHED_BLOCKING_SYNC).
		e, err := ms.getHandoffEvent()
		if err != nil {
			return err
		}
		w.ev = e
	}
	// The stream picked without s may be closed by its owner before the work is
	// queued: then pick again (the default stream, which is never closed).
	for retry := s == nil && t != ms.defStream; ; retry = false {
		var p opPlan
		p.add(a, aWrite)
		if b != nil {
			p.add(b, false)
		}
		p.plan(t)
		if err := p.handOff(t); err != nil {
			if retry && errors.Is(err, ErrClosed) {
				t = ms.defStream
				continue
			}
			return err
		}
		if err := lockOpen(s, t); err != nil {
			if retry {
				t = ms.defStream
				continue
			}
			return err
		}
		w.t = t
		err := op(t, w)
		if err == nil || queued(err) {
			p.record(t)
		}
		t.mu.RUnlock()
		return err
	}
}
