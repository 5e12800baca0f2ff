package resource

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The exact call shape of the issue, on the default queue.
func TestCallShapeDefaultQueue(t *testing.T) {
	type T struct {
		h   uintptr
		reg *Registration
	}
	before := Status()
	var released atomic.Int32
	func() {
		obj := &T{h: 42}
		obj.reg = ResourceFinalizer(func(o *T) {
			assert.Equal(t, uintptr(42), o.h)
			released.Add(1)
		}, obj, true)
	}()
	n, err := Reclaim()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, n, 1)
	assert.Equal(t, int32(1), released.Load())
	after := Status()
	assert.Equal(t, before.Registered+1, after.Registered)
	assert.Equal(t, before.ReleasedBlocking+1, after.ReleasedBlocking)
}

func TestReleasesNeverRunOnFinalizerGoroutine(t *testing.T) {
	// Identify the runtime's finalizer goroutine.
	finG := make(chan uint64, 1)
	func() {
		s := &fakeRes{}
		runtime.SetFinalizer(s, func(*fakeRes) {
			require.True(t, onFinalizerGoroutine(stack()))
			finG <- goid()
		})
	}()
	collect()
	var fin uint64
	select {
	case fin = <-finG:
	case <-time.After(5 * time.Second):
		t.Fatal("sentinel finalizer did not run")
	}

	q := newTestQueue(t, time.Millisecond)
	q2 := newTestQueue(t, time.Hour) // its worker never gets there first
	var mu sync.Mutex
	var ids []uint64
	var stacks []string
	f := func(o *fakeRes) {
		mu.Lock()
		ids = append(ids, goid())
		stacks = append(stacks, stack())
		mu.Unlock()
	}
	reg := func(q *queue, blocking bool) {
		o := &fakeRes{}
		o.reg = ResourceFinalizer(f, o, blocking, withQueue(q))
	}
	// Worker path.
	for i := 0; i < 5; i++ {
		reg(q, false)
	}
	waitFired(t, q, 5)
	require.Eventually(t, func() bool { return q.status().ReleasedNonBlocking == 5 }, 2*time.Second, time.Millisecond)
	// Drain path.
	for i := 0; i < 5; i++ {
		reg(q2, false)
	}
	waitFired(t, q2, 5)
	q2.drain()
	// Reclaim path, both lanes.
	for i := 0; i < 5; i++ {
		reg(q2, true)
		reg(q2, false)
	}
	_, err := q2.reclaim()
	require.NoError(t, err)

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, ids, 20)
	for i := range ids {
		assert.NotEqual(t, fin, ids[i])
		assert.False(t, onFinalizerGoroutine(stacks[i]), stacks[i])
	}
}

func TestUnrelatedFinalizerNotDelayedBySlowReleases(t *testing.T) {
	q := newTestQueue(t, 0)
	started := make(chan struct{}, 10)
	slow := func(*fakeRes) {
		started <- struct{}{}
		time.Sleep(100 * time.Millisecond)
	}
	func() {
		for i := 0; i < 5; i++ {
			o := &fakeRes{id: i}
			o.reg = ResourceFinalizer(slow, o, false, withQueue(q))
		}
	}()
	collect()
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("slow release did not start")
	}
	// The worker is now busy for ~400 ms. An unrelated finalizer must run
	// promptly anyway.
	// Promptly means before the slow releases end: the finalizer goroutine is not
	// behind them (an order, not a time bound).
	done := make(chan uint64, 1)
	func() {
		u := &fakeRes{}
		runtime.SetFinalizer(u, func(*fakeRes) { done <- q.status().ReleasedNonBlocking })
	}()
	runtime.GC()
	select {
	case released := <-done:
		assert.Less(t, released, uint64(5), "the unrelated finalizer ran only after the slow releases")
	case <-time.After(5 * time.Second):
		t.Fatal("unrelated finalizer delayed")
	}
	require.Eventually(t, func() bool { return q.status().ReleasedNonBlocking == 5 }, 5*time.Second, time.Millisecond)
}

// Non-blocking releases run with no call into the package: the background worker
// runs them (the wait is a guard against a hang, not a time goal).
func TestNonBlockingRunWithoutCalls(t *testing.T) {
	q := newTestQueue(t, workerDelay)
	rec := newRecorder()
	drop(q, rec, 0, 20, false)
	runtime.GC() // not a call into the package
	require.Eventually(t, func() bool { return rec.total() == 20 }, 10*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return q.status().ReleasedNonBlocking == 20 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, int64(0), q.status().PendingNonBlocking)
}

