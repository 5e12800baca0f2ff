package owner

import (
	"errors"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/gocuda/gocuda/internal/errs"
	"github.com/gocuda/gocuda/resource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClose(t *testing.T) {
	var destroyed []uintptr
	fail := errors.New("destroy failed")
	destroy := func(h uintptr) error {
		destroyed = append(destroyed, h)
		if h == 2 {
			return fail
		}
		return nil
	}
	o := New(uintptr(1), destroy, true, "destroy")
	assert.Equal(t, uintptr(1), o.Handle())
	require.NoError(t, o.Close("lib: OwnedX"))
	assert.Equal(t, []uintptr{1}, destroyed)
	assert.Zero(t, o.Handle(), "zero once closed")
	err := o.Close("lib: OwnedX")
	// The same error as every second Close in gocuda.
	assert.Equal(t, errs.Closed("lib: OwnedX"), err)
	assert.ErrorIs(t, err, errs.ErrClosed)
	assert.ErrorIs(t, err, resource.ErrReleased)
	assert.Equal(t, []uintptr{1}, destroyed, "destroyed once")

	o2 := New(uintptr(2), destroy, false, "destroy")
	err = o2.Close("lib: OwnedX")
	require.ErrorIs(t, err, fail)
	assert.NotErrorIs(t, err, errs.ErrClosed, "the first Close returns the release's own error")
	assert.Equal(t, errs.Closed("lib: OwnedX"), o2.Close("lib: OwnedX"), "a failed release is still the one release")

	var zero Owned[uintptr]
	assert.Zero(t, zero.Handle())
	assert.Equal(t, errs.Closed("lib: OwnedX"), zero.Close("lib: OwnedX"))
}

// A dropped owner is destroyed by Reclaim, never by the finalizer goroutine itself.
func TestDropped(t *testing.T) {
	var n atomic.Int32
	func() {
		o := New(uintptr(7), func(h uintptr) error { n.Add(1); return nil }, true, "destroy")
		runtime.KeepAlive(o)
	}()
	runtime.GC()
	runtime.GC()
	assert.Zero(t, n.Load(), "a blocking release waits for Reclaim")
	_, err := resource.Reclaim()
	require.NoError(t, err)
	assert.Equal(t, int32(1), n.Load())
}
