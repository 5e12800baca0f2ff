package cuda_test

// Close against every operation. Each race makes fresh objects, starts an operation
// and a Close of one of its objects at the same moment, and checks that the
// operation either succeeded or failed with ErrClosed, that Close succeeded, and (on
// the strict fake driver, in CI) that no driver call used a destroyed handle or freed
// memory. On the fake driver each kind runs 10,000 races; on a GPU fewer
// (GOCUDA_RACES overrides both).

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// races returns how many races each kind runs.
func races(t *testing.T) int {
	t.Helper()
	if v := os.Getenv("GOCUDA_RACES"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "GOCUDA_RACES")
		return n
	}
	switch {
	case testing.Short():
		return 200
	case cudatest.Strict():
		return 10_000
	}
	return 500
}

// raceKind is one kind of race: setup makes the objects of one race, op uses them,
// close closes one of them, and done (may be nil) releases what is left.
type raceKind[T any] struct {
	name  string
	setup func(t *testing.T) T
	op    func(T) error
	close func(T) error
	done  func(T)
}

// runRaces runs n races of k, and reports how often the operation ran before the
// Close and how often it found the object closed.
func runRaces[T any](t *testing.T, n int, k raceKind[T]) {
	t.Run(k.name, func(t *testing.T) {
		// The races of a kind wait mostly for goroutines to wake: kinds run side by
		// side.
		t.Parallel()
		if cudatest.Strict() {
			cudatest.Check(t)
		}
		var ran, refused int
		rng := rand.New(rand.NewPCG(uint64(n), 7))
		for i := range n {
			objs := k.setup(t)
			var opErr, closeErr error
			var wg sync.WaitGroup
			start := make(chan struct{})
			// Which goroutine starts first, and how long each spins once released,
			// vary: a woken goroutine's latency is far larger than either side.
			spinOp, spinClose := rng.IntN(1024), rng.IntN(1024)
			doOp := func() {
				defer wg.Done()
				<-start
				spin(spinOp)
				opErr = k.op(objs)
			}
			doClose := func() {
				defer wg.Done()
				<-start
				spin(spinClose)
				closeErr = k.close(objs)
			}
			wg.Add(2)
			if rng.IntN(2) == 0 {
				go doOp()
				go doClose()
			} else {
				go doClose()
				go doOp()
			}
			close(start)
			wg.Wait()
			if k.done != nil {
				k.done(objs)
			}
			require.NoError(t, closeErr, "race %d: Close", i)
			switch {
			case opErr == nil:
				ran++
			case errors.Is(opErr, cuda.ErrClosed):
				refused++
			default:
				require.NoError(t, opErr, "race %d: the operation failed otherwise than with ErrClosed", i)
			}
		}
		t.Logf("%d races: the operation ran in %d, found the object closed in %d", n, ran, refused)
	})
}

var spinSink atomic.Int64

// spin busy-waits for up to a few microseconds, to vary which side of a race comes
// first.
func spin(n int) {
	x := 0
	for i := range n * 4 {
		x += i
	}
	spinSink.Add(int64(x))
}

// raceEnv is what every race uses: the primary context, a long-lived stream, the
// test kernels and one of them, axpy_f32(float a, const float *x, float *y, int n).
type raceEnv struct {
	ctx  *cuda.Context
	s    *cuda.Stream
	s2   *cuda.Stream // another long-lived stream, for hand-offs
	m    *cuda.Module
	axpy *cuda.Function
	host []float32
}

func newRaceEnv(t *testing.T) *raceEnv {
	cudatest.Require(t)
	// The kinds of a test run side by side; once they are all done, count the
	// Closes that found an operation holding their object and waited for it: the
	// races overlapped, not merely ran one after the other.
	// (Asserted over the 10,000 races per kind of the fake driver, where it is
	// certain; a few hundred races may all miss the window of a fast operation.)
	waits, n := cuda.HoldWaitsForTest(), races(t)
	t.Cleanup(func() {
		w := cuda.HoldWaitsForTest() - waits
		t.Logf("a Close waited for an operation holding its object in %d races", w)
		if cudatest.Strict() && n >= 10_000 {
			assert.Positive(t, w, "no race overlapped")
		}
	})
	ctx, err := cuda.Device(0).Context()
	require.NoError(t, err)
	s, err := ctx.NewStream()
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	s2, err := ctx.NewStream()
	require.NoError(t, err)
	t.Cleanup(func() { s2.Close() })
	m, err := ctx.LoadModule(kernelsPTX)
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	f, err := m.Function("axpy_f32")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Synchronize()); require.NoError(t, s2.Synchronize()) })
	return &raceEnv{ctx: ctx, s: s, s2: s2, m: m, axpy: f, host: make([]float32, 64)}
}