func TestDrainRunsNonBlockingPromptly(t *testing.T) {
	q := newTestQueue(t, time.Hour) // the worker never gets there first
	rec := newRecorder()
	drop(q, rec, 0, 10, false)
	waitFired(t, q, 10)
	assert.Equal(t, 0, rec.total())
	assert.Equal(t, int64(10), q.status().PendingNonBlocking)
	q.drain()
	assert.Equal(t, 10, rec.total())
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, sortedCopy(rec.order))
}

func TestBlockingWaitsForReclaim(t *testing.T) {
	q := newTestQueue(t, time.Millisecond)
	rec := newRecorder()
	drop(q, rec, 0, 10, true)
	waitFired(t, q, 10)
	q.drain()
	time.Sleep(50 * time.Millisecond) // well past the worker delay
	assert.Equal(t, 0, rec.total())
	s := q.status()
	assert.Equal(t, int64(10), s.PendingBlocking)
	assert.Equal(t, uint64(0), s.ReleasedBlocking)

	n, err := q.reclaim()
	require.NoError(t, err)
	assert.Equal(t, 10, n)
	assert.Equal(t, 10, rec.total())
	s = q.status()
	assert.Equal(t, int64(0), s.PendingBlocking)
	assert.Equal(t, uint64(10), s.ReleasedBlocking)
}

func TestReclaimRightAfterUnreachableReleasesAll(t *testing.T) {
	for _, delay := range []time.Duration{0, time.Millisecond, workerDelay} {
		t.Run(delay.String(), func(t *testing.T) {
			q := newTestQueue(t, delay)
			rec := newRecorder()
			drop(q, rec, 0, 100, false)
			drop(q, rec, 100, 100, true)
			n, err := q.reclaim()
			require.NoError(t, err)
			// With delay 0 the worker competes for the non-blocking lane;
			// whatever it took, Reclaim waited for it.
			assert.LessOrEqual(t, n, 200)
			assert.GreaterOrEqual(t, n, 100)
			require.Equal(t, 200, rec.total(), "%v", q.status())
			for i := 0; i < 200; i++ {
				require.Equal(t, 1, rec.count(i), "id %d", i)
			}
			s := q.status()
			assert.Equal(t, uint64(200), s.ReleasedNonBlocking+s.ReleasedBlocking)
			assert.Zero(t, s.PendingNonBlocking+s.PendingBlocking)
			assert.Zero(t, s.Live())
		})
	}
}

// chainRes holds a reference to another finalizable object.
type chainRes struct {
	child *fakeRes
	reg   *Registration
}

func TestReclaimReleasesChains(t *testing.T) {
	q := newTestQueue(t, time.Hour)
	rec := newRecorder()
	func() {
		child := keep(q, rec, 1, true)
		parent := &chainRes{child: child}
		parent.reg = ResourceFinalizer(func(p *chainRes) { rec.release(&fakeRes{id: 0}) }, parent, true, withQueue(q))
	}()
	_, err := q.reclaim()
	require.NoError(t, err)
	assert.Equal(t, 1, rec.count(0))
	assert.Equal(t, 1, rec.count(1), "child reachable only from the parent is released in the same Reclaim")
}

func TestExplicitRelease(t *testing.T) {
	q := newTestQueue(t, time.Millisecond)
	rec := newRecorder()
	o := keep(q, rec, 7, true)
	require.NoError(t, o.reg.Release())
	assert.Equal(t, 1, rec.count(7))
	assert.ErrorIs(t, o.reg.Release(), ErrReleased)
	assert.False(t, o.reg.Cancel())
	runtime.KeepAlive(o)
	o = nil
	_, err := q.reclaim()
	require.NoError(t, err)
	assert.Equal(t, 1, rec.count(7), "finalizer removed by Release")
	s := q.status()
	assert.Equal(t, uint64(1), s.Explicit)
	assert.Zero(t, s.ReleasedBlocking+s.ReleasedNonBlocking)
	assert.Zero(t, s.Live())

	var nilReg *Registration
	assert.ErrorIs(t, nilReg.Release(), ErrReleased)
	assert.False(t, nilReg.Cancel())
}

