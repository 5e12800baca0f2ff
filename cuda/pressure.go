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
// at most one such collection runs at a time.

var gcThreshold atomic.Uint64 // math.Float64bits of the fraction

func init() { gcThreshold.Store(math.Float64bits(1.0 / 8)) }

var pressure struct {
	running     atomic.Bool
	collections atomic.Int64
}

// SetGCThreshold sets the fraction of a device's memory that may be allocated in a
// context between two pressure collections (the default is 1/8) and returns the
// previous fraction. Zero or a negative value turns pressure collections off;
// values above 1 count as 1.
func SetGCThreshold(fraction float64) (previous float64) {
	if math.IsNaN(fraction) || fraction < 0 {
		fraction = 0
	}
	fraction = min(fraction, 1)
	return math.Float64frombits(gcThreshold.Swap(math.Float64bits(fraction)))
}

// pressure counts n allocated bytes and starts a collection when the context's
// count reaches the threshold.
func (ms *memState) pressure(n int) {
	f := math.Float64frombits(gcThreshold.Load())
	if f <= 0 {
		return
	}
	limit := int64(f * float64(ms.total))
	if ms.sinceGC.Add(int64(n)) < limit || !pressure.running.CompareAndSwap(false, true) {
		return
	}
	ms.sinceGC.Store(0)
	go func() {
		defer pressure.running.Store(false)
		pressure.collections.Add(1)
		runtime.GC()
		resource.Drain()
	}()
}