// launch queues axpy on s reading x and writing y (any device memory).
func (e *raceEnv) launch(s *cuda.Stream, x, y any) error {
	return e.axpy.Launch(s, cuda.D1(1), cuda.D1(64), 0, float32(2), x, y, int32(64))
}

// batchOf returns a batch of one launch of f (axpy_f32 of a module) on x and y.
func batchOf(t *testing.T, f *cuda.Function, x, y any) *cuda.LaunchBatch {
	b := new(cuda.LaunchBatch)
	require.NoError(t, b.Add(f, cuda.D1(1), cuda.D1(64), 0, float32(2), x, y, int32(64)))
	return b
}

// allocClose allocates on s and frees the memory again.
func (e *raceEnv) allocClose(s *cuda.Stream) error {
	b, err := e.ctx.Alloc(s, 512)
	if err != nil {
		return err
	}
	return b.Close()
}

func (e *raceEnv) alloc(t *testing.T) *cuda.DeviceBuffer {
	b, err := e.ctx.Alloc(e.s, 256)
	require.NoError(t, err)
	return b
}

// TestRaceCloseBuffer races DeviceBuffer.Close (and the other buffers' Close)
// against every operation that passes the memory to the driver.
func TestRaceCloseBuffer(t *testing.T) {
	e := newRaceEnv(t)
	n := races(t)
	type bufs struct {
		b, other *cuda.DeviceBuffer
		batch    *cuda.LaunchBatch
	}
	setup := func(t *testing.T) bufs {
		b, other := e.alloc(t), e.alloc(t)
		// A batch holds its buffers only while Submit queues them.
		return bufs{b, other, batchOf(t, e.axpy, b, other)}
	}
	closeB := func(x bufs) error { return x.b.Close() }
	done := func(x bufs) { require.NoError(t, x.other.Close()) }
	for _, k := range []struct {
		name string
		op   func(bufs) error
	}{
		{"Launch", func(x bufs) error { return e.launch(e.s, x.b, x.other) }},
		{"CopyToDeviceAsync", func(x bufs) error { return cuda.CopyToDeviceAsync(e.s, x.b, e.host) }},
		{"CopyFromDeviceAsync", func(x bufs) error { return cuda.CopyFromDeviceAsync(e.s, e.host, x.b) }},
		{"CopyAsync", func(x bufs) error { return cuda.CopyAsync(e.s, x.other, x.b) }},
		{"CopyToDevice", func(x bufs) error { return cuda.CopyToDevice(x.b, e.host) }},
		{"Copy", func(x bufs) error { return cuda.Copy(x.b, x.other) }},
		{"Memset8Async", func(x bufs) error { return x.b.Memset8Async(e.s, 1) }},
		{"Memset32", func(x bufs) error { return x.b.Memset32(7) }},
		{"LaunchBatch.Submit", func(x bufs) error { return x.batch.Submit(e.s) }},
		// Hand-offs: the buffers were allocated on e.s; these use them on e.s2.
		{"Launch/hand-off", func(x bufs) error { return e.launch(e.s2, x.b, x.other) }},
		{"Launch/In", func(x bufs) error { return e.launch(e.s2, cuda.In(x.b), x.other) }},
		{"CopyAsync/hand-off", func(x bufs) error { return cuda.CopyAsync(e.s2, x.other, x.b) }},
		{"Enqueue/hand-off", func(x bufs) error { return cuda.Enqueue(e.s2, noRawWork, cuda.Writes(x.b)) }},
		{"Synchronize", func(x bufs) error { return x.b.Synchronize() }},
	} {
		runRaces(t, n, raceKind[bufs]{name: k.name, setup: setup, op: k.op, close: closeB, done: done})
	}
	// A view holds its buffer: the buffer's Close waits for operations on the view.
	type viewOf struct{ b, v *cuda.DeviceBuffer }
	viewSetup := func(t *testing.T) viewOf {
		b := e.alloc(t)
		v, err := b.Slice(64, 128)
		require.NoError(t, err)
		return viewOf{b, v}
	}
	for _, k := range []struct {
		name string
		op   func(viewOf) error
	}{
		{"View/Memset8Async", func(x viewOf) error { return x.v.Memset8Async(e.s, 1) }},
		{"View/Launch", func(x viewOf) error { return e.launch(e.s, x.v, x.v) }},
	} {
		runRaces(t, n, raceKind[viewOf]{name: k.name, setup: viewSetup, op: k.op,
			close: func(x viewOf) error { return x.b.Close() }})
	}

	// The other kinds of memory, as kernel arguments.
	type closer interface {
		cuda.Memory
		Close() error
	}
	for _, k := range []struct {
		name  string
		alloc func() (closer, error)
	}{
		{"HostBuffer/Launch", func() (closer, error) { return e.ctx.AllocHost(256) }},
		{"ManagedBuffer/Launch", func() (closer, error) { return e.ctx.AllocManaged(256) }},
	} {
		runRaces(t, n, raceKind[closer]{
			name: k.name,
			setup: func(t *testing.T) closer {
				m, err := k.alloc()
				require.NoError(t, err)
				return m
			},
			op:    func(m closer) error { return e.launch(e.s, m, m) },
			close: closer.Close,
		})
	}
	runRaces(t, min(n, wrapRaces()), raceKind[*cuda.WrappedBuffer]{
		name: "WrappedBuffer/Launch",
		setup: func(t *testing.T) *cuda.WrappedBuffer {
			w, err := cuda.Wrap(e.ctx, make([]float32, 1024)) // a page of its own
			require.NoError(t, err)
			return w
		},
		op:    func(w *cuda.WrappedBuffer) error { return e.launch(e.s, w, w) },
		close: (*cuda.WrappedBuffer).Close,
	})
}

