package resource

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocuda/gocuda/internal/rescore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// atRes registers itself in place (the At option).
type atRes struct {
	id  int
	reg Registration
	tag *int // keep the type pointerful (no tiny allocations)
}

// atReleases records the ids atRes releases saw, for the test running.
var atReleases struct {
	mu  sync.Mutex
	ids map[int]int
}

func (o *atRes) release() error {
	atReleases.mu.Lock()
	atReleases.ids[o.id]++
	atReleases.mu.Unlock()
	switch {
	case o.id <= ctxGoneID:
		return fmt.Errorf("the context went first: %w", ErrContextDestroyed)
	case o.id < 0:
		return errors.New("release failed")
	}
	return nil
}

// ctxGoneID and lower ids make atRes releases report that their context was
// destroyed before they could run.
const ctxGoneID = -1000

func finalizeAtRes(o *atRes) { o.reg.Finalized() }

func resetAtReleases(t *testing.T) {
	atReleases.mu.Lock()
	atReleases.ids = map[int]int{}
	atReleases.mu.Unlock()
	t.Cleanup(func() {
		atReleases.mu.Lock()
		atReleases.ids = nil
		atReleases.mu.Unlock()
	})
}

func atCount(id int) int {
	atReleases.mu.Lock()
	defer atReleases.mu.Unlock()
	return atReleases.ids[id]
}

//go:noinline
func newAtRes(q *queue, id int, blocking bool, opts ...Option) *atRes {
	o := &atRes{id: id}
	r := ResourceFinalizer((*atRes).release, o, blocking, append(opts, withQueue(q), At(&o.reg, finalizeAtRes))...)
	if r != &o.reg {
		panic("ResourceFinalizer with At returned another registration")
	}
	return o
}

//go:noinline
func dropAtRes(q *queue, base, n int, blocking bool, opts ...Option) {
	for i := range n {
		newAtRes(q, base+i, blocking, opts...)
	}
}

func TestAtExplicit(t *testing.T) {
	resetAtReleases(t)
	q := newTestQueue(t, time.Hour)
	o := newAtRes(q, 1, false)
	require.NoError(t, o.reg.Release())
	assert.ErrorIs(t, o.reg.Release(), ErrReleased)
	assert.False(t, o.reg.Cancel())
	runtime.KeepAlive(o)
	assert.Equal(t, 1, atCount(1))

	failing := newAtRes(q, -1, false)
	assert.ErrorContains(t, failing.reg.Release(), "release failed")
	runtime.KeepAlive(failing)

	s := q.status()
	assert.Equal(t, uint64(2), s.Registered)
	assert.Equal(t, uint64(2), s.Explicit)
	assert.Equal(t, uint64(1), s.Failed)
	assert.Zero(t, s.Live())

	// The finalizer is gone: nothing more happens when the objects die.
	o, failing = nil, nil
	_, err := q.reclaim()
	require.NoError(t, err)
	assert.Equal(t, 1, atCount(1))
	assert.Equal(t, uint64(2), q.status().Explicit)
	assert.Zero(t, q.fired.Load())
}

func TestAtFinalizerPath(t *testing.T) {
	resetAtReleases(t)
	q := newTestQueue(t, time.Hour)
	dropAtRes(q, 0, 10, false)
	dropAtRes(q, 10, 5, true)
	waitFired(t, q, 15)
	q.drain()
	for i := range 10 {
		assert.Equal(t, 1, atCount(i), i)
	}
	for i := 10; i < 15; i++ {
		assert.Zero(t, atCount(i), "blocking releases wait for Reclaim")
	}
	n, err := q.reclaim()
	require.NoError(t, err)
	assert.Equal(t, 5, n)
	for i := 10; i < 15; i++ {
		assert.Equal(t, 1, atCount(i), i)
	}
	s := q.status()
	assert.Equal(t, uint64(10), s.ReleasedNonBlocking)
	assert.Equal(t, uint64(5), s.ReleasedBlocking)
	assert.Zero(t, s.Live())
}

