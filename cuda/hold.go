package cuda

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// hold keeps an object from being destroyed while calls use it: a call enters
// before it passes the object's handle to the driver and exits once the work is
// queued; the release shuts the hold, which makes later calls fail and waits for
// the calls inside to exit. Either a call sees the hold shut (and fails with
// ErrClosed) or the release sees the call among the users (and waits for it): both
// sides use sequentially consistent atomics. Calls hold an object only while they
// queue work, never while they wait for the GPU, so the release's wait is short.
// (Memory is also kept by a stream's read lock, without its hold, in the usual
// launch and Enqueue: see memBase.fastUse.)
//
// users counts the calls inside in its low 31 bits, is shut when bit 31 is set, and
// counts every enter ever in its high 32 bits, so that one load tells memory's
// hand-off whether another call used the object between two points (see
// memBase.record). An enter is then one read-modify-write, which also tells it
// whether the hold is shut.
type hold struct {
	users atomic.Uint64
}

const (
	enterTick = 1<<32 | 1  // an enter: one more call inside, one more ever
	exitTick  = ^uint64(0) // an exit: one call fewer inside (adds -1)
	shutBit   = 1 << 31    // set by close
	insideMax = shutBit - 1
)

// enter counts a call in, or reports false once the hold is shut.
func (h *hold) enter() bool {
	if h.users.Add(enterTick)&shutBit != 0 {
		h.users.Add(exitTick)
		return false
	}
	return true
}

// exit ends an enter.
func (h *hold) exit() { h.users.Add(exitTick) }

// inside returns the number of calls inside.
func (h *hold) inside() uint32 { return uint32(h.users.Load()) & insideMax }

// close shuts the hold and waits until the calls inside have exited. It reports
// whether this call shut it (false: it was already shut).
func (h *hold) close() bool {
	first := h.users.Or(shutBit)&shutBit == 0
	if h.inside() != 0 {
		holdWaits.Add(1)
		waitZero(h.inside)
	}
	return first
}

// holdWaits counts the closes that found calls inside and waited for them (tests:
// it shows that races of Close with operations really overlap).
var holdWaits atomic.Int64

// closed reports whether the hold is shut.
func (h *hold) closed() bool { return h.users.Load()&shutBit != 0 }

// waitZero waits until n returns zero: it yields, then sleeps with a growing pause
// (up to a millisecond). The calls it waits for only queue work, so the wait is short.
func waitZero(n func() uint32) {
	sleep := time.Microsecond
	for i := 0; n() != 0; i++ {
		if i < 100 {
			runtime.Gosched()
			continue
		}
		time.Sleep(sleep)
		sleep = min(2*sleep, time.Millisecond)
	}
}

// lockCounting takes a release's write lock, counting in holdWaits when calls held
// the read lock.
func lockCounting(mu *sync.RWMutex) {
	if !mu.TryLock() {
		holdWaits.Add(1)
		mu.Lock()
	}
}

// drain waits until the calls holding s's read lock have released it: the calls
// that queue work on s using memory they do not hold (memBase.fastUse). A wait
// counts in holdWaits, as a release's.
func (s *stream) drain() {
	lockCounting(&s.mu)
	s.mu.Unlock()
}
