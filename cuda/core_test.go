package cuda_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/dl"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Without a driver, every entry point returns ErrNoDriver wrapping the loader's typed
// error, and nothing panics. On the fake driver (CI) the test runs again in a process
// without any driver.
func TestNoDriver(t *testing.T) {
	if cudatest.Active() {
		cudatest.RunWithoutDriver(t)
		return
	}
	if err := cudaraw.Library().Open(); err == nil {
		t.Skip("libcuda.so.1 is present: the no-driver path is tested where it is absent (CI)")
	}
	_, err := cuda.DeviceCount()
	require.ErrorIs(t, err, cuda.ErrNoDriver)
	require.ErrorIs(t, err, dl.ErrLibraryNotFound)
	var le *dl.LibraryError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, "libcuda.so.1", le.Soname)

	_, err = cuda.Device(0).Context()
	require.ErrorIs(t, err, cuda.ErrNoDriver)
	_, err = cuda.NewContext(0, 0)
	require.ErrorIs(t, err, cuda.ErrNoDriver)
	_, err = cuda.Device(0).Name()
	require.ErrorIs(t, err, cuda.ErrNoDriver)
}

// Nil objects are rejected with typed errors before any driver call.
func TestNilObjects(t *testing.T) {
	var c *cuda.Context
	_, err := c.NewStream()
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)
	_, err = c.NewEvent(false)
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)
	require.ErrorIs(t, c.Synchronize(), cuda.ErrInvalidArgument)

	var s *cuda.Stream
	require.ErrorIs(t, s.Synchronize(), cuda.ErrInvalidArgument)
	require.ErrorIs(t, s.Close(), cuda.ErrClosed)
	_, err = s.Query()
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)
	assert.Zero(t, s.Handle())

	var e *cuda.Event
	require.ErrorIs(t, e.Record(nil), cuda.ErrInvalidArgument)
	require.ErrorIs(t, e.Synchronize(), cuda.ErrInvalidArgument)
	require.ErrorIs(t, e.Close(), cuda.ErrClosed)
	_, err = cuda.Elapsed(nil, nil)
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)
}

func TestDeviceAndStreams(t *testing.T) {
	cudatest.Require(t)
	n, err := cuda.DeviceCount()
	require.NoError(t, err)
	require.Positive(t, n)
	name, err := cuda.Device(0).Name()
	require.NoError(t, err)
	assert.NotEmpty(t, name)
	major, _, err := cuda.Device(0).ComputeCapability()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, major, 5)

	ctx, err := cuda.Device(0).Context()
	require.NoError(t, err)
	again, err := cuda.Device(0).Context()
	require.NoError(t, err)
	assert.Same(t, ctx, again, "one primary context per device")

	least, greatest, err := ctx.StreamPriorityRange()
	require.NoError(t, err)
	assert.LessOrEqual(t, greatest, least)

	s, err := ctx.NewStream(cuda.WithPriority(cuda.Priority(greatest)))
	require.NoError(t, err)
	start, err := ctx.NewEvent(true)
	require.NoError(t, err)
	end, err := ctx.NewEvent(true)
	require.NoError(t, err)
	require.NoError(t, start.Record(s))
	require.NoError(t, end.Record(s))
	require.NoError(t, s.Synchronize())
	done, err := end.Query()
	require.NoError(t, err)
	assert.True(t, done)
	d, err := cuda.Elapsed(start, end)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, d, time.Duration(0))

	// Hand-off between streams without a host wait.
	s2, err := ctx.NewStream()
	require.NoError(t, err)
	require.NoError(t, s2.WaitEvent(end))
	require.NoError(t, s2.Synchronize())

	// Close, double Close, use after Close.
	require.NoError(t, s.Close())
	require.ErrorIs(t, s.Close(), cuda.ErrClosed)
	require.ErrorIs(t, start.Record(s), cuda.ErrClosed)
	require.ErrorIs(t, s.Synchronize(), cuda.ErrClosed)
	require.NoError(t, start.Close())
	require.ErrorIs(t, start.Close(), cuda.ErrClosed)
	require.ErrorIs(t, start.Record(s2), cuda.ErrClosed)
	nt, err := ctx.NewEvent(false)
	require.NoError(t, err)
	require.NoError(t, nt.Record(s2))
	_, err = cuda.Elapsed(nt, end)
	require.ErrorIs(t, err, cuda.ErrInvalidArgument, "timing needs timing events")
	require.NoError(t, s2.Close())
	require.NoError(t, end.Close())
	require.NoError(t, nt.Close())
}

// Goroutines move between threads, and CUDA's current context is per thread: calls on
// objects of two contexts, from many goroutines that never lock their thread, must
// each run in their object's context.
func TestContextsAcrossGoroutines(t *testing.T) {
	cudatest.Require(t)
	primary, err := cuda.Device(0).Context()
	require.NoError(t, err)
	other, err := cuda.NewContext(0, 0)
	require.NoError(t, err)

	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				ctx := primary
				if (g+i)%2 == 1 {
					ctx = other
				}
				s, err := ctx.NewStream()
				if err != nil {
					errs <- err
					return
				}
				e, err := ctx.NewEvent(false)
				if err == nil {
					err = e.Record(s)
				}
				if err == nil {
					err = s.Synchronize()
				}
				if err == nil {
					err = e.Synchronize()
				}
				if err == nil {
					err = errors.Join(e.Close(), s.Close())
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	// A stream of one context cannot wait for an event of another.
	s, err := primary.NewStream()
	require.NoError(t, err)
	e, err := other.NewEvent(false)
	require.NoError(t, err)
	require.ErrorIs(t, s.WaitEvent(e), cuda.ErrWrongContext)
	require.ErrorIs(t, e.Record(s), cuda.ErrWrongContext)
	require.NotZero(t, e.Handle())
	require.NoError(t, e.Close())
	assert.Zero(t, e.Handle(), "no live handle after Close")
	require.NoError(t, s.Close())
	assert.Zero(t, s.Handle(), "no live handle after Close")

	require.NoError(t, other.Close())
	require.ErrorIs(t, other.Close(), cuda.ErrClosed)
	_, err = other.NewStream()
	require.ErrorIs(t, err, cuda.ErrClosed)
}
