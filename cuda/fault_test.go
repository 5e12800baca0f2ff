package cuda_test

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
)

//go:embed testdata/faults.ptx
var faultsPTX []byte

// faultKinds are the kernels of faults.ptx and the sticky error each leaves.
var faultKinds = []struct {
	kernel string
	want   error
}{
	{"fault_illegal_address", cudaraw.ErrIllegalAddress},
	{"fault_assert", cudaraw.ErrAssert},
	{"fault_trap", cudaraw.ErrLaunchFailed},
}

// inFaultProcess runs the rest of the test in a child process where a real fault
// would end the device for the whole process (on a GPU, and for a primary
// context), and reports whether the caller is that process.
func inFaultProcess(t *testing.T, always bool) bool {
	if os.Getenv(cudatest.EnvChild) != "" || !always && cudatest.FakeLoaded() {
		return true
	}
	cudatest.Subprocess(t, nil)
	return false
}

// A kernel that faults ends its context: the first operation that sees the sticky
// error returns a *FaultError matching ErrFaulted and the driver's error, the
// handler is told once, every later operation on the context and its objects fails
// fast with the same error, and Close of each object returns without the driver.
func TestFaultEndsContext(t *testing.T) {
	cudatest.Require(t)
	for _, k := range faultKinds {
		t.Run(k.kernel, func(t *testing.T) {
			if !inFaultProcess(t, false) {
				return
			}
			ctx, err := cuda.NewContext(0, 0)
			require.NoError(t, err)
			var mu sync.Mutex
			var told []*cuda.FaultError
			require.NoError(t, ctx.SetFaultHandler(func(f *cuda.FaultError) { mu.Lock(); told = append(told, f); mu.Unlock() }))
			m, err := ctx.LoadModule(faultsPTX)
			require.NoError(t, err)
			s, err := ctx.NewStream()
			require.NoError(t, err)
			b, err := cuda.AllocFor[uint32](s, 256)
			require.NoError(t, err)
			ev, err := ctx.NewEvent(false)
			require.NoError(t, err)
			f, err := m.Function(k.kernel)
			require.NoError(t, err)
			require.NoError(t, f.Launch(s, cuda.D1(1), cuda.D1(1), 0), "the launch is queued; the fault comes later")

			err = s.Synchronize()
			var fe *cuda.FaultError
			require.ErrorAs(t, err, &fe, "%v", err)
			assert.ErrorIs(t, err, cuda.ErrFaulted)
			assert.ErrorIs(t, err, k.want)
			assert.Equal(t, cuda.Device(0), fe.Device)
			assert.NotEmpty(t, fe.Op)
			assert.Equal(t, k.kernel, fe.Kernel, "the last kernel launched on the stream")
			assert.Contains(t, err.Error(), "restarted")
			assert.Same(t, fe, ctx.Fault())

			for name, op := range map[string]func() error{
				"Memset32Async":     func() error { return b.Memset32Async(s, 1) },
				"AllocFor":          func() error { _, err := cuda.AllocFor[uint32](s, 16); return err },
				"NewStream":         func() error { _, err := ctx.NewStream(); return err },
				"NewEvent":          func() error { _, err := ctx.NewEvent(false); return err },
				"LoadModule":        func() error { _, err := ctx.LoadModule(faultsPTX); return err },
				"Launch":            func() error { return f.Launch(s, cuda.D1(1), cuda.D1(1), 0) },
				"Event.Record":      func() error { return ev.Record(s) },
				"Event.Query":       func() error { _, err := ev.Query(); return err },
				"Stream.Query":      func() error { _, err := s.Query(); return err },
				"Context.Sync":      ctx.Synchronize,
				"Buffer.Sync":       b.Synchronize,
				"CopyToDevice":      func() error { return cuda.CopyToDevice(b, []uint32{1}) },
				"CopyFromDevice":    func() error { return cuda.CopyFromDevice(make([]uint32, 1), b) },
				"Enqueue":           func() error { return cuda.Enqueue(s, noRawWork, cuda.Writes(b)) },
				"AcquireStream":     func() error { _, err := ctx.AcquireStream(t.Context()); return err },
				"Context.AllocHost": func() error { _, err := ctx.AllocHost(64); return err },
			} {
				err := op()
				require.ErrorIs(t, err, cuda.ErrFaulted, name)
				var got *cuda.FaultError
				require.True(t, errors.As(err, &got), name)
				assert.Same(t, fe, got, "%s: one error for the context", name)
			}
			mu.Lock()
			assert.Len(t, told, 1, "the handler is told once")
			mu.Unlock()

			// Closing calls no driver (the strict fake would report a use of the
			// faulted context) and never blocks.
			require.NoError(t, b.Close())
			require.NoError(t, ev.Close())
			require.NoError(t, s.Close())
			require.NoError(t, m.Close())
			require.NoError(t, ctx.Close())
		})
	}
}