// wrapRaces bounds the WrappedBuffer races on a GPU, where registering costs about
// 100 µs.
func wrapRaces() int {
	if cudatest.Strict() {
		return 10_000
	}
	return 200
}

// TestRaceCloseEvent races Event.Close against every operation on the event.
func TestRaceCloseEvent(t *testing.T) {
	e := newRaceEnv(t)
	n := races(t)
	type evs struct{ ev, other *cuda.Event }
	setup := func(t *testing.T) evs {
		ev, err := e.ctx.NewEvent(true)
		require.NoError(t, err)
		other, err := e.ctx.NewEvent(true)
		require.NoError(t, err)
		require.NoError(t, other.Record(e.s))
		require.NoError(t, ev.Record(e.s))
		return evs{ev, other}
	}
	done := func(x evs) { require.NoError(t, x.other.Close()) }
	for _, k := range []struct {
		name string
		op   func(evs) error
	}{
		{"Record", func(x evs) error { return x.ev.Record(e.s) }},
		{"Query", func(x evs) error { _, err := x.ev.Query(); return err }},
		{"Synchronize", func(x evs) error { return x.ev.Synchronize() }},
		{"Stream.WaitEvent", func(x evs) error { return e.s.WaitEvent(x.ev) }},
		{"Elapsed", func(x evs) error {
			if err := x.ev.Synchronize(); err != nil {
				return err
			}
			_, err := cuda.Elapsed(x.other, x.ev)
			return err
		}},
	} {
		runRaces(t, n, raceKind[evs]{name: k.name, setup: setup, op: k.op,
			close: func(x evs) error { return x.ev.Close() }, done: done})
	}
}