func TestCancel(t *testing.T) {
	q := newTestQueue(t, time.Millisecond)
	rec := newRecorder()
	o := keep(q, rec, 3, false)
	assert.True(t, o.reg.Cancel())
	assert.False(t, o.reg.Cancel())
	assert.ErrorIs(t, o.reg.Release(), ErrReleased)
	runtime.KeepAlive(o)
	o = nil
	_, err := q.reclaim()
	require.NoError(t, err)
	assert.Zero(t, rec.total())
	s := q.status()
	assert.Equal(t, uint64(1), s.Cancelled)
	assert.Zero(t, s.Live())
}

// The registration is usually stored in the object (a cycle obj → reg
// with a finalizer on obj): that must not keep obj alive.
func TestRegistrationInsideObjectDoesNotLeak(t *testing.T) {
	q := newTestQueue(t, time.Hour)
	rec := newRecorder()
	drop(q, rec, 0, 3, true) // drop stores the registration in o.reg
	_, err := q.reclaim()
	require.NoError(t, err)
	assert.Equal(t, 3, rec.total())
}

func TestExactlyOnceUnderConcurrency(t *testing.T) {
	const G, N = 64, 60
	q := newTestQueue(t, 0)
	var calls [G * N]atomic.Int32
	var cancelled [G * N]atomic.Bool
	f := func(o *fakeRes) { calls[o.id].Add(1) }
	stop := make(chan struct{})
	var gcDone sync.WaitGroup
	gcDone.Add(1)
	go func() { // GC and drains running all along
		defer gcDone.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			runtime.GC()
			q.drain()
		}
	}()
	var wg sync.WaitGroup
	for g := 0; g < G; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < N; i++ {
				id := g*N + i
				o := &fakeRes{id: id}
				o.reg = ResourceFinalizer(f, o, id%2 == 0, withQueue(q))
				switch id % 6 {
				case 0: // Close, object kept alive
					assert.NoError(t, o.reg.Release())
					assert.ErrorIs(t, o.reg.Release(), ErrReleased)
					runtime.KeepAlive(o)
				case 1: // Cancel, object kept alive
					assert.True(t, o.reg.Cancel())
					cancelled[id].Store(true)
					runtime.KeepAlive(o)
				case 2, 3: // dropped: finalizer path
					if i%10 == 0 {
						runtime.Gosched()
					}
				case 4: // Close racing with the finalizer (o dead once o.reg is loaded)
					err := o.reg.Release()
					if err != nil {
						assert.ErrorIs(t, err, ErrReleased)
					}
				case 5: // Cancel racing with the finalizer
					cancelled[id].Store(o.reg.Cancel())
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	gcDone.Wait()
	require.Eventually(t, func() bool {
		_, err := q.reclaim()
		require.NoError(t, err)
		return q.status().Live() == 0
	}, 10*time.Second, time.Millisecond, "%v", q.status())
	nCancelled := 0
	for id := range calls {
		want := int32(1)
		if cancelled[id].Load() {
			want = 0
			nCancelled++
		}
		require.Equal(t, want, calls[id].Load(), "id %d", id)
	}
	s := q.status()
	assert.Equal(t, uint64(G*N), s.Registered)
	assert.Equal(t, uint64(nCancelled), s.Cancelled)
	assert.GreaterOrEqual(t, s.Explicit, uint64(G*N/6))
	assert.Equal(t, uint64(G*N-nCancelled), s.Explicit+s.ReleasedBlocking+s.ReleasedNonBlocking)
	assert.Zero(t, s.Failed+s.Dropped)
	assert.Zero(t, s.PendingBlocking+s.PendingNonBlocking)
}

// A release that the finalizer queued but that has not started yet is
// still run (or cancelled) by an explicit call.
func TestReleaseAndCancelClaimQueuedRecords(t *testing.T) {
	q := newTestQueue(t, time.Hour)
	rec := newRecorder()
	regs := func() []*Registration {
		var regs []*Registration
		for i := 0; i < 4; i++ {
			o := &fakeRes{id: i}
			o.reg = ResourceFinalizer(rec.release, o, i%2 == 0, withQueue(q))
			regs = append(regs, o.reg) // the registration does not keep o alive
		}
		return regs
	}()
	waitFired(t, q, 4)
	s := q.status()
	assert.Equal(t, int64(2), s.PendingBlocking)
	assert.Equal(t, int64(2), s.PendingNonBlocking)

	require.NoError(t, regs[0].Release()) // blocking, queued: runs now
	require.NoError(t, regs[1].Release()) // non-blocking, queued: runs now
	assert.Equal(t, 2, rec.total())
	assert.True(t, regs[2].Cancel())
	assert.True(t, regs[3].Cancel())
	assert.ErrorIs(t, regs[0].Release(), ErrReleased)
	assert.False(t, regs[1].Cancel())
	s = q.status()
	assert.Zero(t, s.PendingBlocking+s.PendingNonBlocking)
	assert.Equal(t, uint64(2), s.Explicit)
	assert.Equal(t, uint64(2), s.Cancelled)
	assert.Zero(t, s.Live())

	n, err := q.reclaim() // the stale records are skipped
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Equal(t, 2, rec.total())
	assert.Equal(t, s, q.status())
}

func TestFailuresAreIsolatedAndReported(t *testing.T) {
	q := newTestQueue(t, time.Hour)
	var mu sync.Mutex
	var failures []Failure
	q.setFailureHandler(func(f Failure) {
		mu.Lock()
		failures = append(failures, f)
		mu.Unlock()
		panic("a panicking handler is ignored too")
	})
	var ok atomic.Int32
	errBoom := errors.New("boom")
	func() {
		for i := 0; i < 3; i++ {
			a := &fakeRes{id: i}
			a.reg = ResourceFinalizer(func(*fakeRes) { panic("release panicked") }, a, i == 0, withQueue(q), Kind("cuPanic"))
			b := &fakeRes{id: i}
			b.reg = ResourceFinalizer(func(*fakeRes) error { return errBoom }, b, i == 0, withQueue(q), Kind("cuFail"))
			c := &fakeRes{id: i}
			c.reg = ResourceFinalizer(func(*fakeRes) error { ok.Add(1); return nil }, c, i == 0, withQueue(q))
		}
	}()
	n, err := q.reclaim()
	require.NoError(t, err)
	assert.Equal(t, 9, n)
	assert.Equal(t, int32(3), ok.Load())
	s := q.status()
	assert.Equal(t, uint64(6), s.Failed)
	assert.Equal(t, uint64(9), s.ReleasedBlocking+s.ReleasedNonBlocking)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, failures, 6)
	kinds := map[string]int{}
	for _, f := range failures {
		kinds[f.Kind]++
		if f.Kind == "cuPanic" {
			var pe *PanicError
			require.ErrorAs(t, f.Err, &pe)
			assert.Equal(t, "release panicked", pe.Value)
			assert.Contains(t, string(pe.Stack), "resource_test.go")
		} else {
			assert.ErrorIs(t, f.Err, errBoom)
		}
	}
	assert.Equal(t, map[string]int{"cuPanic": 3, "cuFail": 3}, kinds)

	// The explicit path returns the failure instead of reporting it.
	e := &fakeRes{}
	e.reg = ResourceFinalizer(func(*fakeRes) error { return errBoom }, e, true, withQueue(q))
	assert.ErrorIs(t, e.reg.Release(), errBoom)
	p := &fakeRes{}
	p.reg = ResourceFinalizer(func(*fakeRes) { panic(errBoom) }, p, true, withQueue(q))
	err = p.reg.Release()
	var pe *PanicError
	require.ErrorAs(t, err, &pe)
	assert.ErrorIs(t, err, errBoom)
	assert.Len(t, failures, 6)
	assert.Equal(t, uint64(8), q.status().Failed)
}

