package libhandle_test

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/internal/fakecuda"
	"github.com/gocuda/gocuda/internal/gputest"
	"github.com/gocuda/gocuda/internal/libhandle"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain runs the tests on the strict fake driver where there is no GPU (CI).
func TestMain(m *testing.M) { os.Exit(fakecuda.Main(m)) }

// raw is a stand-in library handle: a number, the context current when it was made,
// and the stream it was last set to.
type raw struct {
	id     int
	ctx    cuda.CUcontext
	stream cuda.CUstream
}

type lib struct {
	made, sets atomic.Int32
	mu         sync.Mutex
	handles    map[int]*raw
}

func (l *lib) create(r *int) error {
	var c cuda.CUcontext
	if err := cuda.CtxGetCurrent(&c); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	*r = int(l.made.Add(1))
	l.handles[*r] = &raw{id: *r, ctx: c}
	return nil
}

func (l *lib) setStream(_ cuda.CUcontext, r int, st cuda.CUstream) error {
	l.sets.Add(1)
	l.mu.Lock()
	l.handles[r].stream = st
	l.mu.Unlock()
	return nil
}

func TestPool(t *testing.T) {
	ctx, s1 := gputest.Stream(t)
	s2, err := ctx.NewStream()
	require.NoError(t, err)
	defer s2.Close()
	l := &lib{handles: map[int]*raw{}}
	p := libhandle.New[int, string, int](2, l.create, func(r int) string { return "owner" }, true)

	// A new handle is made in the stream's context and owned.
	var got []int
	f := func(_ cuda.CUcontext, r int) error { got = append(got, r); return nil }
	require.NoError(t, p.Run(s1, l.setStream, f))
	assert.Equal(t, []int{1}, got)
	assert.Equal(t, ctx.Handle(), l.handles[1].ctx, "made with the context current")
	assert.Equal(t, s1.Handle(), l.handles[1].stream)
	assert.Equal(t, 1, p.Idle(ctx))

	// The same stream reuses it without setting the stream again.
	require.NoError(t, p.Run(s1, l.setStream, f))
	assert.Equal(t, int32(1), l.sets.Load())

	// Two handles in the cache: each stream takes the one last bound to it.
	h1, err := p.Take(ctx, s1)
	require.NoError(t, err)
	h2, err := p.Take(ctx, s2)
	require.NoError(t, err)
	assert.Equal(t, 1, h1.Raw)
	assert.Equal(t, 2, h2.Raw, "no idle handle: a new one")
	rebound, err := h2.Bind(ctx.Handle(), s2.Handle(), l.setStream)
	require.NoError(t, err)
	assert.True(t, rebound)
	p.Put(ctx, h2)
	p.Put(ctx, h1)
	h, err := p.Take(ctx, s2)
	require.NoError(t, err)
	assert.Equal(t, 2, h.Raw, "the handle bound to s2, not the most recent")
	rebound, err = h.Bind(ctx.Handle(), s2.Handle(), l.setStream)
	require.NoError(t, err)
	assert.False(t, rebound)
	h.Unbind()
	rebound, err = h.Bind(ctx.Handle(), s2.Handle(), l.setStream)
	require.NoError(t, err)
	assert.True(t, rebound, "after Unbind the stream is set again")
	p.Put(ctx, h)

	// A full cache drops the handle (to its owner).
	extra, err := p.Take(ctx, s1)
	require.NoError(t, err)
	h3, err := p.Take(ctx, s1)
	require.NoError(t, err)
	h4, err := p.Take(ctx, s1)
	require.NoError(t, err)
	p.Put(ctx, extra)
	p.Put(ctx, h3)
	p.Put(ctx, h4)
	assert.Equal(t, 2, p.Idle(ctx))

	// Bad arguments are reported before a handle is made; a failed create is an error.
	made := l.made.Load()
	assert.ErrorIs(t, p.Run(nil, l.setStream, f), cuda.ErrInvalidArgument)
	assert.Equal(t, made, l.made.Load())
	bad := libhandle.New[int, string, int](2, func(*int) error { return errors.New("no library") },
		func(int) string { return "" }, false)
	assert.ErrorContains(t, bad.Run(s1, l.setStream, f), "creating a handle: no library")
}

// BenchmarkRun is the Go side of one library call with three operands (a GEMM's):
// the checks, a cached handle, the hand-off planning and recording.
func BenchmarkRun(b *testing.B) {
	ctx, s := gputest.Stream(b)
	l := &lib{handles: map[int]*raw{}}
	p := libhandle.New[int, string, int](2, l.create, func(r int) string { return "owner" }, false)
	var bufs [3]*cuda.DeviceBuffer
	for i := range bufs {
		var err error
		bufs[i], err = ctx.Alloc(s, 2<<20)
		require.NoError(b, err)
		defer bufs[i].Close()
	}
	f := func(cuda.CUcontext, int) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Run(s, l.setStream, f, cuda.Reads(bufs[0]), cuda.Reads(bufs[1]), cuda.Writes(bufs[2])); err != nil {
			b.Fatal(err)
		}
	}
}

// A Close racing calls: each call either fails with ErrClosed or runs with the
// memory held until its work is queued — under the strict fake driver, a memset on
// freed memory fails the test. The buffers are larger than the cuda layer caches,
// so that Close frees them at once.
func TestRunCloseRace(t *testing.T) {
	fakecuda.Check(t)
	ctx, s := gputest.Stream(t)
	l := &lib{handles: map[int]*raw{}}
	p := libhandle.New[int, string, int](2, l.create, func(int) string { return "owner" }, false)
	for range 50 {
		buf, err := ctx.Alloc(s, 2<<20)
		require.NoError(t, err)
		ptr, err := cuda.DevicePtr[byte](buf)
		require.NoError(t, err)
		dev := cuda.CUdeviceptr(uintptr(unsafe.Pointer(ptr)))
		var wg sync.WaitGroup
		var ran, closed atomic.Int32
		for range 4 {
			wg.Go(func() {
				err := p.Run(s, l.setStream, func(_ cuda.CUcontext, _ int) error {
					return ctx.Locked(func() error { return cuda.MemsetD8Async(dev, 1, 2<<20, s.Handle()) })
				}, cuda.Writes(buf))
				switch {
				case err == nil:
					ran.Add(1)
				case errors.Is(err, cuda.ErrClosed):
					closed.Add(1)
				default:
					t.Error(err)
				}
			})
		}
		wg.Go(func() { assert.NoError(t, buf.Close()) })
		wg.Wait()
		assert.Equal(t, int32(4), ran.Load()+closed.Load())
	}
	require.NoError(t, s.Synchronize())
}
