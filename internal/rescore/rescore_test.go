package rescore_test

import (
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocuda/gocuda/internal/rescore"
	"github.com/gocuda/gocuda/resource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests go through package resource's default queue, as the cuda package does:
// linking resource installs it. (resource's own tests cover the queue in depth, on
// isolated queues.)

type res struct {
	id  int
	tag *int // pointerful: no tiny allocation
}

// ctx is a context as the cuda package's hooks see one.
type ctx struct{ name string }

// direct is a DirectContext, like the cuda package's own releases' context.
type direct struct {
	alive bool
	calls atomic.Int32
}

func (d *direct) ResourceDirect() bool { d.calls.Add(1); return d.alive }

func TestContextHooks(t *testing.T) {
	t.Cleanup(func() { rescore.SetContextHooks(rescore.ContextHooks{}) })
	cur := &ctx{"current"}
	var alive, ran atomic.Int32
	var inRun atomic.Pointer[ctx]
	rescore.SetContextHooks(rescore.ContextHooks{
		Current: func() any { return cur },
		Alive:   func(c any) bool { alive.Add(1); return c.(*ctx).name != "gone" },
		Run: func(c any, f func()) error {
			ran.Add(1)
			inRun.Store(c.(*ctx))
			defer inRun.Store(nil)
			f()
			return nil
		},
	})

	// Registered under the current context, released with it current.
	var seen *ctx
	o := &res{id: 1}
	reg := resource.ResourceFinalizer(func(*res) { seen = inRun.Load() }, o, true)
	require.NoError(t, reg.Release())
	runtime.KeepAlive(o)
	assert.Same(t, cur, seen)
	assert.Equal(t, int32(1), alive.Load())
	assert.Equal(t, int32(1), ran.Load())

	// A gone context drops the release.
	o = &res{id: 2}
	reg = resource.ResourceFinalizer(func(*res) { t.Error("released in a gone context") }, o, true,
		resource.WithContext(&ctx{"gone"}))
	assert.ErrorIs(t, reg.Release(), resource.ErrContextDestroyed)
	runtime.KeepAlive(o)

	// A DirectContext bypasses Alive and Run.
	d := &direct{alive: true}
	released := false
	o = &res{id: 3}
	reg = resource.ResourceFinalizer(func(*res) { released = true }, o, true, resource.WithContext(d))
	require.NoError(t, reg.Release())
	runtime.KeepAlive(o)
	assert.True(t, released)
	assert.Equal(t, int32(1), d.calls.Load())
	assert.Equal(t, int32(2), alive.Load(), "Alive not called for a DirectContext")
	assert.Equal(t, int32(1), ran.Load(), "Run not called for a DirectContext")

	// The zero hooks uninstall them: no context, released directly.
	rescore.SetContextHooks(rescore.ContextHooks{})
	released = false
	o = &res{id: 4}
	reg = resource.ResourceFinalizer(func(*res) { released = inRun.Load() == nil }, o, true)
	require.NoError(t, reg.Release())
	runtime.KeepAlive(o)
	assert.True(t, released)
	assert.Equal(t, int32(1), ran.Load())
}

func TestCaptureGate(t *testing.T) {
	// Atomic: were this test slower than the background worker's 100 ms, the worker
	// (woken by the deferred release) could run it after the gate reopens.
	var released atomic.Int32
	o := &res{id: 5}
	reg := resource.ResourceFinalizer(func(*res) { released.Add(1) }, o, false)

	require.NoError(t, rescore.BeginCapture())
	require.NoError(t, rescore.BeginCapture()) // captures nest
	assert.Equal(t, 2, resource.Status().Captures)
	n, err := resource.Reclaim()
	assert.ErrorIs(t, err, resource.ErrCaptureInProgress)
	assert.Zero(t, n)
	require.NoError(t, reg.Release(), "deferred during a capture")
	resource.Drain()
	assert.Zero(t, released.Load())

	rescore.EndCapture()
	assert.Zero(t, released.Load(), "one capture still in progress")
	rescore.EndCapture() // the last one runs the deferred release
	assert.Eventually(t, func() bool { return released.Load() == 1 }, 5*time.Second, time.Millisecond)
	assert.Zero(t, resource.Status().Captures)
	runtime.KeepAlive(o)

	assert.PanicsWithValue(t, "resource: EndCapture without matching BeginCapture", rescore.EndCapture)
}

// BeginCapture does not wait for a Reclaim that is running releases.
func TestBeginCaptureDuringReclaim(t *testing.T) {
	inRelease, proceed := make(chan struct{}), make(chan struct{})
	func() {
		o := &res{id: 6}
		resource.ResourceFinalizer(func(*res) { close(inRelease); <-proceed }, o, true)
	}()
	done := make(chan error)
	go func() { _, err := resource.Reclaim(); done <- err }()
	<-inRelease
	assert.ErrorIs(t, rescore.BeginCapture(), resource.ErrReclaimInProgress)
	close(proceed)
	require.NoError(t, <-done)
	require.NoError(t, rescore.BeginCapture(), "the gate closes once Reclaim is done")
	rescore.EndCapture()
}

func TestInstall(t *testing.T) {
	assert.PanicsWithValue(t, "rescore: Install with a nil function", func() { rescore.Install(rescore.Core{}) })
	ok := rescore.Core{
		SetContextHooks: func(rescore.ContextHooks) {},
		BeginCapture:    func() error { return errors.New("second") },
		EndCapture:      func() {},
	}
	assert.PanicsWithValue(t, "rescore: Install called twice", func() { rescore.Install(ok) },
		"package resource installed itself")
}
