package resource

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCaptureGateHoldsEverything(t *testing.T) {
	q := newTestQueue(t, time.Millisecond)
	rec := newRecorder()
	explicit := keep(q, rec, 100, true)

	require.NoError(t, q.beginCapture())
	require.NoError(t, q.beginCapture()) // captures nest
	assert.Equal(t, 2, q.status().Captures)

	drop(q, rec, 0, 10, false)
	drop(q, rec, 10, 10, true)
	waitFired(t, q, 20)
	q.drain()
	n, err := q.reclaim()
	assert.ErrorIs(t, err, ErrCaptureInProgress)
	assert.Zero(t, n)
	require.NoError(t, explicit.reg.Release(), "deferred, not failed")
	assert.ErrorIs(t, explicit.reg.Release(), ErrReleased)
	time.Sleep(30 * time.Millisecond) // worker woken, delay elapsed
	assert.Zero(t, rec.total(), "nothing released during a capture")
	s := q.status()
	assert.Equal(t, int64(11), s.PendingNonBlocking)
	assert.Equal(t, int64(10), s.PendingBlocking)

	q.endCapture()
	time.Sleep(10 * time.Millisecond)
	assert.Zero(t, rec.total(), "one capture still in progress")

	q.endCapture() // last one: non-blocking releases run before it returns
	assert.Equal(t, 11, rec.total())
	assert.Equal(t, 1, rec.count(100))
	s = q.status()
	assert.Equal(t, uint64(10), s.ReleasedNonBlocking)
	assert.Equal(t, uint64(1), s.Explicit)
	assert.Equal(t, int64(10), s.PendingBlocking, "blocking releases still wait for Reclaim")

	n, err = q.reclaim()
	require.NoError(t, err)
	assert.Equal(t, 10, n)
	assert.Equal(t, 21, rec.total())
	for i := 0; i < 20; i++ {
		assert.Equal(t, 1, rec.count(i))
	}
	assert.Zero(t, q.status().Live())
	runtime.KeepAlive(explicit)

	assert.PanicsWithValue(t, "resource: EndCapture without matching BeginCapture", q.endCapture)
}

// A capture starting in the middle of a drain stops it between two
// releases; the rest waits for the capture's end.
func TestCaptureStartingMidDrain(t *testing.T) {
	q := newTestQueue(t, time.Hour)
	var ran atomic.Int32
	began := make(chan error, 1)
	func() {
		for i := 0; i < 5; i++ {
			o := &fakeRes{id: i}
			o.reg = ResourceFinalizer(func(o *fakeRes) {
				if ran.Add(1) == 1 {
					go func() { began <- q.beginCapture() }()
					// Let BeginCapture start waiting for us.
					require.Eventually(t, func() bool {
						q.mu.Lock()
						defer q.mu.Unlock()
						return q.waiters == 1
					}, 5*time.Second, time.Millisecond)
				}
			}, o, false, withQueue(q))
		}
	}()
	waitFired(t, q, 5)
	q.drain()
	require.NoError(t, <-began)
	assert.Equal(t, int32(1), ran.Load(), "the drain stopped at the gate")
	assert.Equal(t, int64(4), q.status().PendingNonBlocking)
	q.endCapture()
	assert.Equal(t, int32(5), ran.Load())
	assert.Zero(t, q.status().PendingNonBlocking)
}

func TestBeginCaptureWaitsForRoutineDrain(t *testing.T) {
	q := newTestQueue(t, 0)
	inRelease := make(chan struct{})
	unblock := make(chan struct{})
	var finished atomic.Bool
	func() {
		o := &fakeRes{}
		o.reg = ResourceFinalizer(func(*fakeRes) {
			close(inRelease)
			<-unblock
			finished.Store(true)
		}, o, false, withQueue(q))
	}()
	collect()
	select {
	case <-inRelease: // the worker is running it
	case <-time.After(5 * time.Second):
		t.Fatal("release did not start")
	}
	began := make(chan error, 1)
	go func() { began <- q.beginCapture() }()
	select {
	case <-began:
		t.Fatal("BeginCapture did not wait for the release in progress")
	case <-time.After(50 * time.Millisecond):
	}
	close(unblock)
	select {
	case err := <-began:
		require.NoError(t, err)
		assert.True(t, finished.Load())
	case <-time.After(5 * time.Second):
		t.Fatal("BeginCapture still waiting")
	}
	q.endCapture()
}

func TestBeginCaptureFailsWhileReclaimRuns(t *testing.T) {
	q := newTestQueue(t, time.Hour)
	inRelease := make(chan struct{})
	unblock := make(chan struct{})
	func() {
		o := &fakeRes{}
		o.reg = ResourceFinalizer(func(*fakeRes) {
			close(inRelease)
			<-unblock // a cuMemFree waiting for the GPU
		}, o, true, withQueue(q))
	}()
	done := make(chan error, 1)
	go func() {
		_, err := q.reclaim()
		done <- err
	}()
	select {
	case <-inRelease:
	case <-time.After(5 * time.Second):
		t.Fatal("Reclaim did not run the blocking release")
	}
	assert.ErrorIs(t, q.beginCapture(), ErrReclaimInProgress)
	select {
	case <-done:
		t.Fatal("Reclaim ended while its release was blocked")
	default: // beginCapture failed while the release was still running: it did not wait
	}
	assert.Zero(t, q.status().Captures)
	close(unblock)
	require.NoError(t, <-done)
	require.NoError(t, q.beginCapture())
	q.endCapture()
}

func TestBeginCaptureFromInsideRelease(t *testing.T) {
	q := newTestQueue(t, time.Hour)
	rec := newRecorder()
	o := keep(q, rec, 1, false)
	inner := &fakeRes{}
	inner.reg = ResourceFinalizer(func(*fakeRes) {
		// A release that captures a graph: must not wait for itself.
		require.NoError(t, q.beginCapture())
		assert.NoError(t, o.reg.Release(), "deferred")
		assert.Zero(t, rec.total())
		q.endCapture()
	}, inner, false, withQueue(q))
	done := make(chan error, 1)
	go func() { done <- inner.reg.Release() }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("BeginCapture inside a release deadlocked")
	}
	assert.Equal(t, 1, rec.count(1))
}

// Release during a capture of a record the finalizer already queued: it
// becomes an explicit release that runs when the capture ends.
func TestReleaseDuringCaptureOfQueuedRecord(t *testing.T) {
	q := newTestQueue(t, time.Hour)
	rec := newRecorder()
	reg := func() *Registration {
		o := &fakeRes{id: 5}
		o.reg = ResourceFinalizer(rec.release, o, false, withQueue(q))
		return o.reg
	}()
	waitFired(t, q, 1)
	require.NoError(t, q.beginCapture())
	require.NoError(t, reg.Release())
	assert.ErrorIs(t, reg.Release(), ErrReleased)
	assert.False(t, reg.Cancel())
	assert.Zero(t, rec.total())
	q.endCapture()
	assert.Equal(t, 1, rec.count(5))
	s := q.status()
	assert.Equal(t, uint64(1), s.Explicit)
	assert.Zero(t, s.ReleasedNonBlocking)
	assert.Zero(t, s.Live())
}
