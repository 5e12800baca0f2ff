package cuda

import (
	"math"
	"runtime"
	"sync/atomic"

	"github.com/gocuda/gocuda/resource"
)

// Memory pressure. Go's garbage collector sees only the few bytes of a buffer's Go
// object, not the GPU memory behind it, so a program that drops buffers without
// Close would let garbage pile up on the device until an allocation fails. The
// package therefore counts the bytes allocated in each context (device, pinned and
// unified) and, each time they reach a fraction of the device's memory, runs a
// collection (runtime.GC, then resource.Drain, which frees the buffers it found
// unreachable) in a goroutine of its own: the allocating goroutine never waits, and
// at most one such collection runs at a time. Context.SetGCThreshold sets the
// fraction.

var pressure struct {
	running     atomic.Bool
	collections atomic.Int64
}

// pressure counts n allocated bytes and starts a collection when the context's
// count reaches the threshold.
func (ms *memState) pressure(n int) {
	f := math.Float64frombits(ms.cs.limits.gc.Load())
	if f <= 0 {
		return
	}
	limit := int64(f * float64(ms.total))
	if ms.sinceGC.Add(int64(n)) < limit || pressure.running.Load() {
		return
	}
	ms.sinceGC.Store(0)
	go collect()
}

// collect runs a collection — runtime.GC, then resource.Drain, which runs the
// releases of what it found unreachable — unless one is running already.
func collect() {
	if !pressure.running.CompareAndSwap(false, true) {
		return
	}
	defer pressure.running.Store(false)
	pressure.collections.Add(1)
	runtime.GC()
	resource.Drain()
}
