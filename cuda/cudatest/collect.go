package cudatest

import (
	_ "embed"
	"os"
	"runtime"
	"runtime/trace"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/resource"
)

// spinPTX holds spin(unsigned long long ns), which spins on %globaltimer, and empty().
//
//go:embed spin.ptx
var spinPTX []byte

// What CollectWhileBusy runs and allows: the garbage is CollectRounds rounds, the spin
// kernel keeps the GPU busy for CollectSpin, the collections and launches are watched
// for CollectWindow inside it (long enough for the non-blocking lane, which runs
// within about 100 ms), and neither a collection nor a launch may take CollectLimit:
// a release that waited for the GPU would take the spin's time, hundreds of
// milliseconds, while a shared machine's scheduling moves a GC by a few. The launch
// latency goal is a figure the test logs (and bench reports), not this limit.
const (
	CollectRounds = 8
	CollectSpin   = 900 * time.Millisecond
	CollectWindow = 400 * time.Millisecond
	CollectLimit  = 50 * time.Millisecond
)

// CollectStats is what CollectWhileBusy measured.
type CollectStats struct {
	GC          time.Duration // the slower of the two runtime.GC calls during the spin
	Launches    int64         // empty-kernel launches from the other goroutine during the window
	WorstLaunch time.Duration // the slowest of them
	// HeldBlocking is the blocking releases pending at the end of the window beyond
	// those at its start: what the collector found and held for Reclaim.
	HeldBlocking int64
	// ReleasedNonBlocking is the non-blocking releases run during the window.
	ReleasedNonBlocking uint64
	// Reclaimed is what the final resource.Reclaim released.
	Reclaimed int
}