// TestRaceCloseStream races Stream.Close against every operation on the stream.
func TestRaceCloseStream(t *testing.T) {
	e := newRaceEnv(t)
	n := races(t)
	type strm struct {
		s     *cuda.Stream
		b     *cuda.DeviceBuffer
		ev    *cuda.Event
		batch *cuda.LaunchBatch
	}
	setup := func(t *testing.T) strm {
		s, err := e.ctx.NewStream()
		require.NoError(t, err)
		b, err := e.ctx.Alloc(s, 256)
		require.NoError(t, err)
		ev, err := e.ctx.NewEvent(false)
		require.NoError(t, err)
		require.NoError(t, ev.Record(e.s))
		return strm{s: s, b: b, ev: ev, batch: batchOf(t, e.axpy, b, b)}
	}
	done := func(x strm) {
		if err := x.b.Close(); !errors.Is(err, cuda.ErrClosed) { // the Buffer.Close kind closed it
			require.NoError(t, err)
		}
		require.NoError(t, x.ev.Close())
	}
	for _, k := range []struct {
		name string
		op   func(strm) error
	}{
		{"Launch", func(x strm) error { return e.launch(x.s, x.b, x.b) }},
		{"Alloc", func(x strm) error { return e.allocClose(x.s) }},
		{"CopyToDeviceAsync", func(x strm) error { return cuda.CopyToDeviceAsync(x.s, x.b, e.host) }},
		{"Memset8Async", func(x strm) error { return x.b.Memset8Async(x.s, 0) }},
		{"Event.Record", func(x strm) error { return x.ev.Record(x.s) }},
		{"WaitEvent", func(x strm) error { return x.s.WaitEvent(x.ev) }},
		{"Query", func(x strm) error { _, err := x.s.Query(); return err }},
		{"Synchronize", func(x strm) error { return x.s.Synchronize() }},
		{"Buffer.Close", func(x strm) error { return x.b.Close() }}, // freed on x.s, where it was allocated
		{"LaunchBatch.Submit", func(x strm) error { return x.batch.Submit(x.s) }},
		// The buffer was allocated on x.s: using it on e.s records an event on x.s
		// (or waits for its final event once it is closed).
		{"HandOff", func(x strm) error { return x.b.Memset8Async(e.s, 1) }},
		{"Launch/HandOff", func(x strm) error { return e.launch(e.s, x.b, x.b) }},
	} {
		runRaces(t, n, raceKind[strm]{name: k.name, setup: setup, op: k.op,
			close: func(x strm) error { return x.s.Close() }, done: done})
	}
}

// TestRaceClosePooledStream races the release of a pooled stream against every
// operation through it: each either runs before the release or fails with ErrClosed,
// never on the stream's next holder.
func TestRaceClosePooledStream(t *testing.T) {
	e := newRaceEnv(t)
	n := races(t)
	type lease struct {
		s  *cuda.Stream
		b  *cuda.DeviceBuffer // allocated on e.s
		ev *cuda.Event
	}
	setup := func(t *testing.T) lease {
		s, err := e.ctx.AcquireStream(context.Background())
		require.NoError(t, err)
		ev, err := e.ctx.NewEvent(false)
		require.NoError(t, err)
		require.NoError(t, ev.Record(e.s))
		return lease{s, e.alloc(t), ev}
	}
	done := func(x lease) {
		require.NoError(t, x.b.Close())
		require.NoError(t, x.ev.Close())
	}
	for _, k := range []struct {
		name string
		op   func(lease) error
	}{
		{"Launch", func(x lease) error { return e.launch(x.s, x.b, x.b) }},
		{"Launch/In", func(x lease) error { return e.launch(x.s, cuda.In(x.b), x.b) }},
		{"Alloc", func(x lease) error { return e.allocClose(x.s) }},
		{"CopyToDeviceAsync", func(x lease) error { return cuda.CopyToDeviceAsync(x.s, x.b, e.host) }},
		{"Memset8Async", func(x lease) error { return x.b.Memset8Async(x.s, 0) }},
		{"Enqueue", func(x lease) error { return cuda.Enqueue(x.s, noRawWork, cuda.Reads(x.b)) }},
		{"Event.Record", func(x lease) error { return x.ev.Record(x.s) }},
		{"WaitEvent", func(x lease) error { return x.s.WaitEvent(x.ev) }},
		{"Synchronize", func(x lease) error { return x.s.Synchronize() }},
	} {
		runRaces(t, n, raceKind[lease]{name: k.name, setup: setup, op: k.op,
			close: func(x lease) error { return x.s.Close() }, done: done})
	}
}

// TestRaceCloseModule races Module.Close against launches and lookups.
func TestRaceCloseModule(t *testing.T) {
	e := newRaceEnv(t)
	n := races(t)
	type mod struct {
		m     *cuda.Module
		f     *cuda.Function
		b     *cuda.DeviceBuffer
		batch *cuda.LaunchBatch
	}
	setup := func(t *testing.T) mod {
		m, err := e.ctx.LoadModule(kernelsPTX)
		require.NoError(t, err)
		f, err := m.Function("axpy_f32")
		require.NoError(t, err)
		b := e.alloc(t)
		return mod{m, f, b, batchOf(t, f, b, b)}
	}
	done := func(x mod) { require.NoError(t, x.b.Close()) }
	for _, k := range []struct {
		name string
		op   func(mod) error
	}{
		{"Launch", func(x mod) error {
			return x.f.Launch(e.s, cuda.D1(1), cuda.D1(64), 0, float32(2), x.b, x.b, int32(64))
		}},
		{"LaunchBatch.Submit", func(x mod) error { return x.batch.Submit(e.s) }},
		{"Function", func(x mod) error { _, err := x.m.Function("fill_u32"); return err }},
		{"Global", func(x mod) error { _, _, err := x.m.Global("magic"); return err }},
		{"Attribute", func(x mod) error {
			_, err := x.f.Attribute(cudaraw.CU_FUNC_ATTRIBUTE_NUM_REGS)
			return err
		}},
	} {
		runRaces(t, moduleRaces(n), raceKind[mod]{name: k.name, setup: setup, op: k.op,
			close: func(x mod) error { return x.m.Close() }, done: done})
	}
}