// Whatever operation first meets the sticky error — a copy, a launch, Enqueue's
// function — returns the *FaultError and marks the context, naming itself and the
// kernel last launched on its stream.
func TestFaultSeenFirstByAnyOperation(t *testing.T) {
	cudatest.Require(t)
	for name, op := range map[string]func(s *cuda.Stream, f *cuda.Function, b *cuda.DeviceBuffer) error{
		"CopyFromDevice": func(s *cuda.Stream, f *cuda.Function, b *cuda.DeviceBuffer) error {
			return cuda.CopyFromDeviceAsync(s, make([]uint32, 4), b)
		},
		"Launch": func(s *cuda.Stream, f *cuda.Function, b *cuda.DeviceBuffer) error {
			return f.Launch(s, cuda.D1(1), cuda.D1(1), 0)
		},
		"Enqueue": func(s *cuda.Stream, f *cuda.Function, b *cuda.DeviceBuffer) error {
			return cuda.Enqueue(s, func(ctx cudaraw.CUcontext, h cudaraw.CUstream) error {
				return cudaraw.StreamQueryIn(ctx, h) // the raw call meets the driver's error first
			}, cuda.Writes(b))
		},
	} {
		t.Run(name, func(t *testing.T) {
			if !inFaultProcess(t, false) {
				return
			}
			ctx, err := cuda.NewContext(0, 0)
			require.NoError(t, err)
			defer ctx.Close()
			require.NoError(t, ctx.SetFaultHandler(func(*cuda.FaultError) {}))
			m, err := ctx.LoadModule(faultsPTX)
			require.NoError(t, err)
			s, err := ctx.NewStream()
			require.NoError(t, err)
			b, err := cuda.AllocFor[uint32](s, 4)
			require.NoError(t, err)
			f, err := m.Function("fault_illegal_address")
			require.NoError(t, err)
			require.NoError(t, f.Launch(s, cuda.D1(1), cuda.D1(1), 0))
			// On a GPU the launch returns before the kernel faults: wait until the
			// driver reports it, without an operation of the package's seeing it.
			require.ErrorIs(t, ctx.Locked(func() error { return cudaraw.CtxSynchronize() }), cudaraw.ErrIllegalAddress)
			require.Nil(t, ctx.Fault(), "nothing of the package's saw it yet")
			err = op(s, f, b)
			var fe *cuda.FaultError
			require.ErrorAs(t, err, &fe, "%v", err)
			assert.ErrorIs(t, err, cudaraw.ErrIllegalAddress)
			assert.Equal(t, "fault_illegal_address", fe.Kernel)
			assert.Same(t, fe, ctx.Fault())
			assert.Equal(t, s.Handle(), fe.Stream)
		})
	}
}

// A faulted primary context is never handed out again: Device.Context returns the
// fault.
func TestFaultPrimaryContext(t *testing.T) {
	cudatest.Require(t)
	if !inFaultProcess(t, true) {
		return
	}
	ctx, err := cuda.Device(0).Context()
	require.NoError(t, err)
	m, err := ctx.LoadModule(faultsPTX)
	require.NoError(t, err)
	s, err := ctx.NewStream()
	require.NoError(t, err)
	f, err := m.Function("fault_illegal_address")
	require.NoError(t, err)
	require.NoError(t, f.Launch(s, cuda.D1(1), cuda.D1(1), 0))
	require.ErrorIs(t, s.Synchronize(), cuda.ErrFaulted)
	again, err := cuda.Device(0).Context()
	assert.Nil(t, again)
	require.ErrorIs(t, err, cuda.ErrFaulted)
	require.ErrorIs(t, err, cudaraw.ErrIllegalAddress)
}

