package cuda_test

// Regression tests of the hardening review: nil and zero receivers, bad ordinals and
// element types, leaks of dropped contexts and modules, and the errors of objects
// whose context was closed.

import (
	"runtime"
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/resource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Methods of nil and zero values return zero values or typed errors; none panics.
func TestNilAndZeroReceivers(t *testing.T) {
	var c *cuda.Context
	assert.Zero(t, c.Handle())
	assert.Equal(t, cuda.Device(-1), c.Device())
	assert.Zero(t, (&cuda.Context{}).Handle())
	assert.Equal(t, cuda.Device(-1), (&cuda.Context{}).Device())
	assert.Nil(t, (*cuda.Stream)(nil).Context())
	assert.Nil(t, (&cuda.Stream{}).Context())
	assert.Zero(t, (&cuda.Stream{}).Handle())
	assert.Nil(t, (*cuda.Event)(nil).Context())
	assert.Nil(t, (&cuda.Event{}).Context())
	assert.Nil(t, (*cuda.Module)(nil).Context())
	assert.Nil(t, (*cuda.Function)(nil).Module())

	var b *cuda.LaunchBatch
	assert.Zero(t, b.Len())
	b.Reset()
	require.ErrorIs(t, b.Submit(nil), cuda.ErrInvalidArgument)
	require.ErrorIs(t, b.Add(nil, cuda.D1(1), cuda.D1(1), 0), cuda.ErrInvalidArgument)

	// Zero objects are refused before any driver call; their Close is that of a
	// closed object.
	for _, c := range []interface{ Close() error }{&cuda.Stream{}, &cuda.Event{}, &cuda.Module{}, &cuda.Context{},
		(*cuda.Stream)(nil), (*cuda.Event)(nil), (*cuda.Module)(nil), (*cuda.Context)(nil)} {
		err := c.Close()
		require.ErrorIs(t, err, cuda.ErrClosed, "%T", c)
		require.ErrorIs(t, err, resource.ErrReleased, "%T", c)
	}
	_, err := (&cuda.Stream{}).Query()
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)
	require.ErrorIs(t, (&cuda.Event{}).Record(nil), cuda.ErrInvalidArgument)
}

// The zero Context is not a context: every method refuses it, and Close destroys
// nothing (it called cuCtxDestroy(0)).
func TestZeroContext(t *testing.T) {
	if cudatest.Strict() {
		cudatest.Check(t)
	}
	z := &cuda.Context{}
	_, err := z.NewStream()
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)
	_, err = z.NewEvent(false)
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)
	_, err = z.LoadModule([]byte(".version 8.0"))
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)
	_, err = z.AllocHost(16)
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)
	_, err = z.AllocManaged(16)
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)
	_, err = cuda.Wrap(z, make([]byte, 16))
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)
	_, _, err = z.StreamPriorityRange()
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)
	require.ErrorIs(t, z.Synchronize(), cuda.ErrInvalidArgument)
	require.ErrorIs(t, z.Close(), cuda.ErrClosed, "destroys nothing")
}

// Ordinals the driver cannot take are refused: Device(1<<32) was device 0.
func TestDeviceOrdinals(t *testing.T) {
	for _, d := range []cuda.Device{1 << 32, -1, 1<<31 + 5} {
		_, err := d.Context()
		require.ErrorIs(t, err, cuda.ErrInvalidArgument, "%d", int(d))
		_, err = d.Name()
		require.ErrorIs(t, err, cuda.ErrInvalidArgument)
		_, err = cuda.NewContext(d, 0)
		require.ErrorIs(t, err, cuda.ErrInvalidArgument)
	}
}

// huge is an element type far too large to make a value of.
type huge [1 << 40]byte

// Generic functions never make a value of their element type (that killed the
// process with "runtime: out of memory").
func TestHugeElementType(t *testing.T) {
	_, err := cuda.AllocFor[huge](nil, 1)
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)
	require.ErrorIs(t, cuda.CopyToDevice[huge](nil, nil), cuda.ErrInvalidArgument)
	require.ErrorIs(t, cuda.CopyFromDevice[huge](nil, nil), cuda.ErrInvalidArgument)
	assert.Nil(t, cuda.HostSlice[huge]((*cuda.HostBuffer)(nil)))
	assert.Nil(t, cuda.HostSlice[huge]((*cuda.ManagedBuffer)(nil)))
	_, err = cuda.Wrap[huge](nil, nil)
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)

	ctx, s := memSetup(t)
	_, err = cuda.AllocFor[huge](s, 1)
	require.ErrorIs(t, err, cudaraw.ErrOutOfMemory, "1 TiB")
	h, err := ctx.AllocHost(4096)
	require.NoError(t, err)
	defer h.Close()
	assert.Nil(t, cuda.HostSlice[huge](h), "the buffer holds less than one element")
	assert.Len(t, cuda.HostSlice[[1024]byte](h), 4)
}

