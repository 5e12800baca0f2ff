package cudalib_test

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/cudalib"
	"github.com/gocuda/gocuda/resource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain runs the tests on the strict fake driver where there is no GPU (CI).
func TestMain(m *testing.M) { os.Exit(cudatest.Main(m)) }

// raw is a stand-in library handle: a number, the key it was made for (as cuFFT's
// plans are for a transform), the context current when it was made, and the stream
// it was last set to.
type raw struct {
	id     int
	key    string
	ctx    cudaraw.CUcontext
	stream cudaraw.CUstream
}

type lib struct {
	made, sets atomic.Int32
	mu         sync.Mutex
	handles    map[int]*raw
}

func (l *lib) create(r *int) error { return l.createFor("", r) }

func (l *lib) createFor(k string, r *int) error {
	var c cudaraw.CUcontext
	if err := cudaraw.CtxGetCurrent(&c); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	*r = int(l.made.Add(1))
	l.handles[*r] = &raw{id: *r, key: k, ctx: c}
	return nil
}

// handle returns the stand-in handle r.
func (l *lib) handle(r int) *raw {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.handles[r]
}

func (l *lib) setStream(_ cudaraw.CUcontext, r int, st cudaraw.CUstream) error {
	l.sets.Add(1)
	l.mu.Lock()
	l.handles[r].stream = st
	l.mu.Unlock()
	return nil
}

// The tests' pools, made once: each pool takes one of the few library indices of
// internal/streamslot for the life of the process, and tests and benchmarks may run
// several times.
var (
	testLib  = &lib{handles: map[int]*raw{}}
	testPool = cudalib.NewPool[int, string, int](2, testLib.create, func(r int) string { return "owner" }, true)
	badPool  = cudalib.NewPool[int, string, int](2, func(*int) error { return errors.New("no library") },
		func(int) string { return "" }, false)
	none cudalib.NoKey // the key of every call of NewPool's pools
)