// CollectWhileBusy is cuda's TestSeedCollectWhileGPUBusy for the objects of a library
// package (handles, plans, generators, descriptors): with the GPU busy for most of a
// second on one stream, collecting dropped objects must delay neither the collecting
// goroutine nor a launch from another goroutine, since releases that may wait for the
// GPU are held for resource.Reclaim; and Reclaim must then release them.
//
// makeGarbage(n) makes n rounds of objects, uses them (on as many streams as it
// likes), waits for their work and drops them without Close; heldPerRound is the
// least number of blocking releases (resource lane) that one round leaves for the
// collector to find, counted from objects the collection that follows finds
// unreachable (not ones released to a cache first). It is called once with 1 to warm
// up (followed by a Reclaim), then with CollectRounds before the spin kernel starts.
//
// During the spin the test runs runtime.GC twice and checks that each returned
// within CollectLimit; another goroutine launches an empty kernel on its own stream
// every 200 µs, and no launch may take CollectLimit; no blocking release may run
// (resource.Status().ReleasedBlocking unchanged), at least heldPerRound·CollectRounds
// must be pending, none may fail, and the spin must still run at the end of the
// window. Afterwards resource.Reclaim must leave nothing pending in the blocking lane
// and no failed release. Checks that fail are reported with t.Errorf; setup errors
// with t.Fatalf. It returns the numbers for the caller to check more or log. With
// $GOCUDA_COLLECT_TRACE set, the spin's window is written there as an execution
// trace.
//
// ctx must be current on the calling thread as Require or Stream leave it; the caller
// skips where there are no kernels (Require(t, Kernels)) or no library.
func CollectWhileBusy(t testing.TB, ctx *cuda.Context, heldPerRound int, makeGarbage func(n int)) CollectStats {
	t.Helper()
	var st CollectStats
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	mod, err := ctx.LoadModule(spinPTX)
	must("loading the spin kernel", err)
	defer mod.Close()
	spin, err := mod.Function("spin")
	must("spin kernel", err)
	empty, err := mod.Function("empty")
	must("empty kernel", err)
	busy, err := ctx.NewStream()
	must("busy stream", err)
	defer busy.Close()
	other, err := ctx.NewStream()
	must("other stream", err)
	defer other.Close()

	// Warm up: the library is loaded, pools and caches exist, the launcher's path is
	// hot, nothing is queued.
	makeGarbage(1)
	must("synchronizing after the warm-up", ctx.Synchronize())
	_, err = resource.Reclaim()
	must("warm-up Reclaim", err)
	must("warm-up launch", empty.Launch(other, cuda.D1(1), cuda.D1(1), 0))
	must("warm-up launch", other.Synchronize())
	st0 := resource.Status()

	makeGarbage(CollectRounds)
	must("synchronizing after the garbage", ctx.Synchronize())

	must("spin launch", spin.Launch(busy, cuda.D1(1), cuda.D1(1), 0, uint64(CollectSpin)))
	time.Sleep(10 * time.Millisecond) // the spin kernel is running

	if path := os.Getenv("GOCUDA_COLLECT_TRACE"); path != "" {
		// The window in Go's execution tracer, for what a slow launch waited on
		// (go tool trace -pprof=sync|sched|syscall).
		f, err := os.Create(path)
		must("creating the trace", err)
		must("starting the trace", trace.Start(f))
		defer func() {
			trace.Stop()
			must("writing the trace", f.Close())
		}()
	}
	var stop atomic.Bool
	var worst, launches atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			t0 := time.Now()
			if err := empty.Launch(other, cuda.D1(1), cuda.D1(1), 0); err != nil {
				t.Errorf("launch from another goroutine: %v", err)
				return
			}
			if d := int64(time.Since(t0)); d > worst.Load() {
				worst.Store(d)
			}
			launches.Add(1)
			time.Sleep(200 * time.Microsecond)
		}
	}()
	w0 := resource.Status()
	for range 2 {
		t0 := time.Now()
		runtime.GC()
		st.GC = max(st.GC, time.Since(t0))
	}
	time.Sleep(CollectWindow)
	stop.Store(true)
	wg.Wait()
	busyDone, err := busy.Query()
	must("querying the spin", err)
	mid := resource.Status()

	st.Launches, st.WorstLaunch = launches.Load(), time.Duration(worst.Load())
	st.HeldBlocking = mid.PendingBlocking - st0.PendingBlocking
	st.ReleasedNonBlocking = mid.ReleasedNonBlocking - w0.ReleasedNonBlocking
	t.Logf("during a %v spin: runtime.GC worst %v; %d launches from another goroutine, worst %v; "+
		"%d blocking releases held, %d non-blocking released",
		CollectSpin, st.GC, st.Launches, st.WorstLaunch, st.HeldBlocking, st.ReleasedNonBlocking)
	if busyDone {
		t.Errorf("the spin kernel ended before the end of the window: nothing was measured against a busy GPU")
	}
	if st.GC >= CollectLimit {
		t.Errorf("runtime.GC took %v during the spin (limit %v): the collecting goroutine was delayed", st.GC, CollectLimit)
	}
	if st.WorstLaunch >= CollectLimit {
		t.Errorf("a launch from another goroutine took %v during the spin (limit %v)", st.WorstLaunch, CollectLimit)
	}
	if st.Launches == 0 {
		t.Errorf("no launch from the other goroutine during the window")
	}
	if mid.ReleasedBlocking != st0.ReleasedBlocking {
		t.Errorf("%d blocking releases ran outside Reclaim", mid.ReleasedBlocking-st0.ReleasedBlocking)
	}
	if want := int64(heldPerRound * CollectRounds); st.HeldBlocking < want {
		t.Errorf("%d blocking releases held for Reclaim after the collections, want at least %d", st.HeldBlocking, want)
	}
	if mid.Failed != st0.Failed {
		t.Errorf("%d releases failed during the window", mid.Failed-st0.Failed)
	}

	must("waiting for the spin", busy.Synchronize())
	st.Reclaimed, err = resource.Reclaim()
	must("Reclaim", err)
	must("synchronizing after Reclaim", ctx.Synchronize())
	end := resource.Status()
	t.Logf("Reclaim released %d; %v", st.Reclaimed, end)
	if end.PendingBlocking != 0 {
		t.Errorf("%d blocking releases still pending after Reclaim", end.PendingBlocking)
	}
	if end.Failed != st0.Failed {
		t.Errorf("%d releases failed", end.Failed-st0.Failed)
	}
	return st
}