func TestGoexitInReleaseKeepsWorker(t *testing.T) {
	q := newTestQueue(t, 0)
	rec := newRecorder()
	q.setFailureHandler(func(Failure) {})
	func() {
		o := &fakeRes{}
		o.reg = ResourceFinalizer(func(*fakeRes) { runtime.Goexit() }, o, false, withQueue(q))
	}()
	waitFired(t, q, 1)
	require.Eventually(t, func() bool { return q.status().Failed == 1 }, 2*time.Second, time.Millisecond)
	drop(q, rec, 0, 5, false)
	waitFired(t, q, 6)
	require.Eventually(t, func() bool { return rec.total() == 5 }, 2*time.Second, time.Millisecond)
	// The worker counts a release after its function returns, so the last
	// count can trail the recorder by a moment.
	require.Eventually(t, func() bool { return q.status().ReleasedNonBlocking == 6 }, 2*time.Second, time.Millisecond)
	assert.Zero(t, q.status().PendingNonBlocking)
}

func TestMisusePanics(t *testing.T) {
	assert.PanicsWithValue(t, "resource.ResourceFinalizer: nil release function", func() {
		ResourceFinalizer[fakeRes, func(*fakeRes)](nil, &fakeRes{}, false)
	})
	assert.PanicsWithValue(t, "resource.ResourceFinalizer: nil release function", func() {
		ResourceFinalizer[fakeRes, func(*fakeRes) error](nil, &fakeRes{}, false)
	})
	var nilErrFn func(*fakeRes) error
	assert.PanicsWithValue(t, "resource.ResourceFinalizer: nil release function", func() {
		ResourceFinalizer(nilErrFn, &fakeRes{}, false)
	})
	assert.PanicsWithValue(t, "resource.ResourceFinalizer: nil object", func() {
		ResourceFinalizer(func(*fakeRes) {}, (*fakeRes)(nil), false)
	})
	assert.PanicsWithValue(t, "resource.ResourceFinalizer: zero-size object struct {} cannot have a finalizer", func() {
		ResourceFinalizer(func(*struct{}) {}, &struct{}{}, false)
	})
}

