package resource

import (
	"bytes"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

//go:noinline
func leakSiteA(q *queue, rec *recorder, n int) {
	for i := 0; i < n; i++ {
		o := &fakeRes{id: i}
		o.reg = ResourceFinalizer(rec.release, o, true, withQueue(q), Kind("cuMemFree"))
	}
}

//go:noinline
func leakSiteB(q *queue, rec *recorder, n int) {
	for i := 0; i < n; i++ {
		o := &fakeRes{id: 100 + i}
		o.reg = ResourceFinalizer(rec.release, o, false, withQueue(q))
	}
}

// newBuffer is a wrapper library function: CallerSkip(1) blames its caller.
//
//go:noinline
func newBuffer(q *queue, rec *recorder) *fakeRes {
	o := &fakeRes{id: 200}
	o.reg = ResourceFinalizer(rec.release, o, true, withQueue(q), Kind("buffer"), CallerSkip(1))
	return o
}

//go:noinline
func leakSiteC(q *queue, rec *recorder) { newBuffer(q, rec) }

func TestLeakTracking(t *testing.T) {
	q := newTestQueue(t, time.Hour)
	rec := newRecorder()

	// Off by default: no stack captured.
	o := keep(q, rec, 1, true)
	assert.Nil(t, o.reg.site)
	runtime.KeepAlive(o)
	o = nil
	_, err := q.reclaim()
	require.NoError(t, err)
	assert.Empty(t, q.leakReport())

	q.leakOn.Store(true)
	leakSiteA(q, rec, 3)
	leakSiteB(q, rec, 2)
	leakSiteC(q, rec)
	closed := keep(q, rec, 300, true)
	require.NoError(t, closed.reg.Release()) // explicit close: not a leak
	cancelled := keep(q, rec, 301, true)
	cancelled.reg.Cancel()
	runtime.KeepAlive(closed)
	runtime.KeepAlive(cancelled)
	_, err = q.reclaim()
	require.NoError(t, err)

	leaks := q.leakReport()
	require.Len(t, leaks, 3, "%v", leaks)
	assert.Equal(t, uint64(3), leaks[0].Count)
	assert.Equal(t, "cuMemFree", leaks[0].Kind)
	assert.Contains(t, leaks[0].Site, "resource.leakSiteA ")
	assert.Contains(t, leaks[0].Site, "leaks_test.go:")
	assert.Contains(t, leaks[0].Stack, "resource.TestLeakTracking ")
	assert.Equal(t, uint64(2), leaks[1].Count)
	assert.Equal(t, "resource.fakeRes", leaks[1].Kind)
	assert.Contains(t, leaks[1].Site, "resource.leakSiteB ")
	assert.Equal(t, uint64(1), leaks[2].Count)
	assert.Equal(t, "buffer", leaks[2].Kind)
	assert.Contains(t, leaks[2].Site, "resource.leakSiteC ")
	assert.NotContains(t, leaks[2].Stack, "newBuffer")
	assert.True(t, strings.HasPrefix(leaks[0].String(), "3 × cuMemFree created at resource.leakSiteA") ||
		strings.Contains(leaks[0].String(), "3 × cuMemFree created at github.com/gocuda/gocuda/resource.leakSiteA"), leaks[0].String())
	assert.Equal(t, leaks, q.leakReport(), "deterministic")

	// Package-level switch.
	prev := EnableLeakTracking(true)
	assert.True(t, EnableLeakTracking(prev))
}

func TestDefaultFailureHandlerLogs(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	defer slog.SetDefault(old)

	q := newTestQueue(t, time.Hour)
	func() {
		o := &fakeRes{}
		o.reg = ResourceFinalizer(func(*fakeRes) error { return errors.New("CUDA_ERROR_ILLEGAL_ADDRESS") }, o, true,
			withQueue(q), Kind("cuMemFree"))
	}()
	_, err := q.reclaim()
	require.NoError(t, err)
	out := buf.String()
	assert.Contains(t, out, "level=ERROR")
	assert.Contains(t, out, "kind=cuMemFree")
	assert.Contains(t, out, "CUDA_ERROR_ILLEGAL_ADDRESS")

	// SetFailureHandler returns the previous handler; nil restores the default.
	prev := q.setFailureHandler(func(Failure) {})
	assert.NotNil(t, prev)
	q.setFailureHandler(nil)
	assert.Nil(t, q.onFailure.Load())
	p := SetFailureHandler(nil)
	assert.NotNil(t, p)
}