func TestPool(t *testing.T) {
	ctx, s1 := cudatest.Stream(t)
	s2, err := ctx.NewStream()
	require.NoError(t, err)
	defer s2.Close()
	l, p := testLib, testPool
	_, err = resource.Reclaim() // the pool starts empty
	require.NoError(t, err)
	id := func(i int) int { return int(l.made.Load()) + i } // the id of the i-th next handle
	sets := func(i int32) int32 { return l.sets.Load() + i }
	// takeBound takes a handle for s, checks that it is handle want, and binds it to
	// s, reporting whether that set the stream.
	takeBound := func(s *cuda.Stream, want int, msg string) (*cudalib.Handle[cudalib.NoKey, int, string, int], bool) {
		h, err := p.Take(ctx, s, none)
		require.NoError(t, err)
		assert.Equal(t, want, h.Raw, msg)
		rebound, err := h.Bind(ctx.Handle(), s.Handle(), l.setStream)
		require.NoError(t, err)
		return h, rebound
	}

	// A new handle is made in the stream's context and owned; the stream keeps it.
	first, second, set1 := id(1), id(2), sets(1)
	var got []int
	f := func(_ cudaraw.CUcontext, r int) error { got = append(got, r); return nil }
	require.NoError(t, p.Run(s1, none, l.setStream, f))
	assert.Equal(t, []int{first}, got)
	assert.Equal(t, ctx.Handle(), l.handles[first].ctx, "made with the context current")
	assert.Equal(t, s1.Handle(), l.handles[first].stream)
	assert.Equal(t, 1, p.Kept(ctx))
	assert.Zero(t, p.Idle(ctx))

	// The same stream reuses it without setting the stream again.
	require.NoError(t, p.Run(s1, none, l.setStream, f))
	assert.Equal(t, []int{first, first}, got)
	assert.Equal(t, set1, l.sets.Load())

	// Each stream keeps the handle bound to it.
	h1, err := p.Take(ctx, s1, none)
	require.NoError(t, err)
	h2, err := p.Take(ctx, s2, none)
	require.NoError(t, err)
	assert.Equal(t, first, h1.Raw)
	assert.Equal(t, second, h2.Raw, "no idle handle: a new one")
	assert.Zero(t, p.Kept(ctx), "taken")
	rebound, err := h2.Bind(ctx.Handle(), s2.Handle(), l.setStream)
	require.NoError(t, err)
	assert.True(t, rebound)
	p.Put(s2, h2)
	p.Put(s1, h1)
	assert.Equal(t, 2, p.Kept(ctx))
	h, err := p.Take(ctx, s2, none)
	require.NoError(t, err)
	assert.Equal(t, second, h.Raw, "the handle s2 keeps")
	assert.Equal(t, 1, p.Kept(ctx), "s2's is in use")

	// While a stream's handle is in use, a second call on the stream takes another;
	// given back, it goes to the cache (the stream keeps one), where a stream
	// prefers the handle last bound to it over the most recent one.
	h1, err = p.Take(ctx, s1, none)
	require.NoError(t, err)
	third, fourth := id(1), id(2)
	x2, _ := takeBound(s2, third, "s2's handle is in use: a new one")
	x1, _ := takeBound(s1, fourth, "s1's handle is in use: a new one")
	p.Put(s2, x2)
	p.Put(s1, x1)
	p.Put(s2, h)
	p.Put(s1, h1)
	assert.Equal(t, 2, p.Idle(ctx))
	assert.Equal(t, 2, p.Kept(ctx))
	h2, err = p.Take(ctx, s2, none)
	require.NoError(t, err)
	assert.Equal(t, second, h2.Raw)
	h, rebound = takeBound(s2, third, "the handle bound to s2, not the most recent")
	assert.False(t, rebound)
	h.Unbind()
	rebound, err = h.Bind(ctx.Handle(), s2.Handle(), l.setStream)
	require.NoError(t, err)
	assert.True(t, rebound, "after Unbind the stream is set again")
	p.Put(s2, h)
	p.Put(s2, h2)
	assert.Equal(t, 2, p.Idle(ctx), "s2 keeps second: third back to the cache")
	assert.Equal(t, 2, p.Kept(ctx))

	// A destroyed stream gives its handle to the cache, unbound.
	s3, err := ctx.NewStream()
	require.NoError(t, err)
	h, _ = takeBound(s3, third, "from the cache, the most recent")
	p.Put(s3, h)
	assert.Equal(t, 3, p.Kept(ctx))
	assert.Equal(t, 1, p.Idle(ctx))
	require.NoError(t, s3.Close())
	assert.Equal(t, 2, p.Kept(ctx))
	assert.Equal(t, 2, p.Idle(ctx))
	h1, err = p.Take(ctx, s1, none) // keeps s1's handle busy, so that Run takes from the cache
	require.NoError(t, err)
	set0 := sets(0)
	require.NoError(t, p.Run(s1, none, l.setStream, f))
	assert.Equal(t, set0, l.sets.Load(), "the cache's handle bound to s1 (fourth): not set again")
	assert.Equal(t, fourth, got[len(got)-1])
	p.Put(s1, h1)

	// A stream destroyed while a call uses its handle: the handle is left to the
	// call, then dropped, neither kept nor cached.
	s4, err := ctx.NewStream()
	require.NoError(t, err)
	h, _ = takeBound(s4, fourth, "from the cache")
	p.Put(s4, h)
	h, err = p.Take(ctx, s4, none)
	require.NoError(t, err)
	assert.Equal(t, fourth, h.Raw)
	kept, idle := p.Kept(ctx), p.Idle(ctx)
	require.NoError(t, s4.Close())
	p.Put(s4, h)
	assert.Equal(t, kept, p.Kept(ctx))
	assert.Equal(t, idle, p.Idle(ctx))

	// A closed stream keeps nothing more: a handle bound to it, given back after
	// the Close, goes to the cache.
	s5, err := ctx.NewStream()
	require.NoError(t, err)
	h, _ = takeBound(s5, third, "from the cache")
	require.NoError(t, s5.Close())
	p.Put(s5, h)
	assert.Equal(t, idle, p.Idle(ctx))
	assert.Equal(t, kept, p.Kept(ctx))

	// A full cache drops the handle (to its owner).
	extra, err := p.Take(ctx, s2, none)
	require.NoError(t, err)
	h3, err := p.Take(ctx, s2, none)
	require.NoError(t, err)
	h4, err := p.Take(ctx, s2, none)
	require.NoError(t, err)
	p.Put(s3, extra)
	p.Put(s3, h3)
	p.Put(s3, h4)
	assert.Equal(t, 2, p.Idle(ctx), "at most Max")

	// resource.Reclaim empties the cache and the streams.
	_, err = resource.Reclaim()
	require.NoError(t, err)
	assert.Zero(t, p.Idle(ctx))
	assert.Zero(t, p.Kept(ctx))
	made := l.made.Load()
	require.NoError(t, p.Run(s2, none, l.setStream, f))
	assert.Equal(t, made+1, l.made.Load(), "a new handle after Reclaim")
	assert.Equal(t, 1, p.Kept(ctx), "kept again")

	// Bad arguments are reported before a handle is made; a failed create is an error.
	made = l.made.Load()
	assert.ErrorIs(t, p.Run(nil, none, l.setStream, f), cuda.ErrInvalidArgument)
	assert.Equal(t, made, l.made.Load())
	assert.ErrorContains(t, badPool.Run(s1, none, l.setStream, f), "creating a handle: no library")
}