// moduleRaces bounds the module races on a GPU, where loading PTX takes the JIT
// compiler milliseconds.
func moduleRaces(n int) int {
	if cudatest.Strict() {
		return n
	}
	return min(n, 100)
}

// TestRaceCloseContext races Context.Close of a NewContext against work in it, and
// against the Close of its objects.
func TestRaceCloseContext(t *testing.T) {
	e := newRaceEnv(t)
	n := races(t)
	if !cudatest.Strict() {
		n = min(n, 10) // creating and destroying a context takes ~0.3 s on an H200
	}
	type cx struct {
		ctx   *cuda.Context
		s     *cuda.Stream
		b     *cuda.DeviceBuffer
		ev    *cuda.Event
		m     *cuda.Module
		f     *cuda.Function
		batch *cuda.LaunchBatch
	}
	setup := func(t *testing.T) cx {
		ctx, err := cuda.NewContext(0, 0)
		require.NoError(t, err)
		s, err := ctx.NewStream()
		require.NoError(t, err)
		b, err := ctx.Alloc(s, 256)
		require.NoError(t, err)
		ev, err := ctx.NewEvent(true)
		require.NoError(t, err)
		m, err := ctx.LoadModule(kernelsPTX)
		require.NoError(t, err)
		f, err := m.Function("axpy_f32")
		require.NoError(t, err)
		return cx{ctx, s, b, ev, m, f, batchOf(t, f, b, b)}
	}
	for _, k := range []struct {
		name string
		op   func(cx) error
	}{
		{"NewStream", func(x cx) error {
			s, err := x.ctx.NewStream()
			if err == nil {
				return s.Close()
			}
			return err
		}},
		{"Alloc", func(x cx) error { _, err := x.ctx.Alloc(x.s, 4096); return err }},
		{"AllocHost", func(x cx) error { _, err := x.ctx.AllocHost(4096); return err }},
		{"Launch", func(x cx) error {
			return x.f.Launch(x.s, cuda.D1(1), cuda.D1(64), 0, float32(2), x.b, x.b, int32(64))
		}},
		{"LaunchBatch.Submit", func(x cx) error { return x.batch.Submit(x.s) }},
		{"CopyFromDeviceAsync", func(x cx) error { return cuda.CopyFromDeviceAsync(x.s, e.host, x.b) }},
		{"Memset8", func(x cx) error { return x.b.Memset8(1) }},
		{"Event.Record", func(x cx) error { return x.ev.Record(x.s) }},
		{"Event.Synchronize", func(x cx) error {
			if err := x.ev.Record(x.s); err != nil {
				return err
			}
			return x.ev.Synchronize()
		}},
		{"Stream.Synchronize", func(x cx) error { return x.s.Synchronize() }},
		{"Context.Synchronize", func(x cx) error { return x.ctx.Synchronize() }},
		{"LoadModule", func(x cx) error { _, err := x.ctx.LoadModule(kernelsPTX); return err }},
		{"Module.Function", func(x cx) error { _, err := x.m.Function("fill_u32"); return err }},
		{"Wrap", func(x cx) error {
			w, err := cuda.Wrap(x.ctx, make([]float32, 1024))
			if err == nil {
				return w.Close()
			}
			return err
		}},
		{"Buffer.Close", func(x cx) error { return x.b.Close() }},
		{"Stream.Close", func(x cx) error { return x.s.Close() }},
		{"Event.Close", func(x cx) error { return x.ev.Close() }},
		{"Module.Close", func(x cx) error { return x.m.Close() }},
		{"MemoryStatus", func(cx) error { _, err := cuda.MemoryStatus(); return err }},
	} {
		runRaces(t, n, raceKind[cx]{name: k.name, setup: setup, op: k.op,
			close: func(x cx) error { return x.ctx.Close() }})
	}
	runtime.GC() // the races' objects are garbage now: their releases are dropped
}
