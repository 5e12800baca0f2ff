package cuda

import (
	"context"
	"fmt"

	"github.com/gocuda/gocuda/cuda/cudaraw"
)

// Waiting for the GPU work on memory: a context's pools of events (blocking-sync
// ones for host waits, plain ones for hand-offs between streams) and fences, which
// mark the end of the work that last used a block or a buffer.

// getEvent returns a blocking-sync event of the context's pool, for host waits.
func (ms *memState) getEvent() (cudaraw.CUevent, error) {
	return ms.takeEvent(&ms.events, cudaraw.CU_EVENT_DISABLE_TIMING|cudaraw.CU_EVENT_BLOCKING_SYNC)
}

// getHandoffEvent returns an event for a hand-off between streams: without
// CU_EVENT_BLOCKING_SYNC, which makes a stream's wait for it slower
// (BenchmarkHandoff).
func (ms *memState) getHandoffEvent() (cudaraw.CUevent, error) {
	if ev := ms.hlast.Swap(0); ev != 0 {
		return cudaraw.CUevent(ev), nil
	}
	return ms.takeEvent(&ms.hevents, cudaraw.CU_EVENT_DISABLE_TIMING)
}

func (ms *memState) takeEvent(pool *[]cudaraw.CUevent, flags cudaraw.CUevent_flags) (cudaraw.CUevent, error) {
	ms.evMu.Lock()
	if n := len(*pool); n > 0 {
		ev := (*pool)[n-1]
		*pool = (*pool)[:n-1]
		ms.evMu.Unlock()
		return ev, nil
	}
	ms.evMu.Unlock()
	var ev cudaraw.CUevent
	if err := cudaraw.EventCreateIn(ms.cs.h, &ev, uint32(flags)); err != nil {
		return 0, fmt.Errorf("cuda: creating an event: %w", err)
	}
	return ev, nil
}

// putEvent returns an event of getEvent to the pool. Recording it again is safe once
// every query, synchronization or stream wait of its last record has been issued.
func (ms *memState) putEvent(ev cudaraw.CUevent) { ms.giveEvent(&ms.events, ev) }

// putHandoffEvent returns an event of getHandoffEvent: into the one-event slot
// that a hand-off takes without a lock, else to the pool.
func (ms *memState) putHandoffEvent(ev cudaraw.CUevent) {
	if ev != 0 && ms.hlast.CompareAndSwap(0, uint64(ev)) {
		return
	}
	ms.giveEvent(&ms.hevents, ev)
}

func (ms *memState) giveEvent(pool *[]cudaraw.CUevent, ev cudaraw.CUevent) {
	if ev == 0 {
		return
	}
	ms.evMu.Lock()
	*pool = append(*pool, ev)
	ms.evMu.Unlock()
}

// waitEvent waits for ev on the host: polling, then yielding, then blocking.
func (ms *memState) waitEvent(ev cudaraw.CUevent) error {
	h := ms.cs.h
	return wait(func() (bool, error) { return ready(cudaraw.EventQueryIn(h, ev)) },
		func() error { return cudaraw.EventSynchronizeIn(h, ev) })
}

// syncInternal waits for one of the package's own streams (never closed).
func (ms *memState) syncInternal(s *stream) error {
	h := ms.cs.h
	return wait(func() (bool, error) { return ready(cudaraw.StreamQueryIn(h, s.h)) },
		func() error { return cudaraw.StreamSynchronizeIn(h, s.h) })
}

// fence marks the end of the GPU work that last used a block: an event recorded on
// the stream at release, or the final event of a stream closed since, or nothing
// (no GPU work used it).
type fence struct {
	ev    cudaraw.CUevent // from the context's event pool; 0 if none
	final *event          // a closed stream's final event (kept alive by this reference)
	done  bool
}

// fenceAfter returns a fence for u's work: an event recorded now on its stream, or
// the final event of a stream closed since, or nothing if the work is known complete.
func (ms *memState) fenceAfter(u use) (fence, error) {
	if u.s == nil || u.complete() {
		return fence{done: true}, nil
	}
	s := u.s
	ev, err := ms.getEvent()
	if err != nil {
		return fence{}, err
	}
	s.mu.RLock()
	if !s.closed.Load() {
		err := cudaraw.EventRecordIn(ms.cs.h, ev, s.h)
		s.mu.RUnlock()
		if err != nil {
			ms.putEvent(ev)
			return fence{}, err
		}
		return fence{ev: ev}, nil
	}
	s.mu.RUnlock()
	ms.putEvent(ev)
	final, err := waitableFinal(ms.cs, s)
	if err != nil {
		return fence{}, err
	}
	if final == nil {
		return fence{done: true}, nil
	}
	return fence{final: final}, nil
}

func (f *fence) event() cudaraw.CUevent {
	if f.final != nil {
		return f.final.h
	}
	return f.ev
}

// poll reports, without waiting, whether the fenced work has finished.
func (f *fence) poll(ms *memState) bool {
	if f.done {
		return true
	}
	ok, err := ready(cudaraw.EventQueryIn(ms.cs.h, f.event()))
	if err != nil || !ok {
		return false
	}
	f.clear(ms)
	return true
}

// wait waits on the host for the fenced work.
func (f *fence) wait(ms *memState) error {
	if f.done {
		return nil
	}
	if err := ms.waitEvent(f.event()); err != nil {
		return err
	}
	f.clear(ms)
	return nil
}

// waitContext waits on the host for the fenced work, until ctx is done.
func (f *fence) waitContext(ctx context.Context, ms *memState) error {
	if f.done {
		return nil
	}
	h, ev := ms.cs.h, f.event()
	err := waitContext(ctx, func() (bool, error) { return ready(cudaraw.EventQueryIn(h, ev)) },
		func() error { return cudaraw.EventSynchronizeIn(h, ev) })
	if err == nil {
		f.clear(ms)
	}
	return err
}

// orderOn makes work queued on h after this call wait for the fenced work.
func (f *fence) orderOn(ms *memState, h cudaraw.CUstream) error {
	if f.done {
		return nil
	}
	return cudaraw.StreamWaitEventIn(ms.cs.h, h, f.event(), 0)
}

// clear marks the fence done and returns its event.
func (f *fence) clear(ms *memState) {
	ms.putEvent(f.ev)
	*f = fence{done: true}
}
