package resource

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocuda/gocuda/internal/rescore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeCtx is a fake CUDA context.
type fakeCtx struct {
	name  string
	alive atomic.Bool
}

func newFakeCtx(name string) *fakeCtx {
	c := &fakeCtx{name: name}
	c.alive.Store(true)
	return c
}

// fakeDriver mimics the cuda package: a thread-current context (one
// "thread" here, guarded by a mutex, like cuCtxPushCurrent/PopCurrent).
type fakeDriver struct {
	current atomic.Pointer[fakeCtx] // what Current reports at registration
	runMu   sync.Mutex
	inRun   *fakeCtx // context current while a release runs
	runs    atomic.Int32
}

func (d *fakeDriver) hooks() rescore.ContextHooks {
	return rescore.ContextHooks{
		Current: func() any {
			if c := d.current.Load(); c != nil {
				return c
			}
			return nil
		},
		Alive: func(ctx any) bool { return ctx.(*fakeCtx).alive.Load() },
		Run: func(ctx any, f func()) error {
			c := ctx.(*fakeCtx)
			if c.name == "broken" {
				return fmt.Errorf("cuCtxPushCurrent: %w", ErrContextDestroyed)
			}
			d.runMu.Lock()
			defer d.runMu.Unlock()
			prev := d.inRun
			d.inRun = c
			d.runs.Add(1)
			f()
			d.inRun = prev
			return nil
		},
	}
}

// currentInRun is called by release functions (under runMu).
func (d *fakeDriver) currentInRun() *fakeCtx { return d.inRun }

func TestReleasesRunInTheirContext(t *testing.T) {
	q := newTestQueue(t, time.Hour)
	d := &fakeDriver{}
	q.setContextHooks(d.hooks())
	a, b := newFakeCtx("a"), newFakeCtx("b")

	var mu sync.Mutex
	seen := map[int]string{}
	f := func(o *fakeRes) {
		c := d.currentInRun()
		mu.Lock()
		defer mu.Unlock()
		if c == nil {
			seen[o.id] = "<none>"
		} else {
			seen[o.id] = c.name
		}
	}
	func() {
		d.current.Store(a)
		for i := 0; i < 3; i++ {
			o := &fakeRes{id: i}
			o.reg = ResourceFinalizer(f, o, i%2 == 0, withQueue(q))
		}
		d.current.Store(b)
		for i := 3; i < 6; i++ {
			o := &fakeRes{id: i}
			o.reg = ResourceFinalizer(f, o, i%2 == 0, withQueue(q))
		}
		// Explicit context overrides the current one; nil means none.
		o := &fakeRes{id: 6}
		o.reg = ResourceFinalizer(f, o, true, withQueue(q), WithContext(a))
		o = &fakeRes{id: 7}
		o.reg = ResourceFinalizer(f, o, true, withQueue(q), WithContext(nil))
		d.current.Store(nil)
		o = &fakeRes{id: 8}
		o.reg = ResourceFinalizer(f, o, false, withQueue(q))
	}()
	_, err := q.reclaim()
	require.NoError(t, err)
	mu.Lock()
	assert.Equal(t, map[int]string{0: "a", 1: "a", 2: "a", 3: "b", 4: "b", 5: "b", 6: "a", 7: "<none>", 8: "<none>"}, seen)
	mu.Unlock()

	// Explicit Release runs in the registration's context too.
	d.current.Store(b)
	o := &fakeRes{id: 9}
	o.reg = ResourceFinalizer(f, o, true, withQueue(q))
	d.current.Store(a)
	require.NoError(t, o.reg.Release())
	mu.Lock()
	assert.Equal(t, "b", seen[9])
	mu.Unlock()
}

func TestDestroyedContextReleasesAreDropped(t *testing.T) {
	q := newTestQueue(t, time.Hour)
	d := &fakeDriver{}
	q.setContextHooks(d.hooks())
	live, dead, broken := newFakeCtx("live"), newFakeCtx("dead"), newFakeCtx("broken")
	rec := newRecorder()

	d.current.Store(dead)
	drop(q, rec, 0, 4, true)
	drop(q, rec, 4, 4, false)
	explicitDead := keep(q, rec, 100, true)
	d.current.Store(live)
	drop(q, rec, 10, 3, true)
	drop(q, rec, 13, 3, false, WithContext(broken)) // Run says destroyed
	d.current.Store(nil)
	dead.alive.Store(false) // cuCtxDestroy

	assert.ErrorIs(t, explicitDead.reg.Release(), ErrContextDestroyed)
	n, err := q.reclaim()
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	assert.Equal(t, 3, rec.total())
	for i := 10; i < 13; i++ {
		assert.Equal(t, 1, rec.count(i))
	}
	s := q.status()
	assert.Equal(t, uint64(4+4+3+1), s.Dropped)
	assert.Equal(t, uint64(3), s.ReleasedBlocking)
	assert.Zero(t, s.ReleasedNonBlocking)
	assert.Zero(t, s.Explicit)
	assert.Zero(t, s.Failed)
	assert.Zero(t, s.Live())
}

func TestContextHookFailures(t *testing.T) {
	q := newTestQueue(t, time.Hour)
	var failures atomic.Int32
	q.setFailureHandler(func(f Failure) { failures.Add(1) })
	errPush := errors.New("cuCtxPushCurrent failed")
	ctx := newFakeCtx("x")
	var ran atomic.Int32
	f := func(*fakeRes) { ran.Add(1) }
	register := func() *fakeRes {
		o := &fakeRes{}
		o.reg = ResourceFinalizer(f, o, true, withQueue(q), WithContext(ctx))
		return o
	}

	q.setContextHooks(rescore.ContextHooks{Run: func(any, func()) error { return errPush }})
	assert.ErrorIs(t, register().reg.Release(), errPush)
	q.setContextHooks(rescore.ContextHooks{Run: func(any, func()) error { return nil }})
	assert.ErrorContains(t, register().reg.Release(), "did not call")
	q.setContextHooks(rescore.ContextHooks{Alive: func(any) bool { panic("alive hook") }})
	var pe *PanicError
	assert.ErrorAs(t, register().reg.Release(), &pe)
	q.setContextHooks(rescore.ContextHooks{Run: func(_ any, f func()) error { f(); return errPush }})
	assert.ErrorIs(t, register().reg.Release(), errPush)
	assert.Equal(t, int32(1), ran.Load())

	// Through the finalizer path: reported, counted, and the rest goes on.
	q.setContextHooks(rescore.ContextHooks{Run: func(any, func()) error { return errPush }})
	func() { register() }()
	_, err := q.reclaim()
	require.NoError(t, err)
	assert.Equal(t, int32(1), failures.Load())
	assert.Equal(t, uint64(5), q.status().Failed)

	// Zero hooks uninstall: releases run without a context.
	q.setContextHooks(rescore.ContextHooks{})
	assert.NoError(t, register().reg.Release())
	assert.Equal(t, int32(2), ran.Load())
}