// A bad device ordinal keeps nothing: asking again and again for its context does
// not grow the package's tables.
func TestBadOrdinalKeepsNothing(t *testing.T) {
	cudatest.Require(t)
	n, err := cuda.DeviceCount()
	require.NoError(t, err)
	before := cuda.PrimariesForTest()
	for range 1000 {
		_, err := cuda.Device(n + 3).Context()
		require.Error(t, err)
	}
	assert.Equal(t, before, cuda.PrimariesForTest())
}

// ownContext returns a new context of device 0 with a stream and a 4 KiB buffer.
func ownContext(t *testing.T) (*cuda.Context, *cuda.Stream, *cuda.DeviceBuffer) {
	t.Helper()
	ctx, err := cuda.NewContext(0, 0)
	require.NoError(t, err)
	s, err := ctx.NewStream()
	require.NoError(t, err)
	b, err := ctx.Alloc(s, 4096)
	require.NoError(t, err)
	return ctx, s, b
}

// Contexts of NewContext dropped without Close are destroyed by resource.Reclaim
// (cuCtxDestroy waits for the GPU: blocking class), with their objects.
func TestDroppedContextsDestroyed(t *testing.T) {
	cudatest.Require(t)
	n := 50
	if !cudatest.Strict() {
		n = 10 // creating and destroying a context takes ~0.3 s on an H200
	}
	_, err := resource.Reclaim()
	require.NoError(t, err)
	before := cuda.ContextsForTest()
	var fakeBefore cudatest.Counts
	if cudatest.Strict() {
		cudatest.Check(t)
		fakeBefore = cudatest.Counters()
	}
	func() {
		for range n {
			ctx, s, b := ownContext(t)
			require.NoError(t, b.Memset8Async(s, 1))
			m, err := ctx.LoadModule(kernelsPTX)
			require.NoError(t, err)
			_, err = m.Function("empty")
			require.NoError(t, err)
		}
	}()
	assert.Equal(t, before+n, cuda.ContextsForTest())
	for range 3 {
		_, err = resource.Reclaim()
		require.NoError(t, err)
	}
	assert.Equal(t, before, cuda.ContextsForTest(), "every dropped context destroyed")
	if cudatest.Strict() {
		after := cudatest.Counters()
		assert.Equal(t, fakeBefore.Contexts, after.Contexts)
		assert.Equal(t, fakeBefore.Modules, after.Modules)
		assert.Equal(t, fakeBefore.Streams, after.Streams)
		assert.Equal(t, fakeBefore.DeviceAllocs, after.DeviceAllocs)
	}
}

// A Module whose Function was asked for, then dropped, is unloaded by Reclaim: the
// Function cache does not keep the Module reachable from itself.
func TestDroppedModuleUnloaded(t *testing.T) {
	cudatest.Require(t)
	if !cudatest.Strict() {
		t.Skip("counts the driver's modules: the fake driver's counters (CI)")
	}
	cudatest.Check(t)
	ctx, err := cuda.Device(0).Context()
	require.NoError(t, err)
	_, err = resource.Reclaim()
	require.NoError(t, err)
	before := cudatest.Counters().Modules
	func() {
		for range 10 {
			m, err := ctx.LoadModule(kernelsPTX)
			require.NoError(t, err)
			f, err := m.Function("empty")
			require.NoError(t, err)
			again, err := m.Function("empty")
			require.NoError(t, err)
			require.Same(t, f, again)
		}
	}()
	require.Equal(t, before+10, cudatest.Counters().Modules)
	_, err = resource.Reclaim()
	require.NoError(t, err)
	assert.Equal(t, before, cudatest.Counters().Modules)
}