func TestAtCancelAndChecks(t *testing.T) {
	resetAtReleases(t)
	q := newTestQueue(t, time.Hour)
	o := newAtRes(q, 1, true)
	assert.True(t, o.reg.Cancel())
	assert.ErrorIs(t, o.reg.Release(), ErrReleased)
	// The finalizer was removed: the object takes another one.
	runtime.SetFinalizer(o, nil)
	other := ResourceFinalizer(func(*atRes) {}, o, true, withQueue(q))
	assert.True(t, other.Cancel())
	runtime.KeepAlive(o)
	assert.Zero(t, atCount(1))
	assert.Equal(t, uint64(2), q.status().Cancelled)

	// In use already, outside the object, a finalizer of another type, nil
	// arguments, zero-size objects.
	used := newAtRes(q, 2, false)
	assert.PanicsWithValue(t, "resource.ResourceFinalizer: registration already in use", func() {
		ResourceFinalizer((*atRes).release, used, false, withQueue(q), At(&used.reg, finalizeAtRes))
	})
	require.NoError(t, used.reg.Release())
	fresh := &atRes{}
	var outside Registration
	assert.PanicsWithValue(t, "resource.ResourceFinalizer: registration outside the object", func() {
		ResourceFinalizer((*atRes).release, fresh, false, withQueue(q), At(&outside, finalizeAtRes))
	})
	other2 := &atRes{}
	assert.PanicsWithValue(t, "resource.ResourceFinalizer: registration outside the object", func() {
		ResourceFinalizer((*atRes).release, fresh, false, withQueue(q), At(&other2.reg, finalizeAtRes))
	})
	assert.PanicsWithValue(t, "resource.ResourceFinalizer: finalizer func(*resource.fakeRes) does not take *resource.atRes", func() {
		ResourceFinalizer((*atRes).release, fresh, false, withQueue(q), At(&fresh.reg, func(*fakeRes) {}))
	})
	assert.Equal(t, uint64(3), q.status().Registered, "rejected registrations are not counted")
	assert.PanicsWithValue(t, "resource.At: nil registration or finalizer", func() { At(nil, finalizeAtRes) })
	assert.PanicsWithValue(t, "resource.At: nil registration or finalizer", func() { At[atRes](&fresh.reg, nil) })
	assert.PanicsWithValue(t, "resource.ResourceFinalizer: nil release function", func() {
		ResourceFinalizer[atRes, func(*atRes) error](nil, fresh, false, At(&fresh.reg, finalizeAtRes))
	})
	assert.PanicsWithValue(t, "resource.ResourceFinalizer: nil object", func() {
		ResourceFinalizer((*atRes).release, (*atRes)(nil), false, At(&fresh.reg, finalizeAtRes))
	})
	var r Registration
	assert.PanicsWithValue(t, "resource.ResourceFinalizer: zero-size object struct {} cannot have a finalizer", func() {
		ResourceFinalizer(func(*struct{}) error { return nil }, &struct{}{}, false, At(&r, func(*struct{}) {}))
	})
	assert.Nil(t, fresh.reg.q, "a rejected registration leaves the Registration untouched")
}

// TestAtAllocs checks that registering in place allocates nothing, and that
// a registration of its own costs the Registration and the finalizer's
// closure, whichever form f has.
func TestAtAllocs(t *testing.T) {
	resetAtReleases(t)
	q := newTestQueue(t, time.Hour)
	const runs = 100
	ctx := &benchDirect{}

	// AllocsPerRun calls f once more than runs; the objects are made first.
	ats := make([]*atRes, runs+1)
	for i := range ats {
		ats[i] = &atRes{id: i}
	}
	i := 0
	allocs := testing.AllocsPerRun(runs, func() {
		o := ats[i]
		i++
		ResourceFinalizer((*atRes).release, o, false, Kind("at"), WithContext(ctx), withQueue(q), At(&o.reg, finalizeAtRes))
		if err := o.reg.Release(); err != nil {
			t.Error(err)
		}
	})
	assert.Zero(t, allocs, "At")

	fakes := make([]*fakeRes, 2*(runs+1))
	for i := range fakes {
		fakes[i] = &fakeRes{id: i}
	}
	i = 0
	for _, name := range []string{"func(*T)", "func(*T) error"} {
		allocs := testing.AllocsPerRun(runs, func() {
			o := fakes[i]
			i++
			if name == "func(*T)" {
				o.reg = ResourceFinalizer(func(*fakeRes) {}, o, false, Kind("own"), WithContext(ctx), withQueue(q))
			} else {
				o.reg = ResourceFinalizer(func(*fakeRes) error { return nil }, o, false, Kind("own"), WithContext(ctx), withQueue(q))
			}
			if err := o.reg.Release(); err != nil {
				t.Error(err)
			}
		})
		assert.Equal(t, 2.0, allocs, "%s: the Registration and the finalizer's closure", name)
	}
	assert.Equal(t, uint64(3*(runs+1)), q.status().Explicit)
}

