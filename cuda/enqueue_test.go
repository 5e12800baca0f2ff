package cuda_test

import (
	"errors"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// noRawWork is raw work that queues nothing: an Enqueue of it orders the stream
// with its uses and records them, as any raw work would.
func noRawWork(cudaraw.CUcontext, cudaraw.CUstream) error { return nil }

// Enqueue holds and hands off the memory of work it does not see, and records it.
func TestEnqueue(t *testing.T) {
	ctx, _ := memSetup(t)
	ss := streams(t, ctx, 2)
	a, err := cuda.AllocFor[float32](ss[0], 64)
	require.NoError(t, err)
	defer a.Close()
	b, err := cuda.AllocFor[float32](ss[0], 64)
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, a.Memset32Async(ss[0], 0))

	before := cuda.HandOffsForTest(ss...)
	var got cudaraw.CUstream
	err = cuda.Enqueue(ss[1], func(c cudaraw.CUcontext, h cudaraw.CUstream) error {
		assert.Equal(t, ctx.Handle(), c)
		got = h
		return nil
	}, cuda.Reads(a), cuda.Reads(b), cuda.Writes(b))
	require.NoError(t, err)
	assert.Equal(t, ss[1].Handle(), got)
	assert.EqualValues(t, 1, cuda.HandOffsForTest(ss...)-before, "one wait: both buffers were last used on ss[0]")
	assert.Equal(t, 2, cuda.UsesForTest(a), "a read on ss[1] beside the write on ss[0]")
	assert.Equal(t, 1, cuda.UsesForTest(b), "b written on ss[1] (its second use): its only use")

	boom := errors.New("boom")
	require.ErrorIs(t, cuda.Enqueue(ss[0], func(cudaraw.CUcontext, cudaraw.CUstream) error { return boom }, cuda.Writes(a)), boom)
	assert.Equal(t, 2, cuda.UsesForTest(a), "a failed call records nothing")

	other, _, ob := ownContext(t)
	defer other.Close()
	defer ob.Close()
	require.ErrorIs(t, cuda.Enqueue(ss[0], func(cudaraw.CUcontext, cudaraw.CUstream) error { return nil }, cuda.Reads(ob)), cuda.ErrWrongContext)
	require.ErrorIs(t, cuda.Enqueue(ss[0], nil), cuda.ErrInvalidArgument)
	require.ErrorIs(t, cuda.Enqueue(nil, func(cudaraw.CUcontext, cudaraw.CUstream) error { return nil }), cuda.ErrInvalidArgument)
	require.NoError(t, b.Close())
	require.ErrorIs(t, cuda.Enqueue(ss[0], func(cudaraw.CUcontext, cudaraw.CUstream) error { return nil }, cuda.Writes(b)), cuda.ErrClosed)
	for _, s := range ss {
		require.NoError(t, s.Synchronize())
	}
}

// A panic in Enqueue's function ends its holds and unlocks the stream (Close of the
// memory and the stream would wait for ever otherwise); more uses than Enqueue keeps
// flags for inline, with a repeat past the eighth, are held once and recorded.
func TestEnqueuePanicAndManyUses(t *testing.T) {
	ctx, _ := memSetup(t)
	s, err := ctx.NewStream()
	require.NoError(t, err)
	bufs := make([]*cuda.DeviceBuffer, 10)
	var uses []cuda.Use
	for i := range bufs {
		bufs[i], err = cuda.AllocFor[float32](s, 64)
		require.NoError(t, err)
		uses = append(uses, cuda.Reads(bufs[i]))
	}
	// Repeats past the eighth that write: of bufs[9] (its first use past the eighth
	// too) and of bufs[0], last written on another stream, so that a read recorded
	// in place of the write would show as a second use.
	uses = append(uses, cuda.Writes(bufs[9]), cuda.Writes(bufs[0]))
	other, err := ctx.NewStream()
	require.NoError(t, err)
	defer other.Close()
	require.NoError(t, bufs[0].Memset32Async(other, 1))
	ran := false
	require.NoError(t, cuda.Enqueue(s, func(cudaraw.CUcontext, cudaraw.CUstream) error { ran = true; return nil }, uses...))
	assert.True(t, ran)
	for _, b := range bufs {
		assert.Equal(t, 1, cuda.UsesForTest(b), "one use recorded per buffer")
	}

	assert.PanicsWithValue(t, "boom", func() {
		_ = cuda.Enqueue(s, func(cudaraw.CUcontext, cudaraw.CUstream) error { panic("boom") }, uses...)
	})
	done := make(chan error, 1)
	go func() {
		var errs []error
		for _, b := range bufs {
			errs = append(errs, b.Close())
		}
		done <- errors.Join(append(errs, s.Close())...)
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for holds that the panic left behind")
	}
}

// Locked makes the context current on a locked thread, and restores the thread's.
func TestLocked(t *testing.T) {
	ctx, s := memSetup(t)
	other, _, ob := ownContext(t)
	defer other.Close()
	defer ob.Close()
	err := other.Locked(func() error {
		var cur cudaraw.CUcontext
		require.NoError(t, cudaraw.CtxGetCurrent(&cur))
		assert.Equal(t, other.Handle(), cur)
		return ctx.Locked(func() error {
			require.NoError(t, cudaraw.CtxGetCurrent(&cur))
			assert.Equal(t, ctx.Handle(), cur)
			return cudaraw.StreamSynchronize(s.Handle()) // a raw call
		})
	})
	require.NoError(t, err)
}

// DevicePtr gives the typed pointer the raw layer takes; complex64 and CuComplex
// (complex128 and CuDoubleComplex) share a layout.
func TestDevicePtr(t *testing.T) {
	_, s := memSetup(t)
	f, err := cuda.AllocFor[float32](s, 4)
	require.NoError(t, err)
	defer f.Close()
	p, err := cuda.DevicePtr[float32](f)
	require.NoError(t, err)
	assert.Equal(t, uintptr(f.Ptr()), uintptr(unsafe.Pointer(p)))
	_, err = cuda.DevicePtr[float64](f)
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)

	c, err := cuda.AllocFor[complex64](s, 4)
	require.NoError(t, err)
	defer c.Close()
	_, err = cuda.DevicePtr[cudaraw.CuComplex](c)
	require.NoError(t, err)
	z, err := cuda.AllocFor[cudaraw.CuDoubleComplex](s, 4)
	require.NoError(t, err)
	defer z.Close()
	_, err = cuda.DevicePtr[complex128](z)
	require.NoError(t, err)
	_, err = cuda.DevicePtr[float32](nil)
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)

	for _, pair := range [][2]reflect.Type{
		{reflect.TypeFor[complex64](), reflect.TypeFor[cudaraw.CuComplex]()},
		{reflect.TypeFor[complex128](), reflect.TypeFor[cudaraw.CuDoubleComplex]()},
	} {
		g, c := pair[0], pair[1]
		assert.Equal(t, g.Size(), c.Size(), "%v and %v", g, c)
		assert.Equal(t, uintptr(0), c.Field(c.NumField()-2).Offset, "real part first")
		assert.Equal(t, g.Size()/2, c.Field(c.NumField()-1).Offset, "imaginary part second")
	}
	v := complex64(complex(1.5, -2))
	cv := *(*cudaraw.CuComplex)(unsafe.Pointer(&v))
	assert.Equal(t, cudaraw.CuComplex{X: 1.5, Y: -2}, cv)
}