// What each kind of failing kernel does to the process, on a GPU: a fault of each
// kind in a child process, then whether a new context and the primary context can
// still be had there. An out-of-range launch and a kernel that outlives its
// waiter's deadline must leave the context usable. The log is the table of
// docs/faults.md.
func TestGPUFaultKindsEndTheProcess(t *testing.T) {
	g := cudatest.Require(t, cudatest.Kernels)
	if cudatest.FakeLoaded() || g == nil {
		t.Skip("a question about the real driver")
	}
	for _, k := range faultKinds {
		t.Run(k.kernel, func(t *testing.T) {
			if !inFaultProcess(t, true) {
				return
			}
			ctx, err := cuda.Device(0).Context()
			require.NoError(t, err)
			m, err := ctx.LoadModule(faultsPTX)
			require.NoError(t, err)
			s, err := ctx.NewStream()
			require.NoError(t, err)
			f, err := m.Function(k.kernel)
			require.NoError(t, err)
			require.NoError(t, f.Launch(s, cuda.D1(1), cuda.D1(1), 0))
			err = s.Synchronize()
			require.ErrorIs(t, err, cuda.ErrFaulted)
			require.ErrorIs(t, err, k.want)
			_, newErr := cuda.NewContext(0, 0)
			_, primErr := cuda.Device(0).Context()
			t.Logf("| %s | %v | NewContext: %v | Device(0).Context: %v |", k.kernel, k.want, newErr, primErr)
			assert.Error(t, newErr, "the driver gives no new context after a fault")
			assert.ErrorIs(t, primErr, cuda.ErrFaulted)
		})
	}
	t.Run("out_of_range_launch", func(t *testing.T) {
		_, m, s := loadKernels(t, cudatest.Kernels)
		empty := function(t, m, "empty")
		err := empty.Launch(s, cuda.D1(1), cuda.D1(4096), 0) // more threads than a block has
		require.Error(t, err)
		assert.NotErrorIs(t, err, cuda.ErrFaulted)
		require.NoError(t, empty.Launch(s, cuda.D1(1), cuda.D1(1), 0))
		require.NoError(t, s.Synchronize(), "the context is still usable")
		t.Logf("| out-of-range launch | %v | the context goes on |", err)
	})
	t.Run("kernel_past_deadline", func(t *testing.T) {
		_, m, s := loadKernels(t, cudatest.Kernels)
		spin := function(t, m, "spin")
		require.NoError(t, spin.Launch(s, cuda.D1(1), cuda.D1(1), 0, uint64(2_000_000_000)))
		c, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		waitErr := s.SynchronizeContext(c)
		require.ErrorIs(t, waitErr, context.DeadlineExceeded)
		other, err := m.Context().NewStream()
		require.NoError(t, err)
		defer other.Close()
		require.NoError(t, function(t, m, "empty").Launch(other, cuda.D1(1), cuda.D1(1), 0))
		require.NoError(t, other.Synchronize(), "other streams go on while the kernel runs")
		require.NoError(t, s.Synchronize(), "the kernel ends; nothing is faulted")
		t.Logf("| kernel past its waiter's deadline | %v | the waiter returns; other streams go on; no fault |", waitErr)
	})
}

// Sticky tells the driver's errors that end a context from the others, however
// they are wrapped.
func TestSticky(t *testing.T) {
	r, ok := cuda.Sticky(fmt.Errorf("a library: %w", cudaraw.ErrIllegalAddress))
	assert.True(t, ok)
	assert.Equal(t, cudaraw.CUDA_ERROR_ILLEGAL_ADDRESS, r)
	_, ok = cuda.Sticky(&cuda.FaultError{Result: cudaraw.CUDA_ERROR_ASSERT})
	assert.True(t, ok)
	for _, err := range []error{nil, cudaraw.ErrOutOfMemory, errors.New("cuda: no")} {
		_, ok := cuda.Sticky(err)
		assert.False(t, ok, "%v", err)
	}
}