func TestZeroRegistration(t *testing.T) {
	var r Registration
	assert.ErrorIs(t, r.Release(), ErrReleased)
	assert.False(t, r.Cancel())
	r.Finalized() // never registered: nothing to queue
	var nilReg *Registration
	nilReg.Finalized()
}

//go:noinline
func leakSiteAt(q *queue, n int) { dropAtRes(q, 500, n, true, Kind("at"), CallerSkip(2)) }

func TestAtLeakSite(t *testing.T) {
	resetAtReleases(t)
	q := newTestQueue(t, time.Hour)
	q.leakOn.Store(true)
	leakSiteAt(q, 2)
	_, err := q.reclaim()
	require.NoError(t, err)
	leaks := q.leakReport()
	require.Len(t, leaks, 1, "%v", leaks)
	assert.Equal(t, uint64(2), leaks[0].Count)
	assert.Equal(t, "at", leaks[0].Kind)
	assert.Contains(t, leaks[0].Site, "resource.leakSiteAt ")
	assert.NotContains(t, leaks[0].Stack, "dropAtRes")
}

// directCtx is a rescore.DirectContext: releases under it run without the hooks.
type directCtx struct {
	alive atomic.Bool
	panic bool
	calls atomic.Int32
}

func (c *directCtx) ResourceDirect() bool {
	c.calls.Add(1)
	if c.panic {
		panic("direct")
	}
	return c.alive.Load()
}

func TestDirectContext(t *testing.T) {
	resetAtReleases(t)
	q := newTestQueue(t, time.Hour)
	var hooked atomic.Int32
	q.setContextHooks(rescore.ContextHooks{
		Alive: func(any) bool { hooked.Add(1); return true },
		Run:   func(_ any, f func()) error { hooked.Add(1); f(); return nil },
	})
	live, dead, broken := &directCtx{}, &directCtx{}, &directCtx{panic: true}
	live.alive.Store(true)

	o := newAtRes(q, 1, false, WithContext(live))
	require.NoError(t, o.reg.Release())
	assert.Equal(t, 1, atCount(1))
	d := newAtRes(q, 2, false, WithContext(dead))
	assert.ErrorIs(t, d.reg.Release(), ErrContextDestroyed)
	assert.Zero(t, atCount(2))
	b := newAtRes(q, 3, false, WithContext(broken))
	var pe *PanicError
	assert.ErrorAs(t, b.reg.Release(), &pe)
	assert.Zero(t, atCount(3))
	runtime.KeepAlive(o)
	runtime.KeepAlive(d)
	runtime.KeepAlive(b)

	// The finalizer path too.
	dropAtRes(q, 10, 3, true, WithContext(live))
	dropAtRes(q, 20, 2, true, WithContext(dead))
	n, err := q.reclaim()
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	assert.Zero(t, hooked.Load(), "Alive and Run are not called for a DirectContext")
	assert.Equal(t, int32(4), live.calls.Load())
	s := q.status()
	assert.Equal(t, uint64(3), s.Dropped)
	assert.Equal(t, uint64(1), s.Failed)

	// Other contexts still go through the hooks.
	plain := newFakeCtx("plain")
	o = newAtRes(q, 30, false, WithContext(plain))
	require.NoError(t, o.reg.Release())
	runtime.KeepAlive(o)
	assert.Equal(t, int32(2), hooked.Load())
}

// A release function that finds its context destroyed (it may go between the
// liveness check and the release) is dropped, not failed: explicitly and on the
// finalizer path, under a DirectContext and through the hooks.
func TestReleaseReportsContextDestroyed(t *testing.T) {
	resetAtReleases(t)
	q := newTestQueue(t, time.Hour)
	q.setContextHooks(rescore.ContextHooks{Run: func(_ any, f func()) error { f(); return nil }})
	live := &directCtx{}
	live.alive.Store(true)
	for _, ctx := range []Context{live, newFakeCtx("hooked")} {
		before := q.status()
		o := newAtRes(q, ctxGoneID, false, WithContext(ctx))
		require.ErrorIs(t, o.reg.Release(), ErrContextDestroyed)
		runtime.KeepAlive(o)
		dropAtRes(q, ctxGoneID-10, 2, true, WithContext(ctx))
		_, err := q.reclaim()
		require.NoError(t, err)
		s := q.status()
		assert.Equal(t, before.Dropped+3, s.Dropped, "%T", ctx)
		assert.Equal(t, before.Failed, s.Failed, "%T", ctx)
	}
}