// formRes has release methods of both forms, for method expressions.
type formRes struct {
	released *int
	err      error
}

func (o *formRes) close() { *o.released++ }

func (o *formRes) closeErr() error {
	*o.released++
	return o.err
}

// TestReleaseFuncForms checks that ResourceFinalizer infers both forms of
// release function from func literals, method expressions, method values,
// variables and a partial instantiation, and runs each.
func TestReleaseFuncForms(t *testing.T) {
	q := newTestQueue(t, time.Hour)
	errBoom := errors.New("boom")
	n := 0
	rec := newRecorder()
	var errVar func(*formRes) error = (*formRes).closeErr
	for _, c := range []struct {
		name     string
		register func(o *formRes) *Registration
		err      error
	}{
		{"literal", func(o *formRes) *Registration {
			return ResourceFinalizer(func(o *formRes) { *o.released++ }, o, false, withQueue(q))
		}, nil},
		{"literal error", func(o *formRes) *Registration {
			return ResourceFinalizer(func(o *formRes) error { *o.released++; return errBoom }, o, false, withQueue(q))
		}, errBoom},
		{"method expression", func(o *formRes) *Registration {
			return ResourceFinalizer((*formRes).close, o, true, withQueue(q))
		}, nil},
		{"method expression error", func(o *formRes) *Registration {
			o.err = errBoom
			return ResourceFinalizer((*formRes).closeErr, o, true, withQueue(q))
		}, errBoom},
		{"variable", func(o *formRes) *Registration {
			return ResourceFinalizer(errVar, o, false, withQueue(q))
		}, nil},
		{"partial instantiation", func(o *formRes) *Registration {
			return ResourceFinalizer[formRes](func(o *formRes) { *o.released++ }, o, false, withQueue(q))
		}, nil},
	} {
		o := &formRes{released: &n}
		before := n
		r := c.register(o)
		if c.err != nil {
			assert.ErrorIs(t, r.Release(), c.err, c.name)
		} else {
			assert.NoError(t, r.Release(), c.name)
		}
		runtime.KeepAlive(o)
		assert.Equal(t, before+1, n, c.name)
	}
	// A method value (the recorder's) is a func(*T) too.
	o := keep(q, rec, 7, false)
	require.NoError(t, o.reg.Release())
	assert.Equal(t, 1, rec.count(7))
	assert.Equal(t, uint64(2), q.status().Failed)
}

func TestReclaimFromInsideRelease(t *testing.T) {
	q := newTestQueue(t, time.Hour)
	rec := newRecorder()
	var inner atomic.Int32
	func() {
		o := &fakeRes{}
		o.reg = ResourceFinalizer(func(*fakeRes) {
			// e.g. a release that allocates and hits out-of-memory.
			n, err := q.reclaim()
			assert.NoError(t, err)
			inner.Add(int32(n) + 1)
		}, o, false, withQueue(q))
	}()
	drop(q, rec, 0, 5, true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := q.reclaim()
		assert.NoError(t, err)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Reclaim from inside a release deadlocked")
	}
	assert.Equal(t, 5, rec.total())
	assert.NotZero(t, inner.Load())
}

func TestStatusString(t *testing.T) {
	s := Stats{Registered: 10, PendingNonBlocking: 1, PendingBlocking: 2, ReleasedNonBlocking: 3,
		ReleasedBlocking: 1, Explicit: 1, Cancelled: 1, Failed: 1, Dropped: 1}
	assert.Equal(t, int64(0), s.Live())
	assert.Equal(t, "registered=10 live=0 pending=1/2 released=3/1 explicit=1 cancelled=1 failed=1 dropped=1 captures=0 (lanes: non-blocking/blocking)", s.String())
}

func sortedCopy(s []int) []int {
	out := append([]int(nil), s...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