// BenchmarkRun is the Go side of one library call with three operands (a GEMM's):
// the checks, a cached handle, the hand-off planning and recording.
func BenchmarkRun(b *testing.B) {
	ctx, s := cudatest.Stream(b)
	l, p := testLib, testPool
	var bufs [3]*cuda.DeviceBuffer
	for i := range bufs {
		var err error
		bufs[i], err = ctx.Alloc(s, 2<<20)
		require.NoError(b, err)
		defer bufs[i].Close()
	}
	f := func(cudaraw.CUcontext, int) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Run(s, none, l.setStream, f, cuda.Reads(bufs[0]), cuda.Reads(bufs[1]), cuda.Writes(bufs[2])); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRunParallel is BenchmarkRun from GOMAXPROCS goroutines at once, each on a
// stream of the context's pool with buffers of its own: what the handles cost when
// every goroutine calls the library.
func BenchmarkRunParallel(b *testing.B) {
	ctx, _ := cudatest.Stream(b)
	l, p := testLib, testPool
	f := func(cudaraw.CUcontext, int) error { return nil }
	cudatest.RunParallel(b, ctx, func(s *cuda.Stream, pb *testing.PB) error {
		var bufs [3]*cuda.DeviceBuffer
		for i := range bufs {
			var err error
			if bufs[i], err = ctx.Alloc(s, 2<<20); err != nil {
				return err
			}
			defer bufs[i].Close()
		}
		for pb.Next() {
			if err := p.Run(s, none, l.setStream, f, cuda.Reads(bufs[0]), cuda.Reads(bufs[1]), cuda.Writes(bufs[2])); err != nil {
				return err
			}
		}
		return nil
	})
}

// A Close racing calls: each call either fails with ErrClosed or runs with the
// memory held until its work is queued — under the strict fake driver, a memset on
// freed memory fails the test. The buffers are larger than the cuda layer caches,
// so that Close frees them at once.
func TestRunCloseRace(t *testing.T) {
	cudatest.Check(t)
	ctx, s := cudatest.Stream(t)
	l, p := testLib, testPool
	for range 50 {
		buf, err := ctx.Alloc(s, 2<<20)
		require.NoError(t, err)
		ptr, err := cuda.DevicePtr[byte](buf)
		require.NoError(t, err)
		dev := cudaraw.CUdeviceptr(uintptr(unsafe.Pointer(ptr)))
		var wg sync.WaitGroup
		var ran, closed atomic.Int32
		for range 4 {
			wg.Go(func() {
				err := p.Run(s, none, l.setStream, func(_ cudaraw.CUcontext, _ int) error {
					return ctx.Locked(func() error { return cudaraw.MemsetD8Async(dev, 1, 2<<20, s.Handle()) })
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

// Calls on shared streams from many goroutines, while streams close and Reclaim
// empties the caches: no handle is ever used by two calls at once (each call marks
// the handle it runs on), and every call runs or fails with ErrClosed.
func TestRunExclusive(t *testing.T) {
	ctx, s := cudatest.Stream(t)
	l, p := testLib, testPool
	var inUse sync.Map // handle id → struct{} while a call runs on it
	f := func(_ cudaraw.CUcontext, r int) error {
		if _, busy := inUse.LoadOrStore(r, struct{}{}); busy {
			return fmt.Errorf("handle %d used by two calls at once", r)
		}
		runtime.Gosched()
		inUse.Delete(r)
		return nil
	}
	var wg sync.WaitGroup
	var ran atomic.Int32
	streams := make(chan *cuda.Stream, 64)
	for range 8 {
		wg.Go(func() {
			for i := range 300 {
				st := s
				if i%3 == 0 {
					select {
					case st = <-streams:
					default:
					}
				}
				err := p.Run(st, none, l.setStream, f)
				if st != s {
					select {
					case streams <- st:
					default:
						st.Close()
					}
				}
				switch {
				case err == nil:
					ran.Add(1)
				case errors.Is(err, cuda.ErrClosed):
				default:
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Go(func() { // streams made, shared and closed under the calls
		for range 60 {
			st, err := ctx.NewStream()
			if !assert.NoError(t, err) {
				return
			}
			streams <- st
			runtime.Gosched()
			select {
			case old := <-streams:
				assert.NoError(t, old.Close())
			default:
			}
		}
	})
	wg.Go(func() {
		for range 20 {
			_, err := resource.Reclaim()
			assert.NoError(t, err)
			runtime.Gosched()
		}
	})
	wg.Wait()
	close(streams)
	for st := range streams {
		st.Close()
	}
	assert.Greater(t, ran.Load(), int32(1000))
	require.NoError(t, s.Synchronize())
}

func noSetStream(cudaraw.CUcontext, int, cudaraw.CUstream) error { return nil }

type keyedHandle = cudalib.Handle[string, int, string, int64]

// The keyed pool: at most 3 idle handles per context, of at most 100 bytes together,
// a handle's bytes being its State.
var (
	keyedTestLib  = &lib{handles: map[int]*raw{}}
	keyedTestPool = cudalib.NewKeyedPool[string, int, string, int64](3, keyedTestLib.createFor, func(int) string { return "owner" }, false).
			LimitBytes(100, func(h *keyedHandle) int64 { return h.State })
)

func TestKeyedPool(t *testing.T) {
	ctx, s := cudatest.Stream(t)
	s2, err := ctx.NewStream()
	require.NoError(t, err)
	defer s2.Close()
	l, p := keyedTestLib, keyedTestPool
	_, err = resource.Reclaim()
	require.NoError(t, err)
	var got []int
	run := func(s *cuda.Stream, k string) {
		t.Helper()
		require.NoError(t, p.Run(s, k, noSetStream, func(_ cudaraw.CUcontext, r int) error { got = append(got, r); return nil }))
	}
	last := func() int { return got[len(got)-1] }

	// A handle is made for its key, in the stream's context; the stream keeps it for
	// the next call of that key.
	made := l.made.Load()
	run(s, "a")
	a := last()
	assert.Equal(t, "a", l.handle(a).key)
	assert.Equal(t, ctx.Handle(), l.handle(a).ctx)
	assert.Equal(t, 1, p.Kept(ctx))
	run(s, "a")
	assert.Equal(t, a, last(), "the stream's handle")

	// Another key: the stream's handle does not serve it; the new one goes to the
	// cache (the stream keeps one), where the next call of its key finds it.
	run(s, "b")
	b := last()
	assert.NotEqual(t, a, b)
	assert.Equal(t, "b", l.handle(b).key)
	assert.Equal(t, 1, p.Kept(ctx))
	assert.Equal(t, 1, p.Idle(ctx))
	run(s, "b")
	assert.Equal(t, b, last(), "from the cache")
	run(s, "a")
	assert.Equal(t, a, last(), "still the stream's")
	assert.Equal(t, made+2, l.made.Load())

	// A handle that holds memory is kept by no stream, and the cache keeps at most
	// 100 bytes of them.
	h, err := p.Take(ctx, s2, "big")
	require.NoError(t, err)
	assert.Zero(t, h.State, "new: the caller sets it up")
	h.State = 60
	_, err = h.Bind(ctx.Handle(), s2.Handle(), noSetStream)
	require.NoError(t, err)
	p.Put(s2, h)
	assert.Equal(t, 1, p.Kept(ctx), "s2 keeps nothing")
	assert.Equal(t, 2, p.Idle(ctx))
	h2, err := p.Take(ctx, s2, "big2")
	require.NoError(t, err)
	h2.State = 60
	p.Put(s2, h2)
	assert.Equal(t, 2, p.Idle(ctx), "over 100 bytes: dropped")
	h, err = p.Take(ctx, s2, "big")
	require.NoError(t, err)
	assert.Equal(t, int64(60), h.State, "the cached one, set up")
	p.Put(s2, h)

	// At most 3 idle handles of all keys.
	var hs []*keyedHandle
	for _, k := range []string{"c", "d", "e"} {
		h, err := p.Take(ctx, s2, k)
		require.NoError(t, err)
		hs = append(hs, h)
	}
	for _, h := range hs {
		p.Put(s2, h)
	}
	assert.Equal(t, 3, p.Idle(ctx), "b, big and c: d and e dropped")

	// Without a stream: a handle of the context and key, from the cache or new, that
	// goes back to the cache.
	made = l.made.Load()
	h, err = p.Take(ctx, nil, "c")
	require.NoError(t, err)
	assert.Equal(t, "c", l.handle(h.Raw).key)
	assert.Equal(t, made, l.made.Load(), "from the cache")
	_, err = h.Bind(ctx.Handle(), s.Handle(), noSetStream) // a call on s
	require.NoError(t, err)
	p.Put(nil, h)
	assert.Equal(t, 1, p.Kept(ctx), "no stream keeps it")
	h, err = p.Take(ctx, nil, "c")
	require.NoError(t, err)
	rebound, err := h.Bind(ctx.Handle(), s.Handle(), noSetStream)
	require.NoError(t, err)
	assert.True(t, rebound, "given back without a stream: unbound (its stream may be gone)")
	p.Put(nil, h)
	h, err = p.Take(ctx, nil, "f")
	require.NoError(t, err)
	assert.Equal(t, made+1, l.made.Load(), "new")
	p.Put(nil, h)
	assert.Equal(t, 3, p.Idle(ctx))

	// A destroyed stream gives its handle to the cache; Reclaim empties it all.
	s3, err := ctx.NewStream()
	require.NoError(t, err)
	run(s3, "g")
	assert.Equal(t, 2, p.Kept(ctx))
	_, err = resource.Reclaim()
	require.NoError(t, err)
	assert.Zero(t, p.Idle(ctx))
	assert.Zero(t, p.Kept(ctx))
	run(s3, "g")
	assert.Equal(t, 1, p.Kept(ctx))
	require.NoError(t, s3.Close())
	assert.Zero(t, p.Kept(ctx))
	assert.Equal(t, 1, p.Idle(ctx), "s3's handle")
}

// A destroyed context's idle handles go with it: the driver may give its handle to a
// later context, which must not get them.
func TestContextDestroyDropsIdle(t *testing.T) {
	cudatest.Require(t)
	other, err := cuda.NewContext(0, 0)
	require.NoError(t, err)
	s, err := other.NewStream()
	require.NoError(t, err)
	for _, k := range []string{"a", "b"} {
		require.NoError(t, keyedTestPool.Run(s, k, noSetStream, func(cudaraw.CUcontext, int) error { return nil }))
	}
	require.NoError(t, testPool.Run(s, none, testLib.setStream, func(cudaraw.CUcontext, int) error { return nil }))
	require.NoError(t, s.Close())
	assert.Equal(t, 2, keyedTestPool.Idle(other))
	assert.Equal(t, 1, testPool.Idle(other))
	require.NoError(t, other.Close())
	assert.Zero(t, keyedTestPool.Idle(other))
	assert.Zero(t, testPool.Idle(other))
}

// A call on a stream that keeps its handle allocates nothing, with a key or without.
func TestRunAllocs(t *testing.T) {
	ctx, s := cudatest.Stream(t)
	buf, err := ctx.Alloc(s, 2<<20)
	require.NoError(t, err)
	defer buf.Close()
	f := func(cudaraw.CUcontext, int) error { return nil }
	calls := map[string]func() error{
		"NoKey": func() error { return testPool.Run(s, none, testLib.setStream, f, cuda.Writes(buf)) },
		"keyed": func() error { return keyedTestPool.Run(s, "allocs", noSetStream, f, cuda.Writes(buf)) },
	}
	for name, call := range calls {
		require.NoError(t, call(), name) // makes the handle, which s keeps
		assert.Zero(t, testing.AllocsPerRun(100, func() { require.NoError(t, call()) }), name)
	}
}