// After a context's Close, closing its objects succeeds once (they went with the
// context) and then says ErrClosed, as for any object; using them says ErrClosed.
func TestObjectsOfClosedContext(t *testing.T) {
	cudatest.Require(t)
	if cudatest.Strict() {
		cudatest.Check(t)
	}
	ctx, s, b := ownContext(t)
	h, err := ctx.AllocHost(4096)
	require.NoError(t, err)
	ev, err := ctx.NewEvent(true)
	require.NoError(t, err)
	m, err := ctx.LoadModule(kernelsPTX)
	require.NoError(t, err)
	f, err := m.Function("empty")
	require.NoError(t, err)
	w, err := cuda.Wrap(ctx, make([]float32, 1024))
	require.NoError(t, err)
	require.NoError(t, f.Launch(s, cuda.D1(1), cuda.D1(1), 0))

	require.NoError(t, ctx.Close())
	require.ErrorIs(t, ctx.Close(), cuda.ErrClosed)

	require.ErrorIs(t, b.Memset8Async(s, 0), cuda.ErrClosed)
	require.ErrorIs(t, f.Launch(s, cuda.D1(1), cuda.D1(1), 0), cuda.ErrClosed)
	require.ErrorIs(t, ev.Record(s), cuda.ErrClosed)
	_, err = s.Query()
	require.ErrorIs(t, err, cuda.ErrClosed)
	_, err = ctx.NewStream()
	require.ErrorIs(t, err, cuda.ErrClosed)
	_, err = ctx.Alloc(s, 16)
	require.ErrorIs(t, err, cuda.ErrClosed)

	for name, c := range map[string]interface{ Close() error }{
		"stream": s, "device buffer": b, "host buffer": h, "event": ev, "module": m, "wrapped buffer": w,
	} {
		require.NoError(t, c.Close(), name)
		require.ErrorIs(t, c.Close(), cuda.ErrClosed, name)
	}
	runtime.KeepAlive(ctx)
}

// Elapsed between events of two contexts is an error, not a number.
func TestElapsedAcrossContexts(t *testing.T) {
	cudatest.Require(t)
	prim, err := cuda.Device(0).Context()
	require.NoError(t, err)
	own, err := cuda.NewContext(0, 0)
	require.NoError(t, err)
	defer own.Close()
	a, err := prim.NewEvent(true)
	require.NoError(t, err)
	defer a.Close()
	b, err := own.NewEvent(true)
	require.NoError(t, err)
	defer b.Close()
	_, err = cuda.Elapsed(a, b)
	require.ErrorIs(t, err, cuda.ErrWrongContext)
}

// Closing a context gives its memory back, buffers still open included: the device's
// free memory returns to where it was.
func TestContextCloseReturnsMemory(t *testing.T) {
	cudatest.Require(t)
	if cudatest.Strict() {
		cudatest.Check(t)
	}
	prim, err := cuda.Device(0).Context()
	require.NoError(t, err)
	free := func() uint64 {
		st, err := cuda.MemoryStatus()
		require.NoError(t, err)
		for _, c := range st.Contexts {
			if c.Primary && c.Device == 0 {
				return c.Free
			}
		}
		t.Fatal("no primary context in MemoryStatus")
		return 0
	}
	s, err := prim.NewStream()
	require.NoError(t, err)
	defer s.Close()
	b, err := prim.Alloc(s, 1) // the primary context's memory state, for MemoryStatus
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, prim.Synchronize())
	before := free()

	ctx, err := cuda.NewContext(0, 0)
	require.NoError(t, err)
	os, err := ctx.NewStream()
	require.NoError(t, err)
	const size = 256 << 20
	open, err := ctx.Alloc(os, size)
	require.NoError(t, err)
	require.NoError(t, open.Memset8Async(os, 1))
	closed, err := ctx.Alloc(os, size)
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	h, err := ctx.AllocHost(1 << 20)
	require.NoError(t, err)
	require.NoError(t, os.Synchronize())
	during := free()
	assert.Less(t, during, before, "the context's allocations use device memory")

	require.NoError(t, ctx.Close())
	after := free()
	t.Logf("device free: %d MiB before, %d MiB with the context, %d MiB after its Close", before>>20, during>>20, after>>20)
	assert.GreaterOrEqual(t, after+(64<<20), before, "the context's memory, the open buffer's included, came back")
	require.NoError(t, open.Close(), "went with the context")
	require.NoError(t, h.Close())
}
