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
type hold struct {
	users atomic.Int32
	shut  atomic.Bool
}

// enter counts a call in, or reports false once the hold is shut.
func (h *hold) enter() bool {
	h.users.Add(1)
	if h.shut.Load() {
		h.users.Add(-1)
		return false
	}
	return true
}

// exit ends an enter.
func (h *hold) exit() { h.users.Add(-1) }

// close shuts the hold and waits until the calls inside have exited. It reports
// whether this call shut it (false: it was already shut).
func (h *hold) close() bool {
	first := !h.shut.Swap(true)
	if h.users.Load() != 0 {
		holdWaits.Add(1)
		waitZero(&h.users)
	}
	return first
}

// holdWaits counts the closes that found calls inside and waited for them (tests:
// it shows that races of Close with operations really overlap).
var holdWaits atomic.Int64

// closed reports whether the hold is shut.
func (h *hold) closed() bool { return h.shut.Load() }

// waitZero waits until n is zero: it yields, then sleeps with a growing pause (up
// to a millisecond). The calls it waits for only queue work, so the wait is short.
func waitZero(n *atomic.Int32) {
	sleep := time.Microsecond
	for i := 0; n.Load() != 0; i++ {
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
