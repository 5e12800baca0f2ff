package resource

import (
	"reflect"
	"runtime"
	"runtime/metrics"
	"time"
)

// finalizerWaitTimeout bounds how long Reclaim waits for the runtime's
// finalizer goroutine (it may be stuck in someone else's finalizer).
const finalizerWaitTimeout = time.Second

// collectGarbage runs a full collection and waits until every finalizer
// queued so far has run, so that the objects found unreachable have been
// pushed onto the lanes.
//
// After runtime.GC returns, sweeping is complete, so the finalizers of all
// objects found unreachable in that cycle are in the runtime's finalizer
// queue. The runtime runs that queue on one goroutine, newest first, so a
// sentinel finalizer does not prove that the others ran; instead we wait
// for the runtime's own counters (read atomically together) to show that
// every queued finalizer has executed.
func collectGarbage() {
	runtime.GC()
	if !waitFinalizers(finalizerWaitTimeout) {
		// Counters unavailable: fall back to a second cycle and a pause.
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}

var finalizerMetrics = [2]string{
	"/gc/finalizers/queued:finalizers",
	"/gc/finalizers/executed:finalizers",
}

// waitFinalizers waits until the runtime has executed every finalizer it
// queued. It returns false if the runtime does not export the counters.
func waitFinalizers(timeout time.Duration) bool {
	s := []metrics.Sample{{Name: finalizerMetrics[0]}, {Name: finalizerMetrics[1]}}
	deadline := time.Now().Add(timeout)
	for i := 0; ; i++ {
		metrics.Read(s)
		if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindUint64 {
			return false
		}
		if s[1].Value.Uint64() >= s[0].Value.Uint64() {
			return true
		}
		if time.Now().After(deadline) {
			return true // a finalizer is stuck: proceed with what we have
		}
		if i < 50 {
			runtime.Gosched()
		} else {
			time.Sleep(100 * time.Microsecond)
		}
	}
}

// invokeReleaseName is the symbol name of invokeRelease, whose frames mark
// release functions on a stack.
var invokeReleaseName = runtime.FuncForPC(reflect.ValueOf(invokeRelease).Pointer()).Name()

// releaseDepth counts the release functions running on the calling
// goroutine's stack (BeginCapture or Reclaim called from inside one). It
// is only used on slow paths.
func releaseDepth() int {
	pcs := make([]uintptr, 256)
	n := runtime.Callers(2, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	depth := 0
	for {
		f, more := frames.Next()
		if f.Function == invokeReleaseName {
			depth++
		}
		if !more {
			return depth
		}
	}
}
