package cuda_test

// GPU tests of modules and launches, on the kernels of testdata/kernels.cu (compiled
// to testdata/kernels.ptx). They skip where there is no GPU.

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/tools/bench/callbench"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

//go:embed testdata/kernels.ptx
var kernelsPTX []byte

// loadKernels loads testdata/kernels.ptx into device 0's primary context and makes a
// stream; both are closed when the test ends. needs go to cudatest.Require.
func loadKernels(t testing.TB, needs ...cudatest.Need) (*cudatest.GPU, *cuda.Module, *cuda.Stream) {
	t.Helper()
	g := cudatest.Require(t, needs...)
	ctx, err := cuda.Device(0).Context()
	require.NoError(t, err)
	m, err := ctx.LoadModule(kernelsPTX)
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	s, err := ctx.NewStream()
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return g, m, s
}

func function(t testing.TB, m *cuda.Module, name string) *cuda.Function {
	t.Helper()
	f, err := m.Function(name)
	require.NoError(t, err)
	return f
}

func TestModuleLoad(t *testing.T) {
	_, m, _ := loadKernels(t)
	ctx, err := cuda.Device(0).Context()
	require.NoError(t, err)
	assert.Same(t, ctx, m.Context())
	assert.NotZero(t, m.Handle())

	f := function(t, m, "mixed")
	again := function(t, m, "mixed")
	assert.Same(t, f, again, "functions are cached")
	assert.Equal(t, "mixed", f.Name())
	assert.Same(t, m, f.Module())
	params, ok := f.Params()
	require.True(t, ok, "the driver reports parameter info (CUDA 12.4 and later)")
	assert.Equal(t, []cuda.Param{{0, 1}, {2, 2}, {4, 4}, {8, 8}, {16, 4}, {24, 8}, {32, 16}, {48, 8}}, params)
	params, ok = function(t, m, "empty").Params()
	require.True(t, ok)
	assert.Empty(t, params)

	n, err := f.Attribute(cudaraw.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
	require.NoError(t, err)
	assert.Positive(t, n)

	_, err = m.Function("no_such_kernel")
	require.ErrorIs(t, err, cudaraw.ErrNotFound)
	assert.Contains(t, err.Error(), "no_such_kernel")

	_, size, err := m.Global("magic")
	require.NoError(t, err)
	assert.Equal(t, 4, size)
	_, _, err = m.Global("no_such_global")
	require.ErrorIs(t, err, cudaraw.ErrNotFound)

	// A NUL-terminated image is taken as it is.
	m2, err := ctx.LoadModule(append(append([]byte(nil), kernelsPTX...), 0))
	require.NoError(t, err)
	assert.Same(t, ctx, m2.Context())
	require.NoError(t, m2.Close())
}

// A global's initial value is the module's (set by the JIT compiler).
func TestModuleGlobalValue(t *testing.T) {
	_, m, _ := loadKernels(t, cudatest.Kernels)
	p, _, err := m.Global("magic")
	require.NoError(t, err)
	assert.Equal(t, []uint32{0xC0FFEE}, cudatest.FromDevice[uint32](t, p, 1))
}

func TestModuleBadPTX(t *testing.T) {
	cudatest.Require(t, cudatest.Kernels) // the JIT compiler's log
	ctx, err := cuda.Device(0).Context()
	require.NoError(t, err)
	bad := []byte(".version 8.0\n.target sm_80\n.address_size 64\n\n.visible .entry broken()\n{\n\tbogus.instruction %r1;\n\tret;\n}\n")
	_, err = ctx.LoadModule(bad)
	require.Error(t, err)
	require.ErrorIs(t, err, cudaraw.ErrInvalidPtx)
	assert.Contains(t, err.Error(), "JIT log")
	assert.Contains(t, err.Error(), "line 7", "the log points at the bad line")
	t.Logf("bad PTX: %v", err)
}

func TestModuleClose(t *testing.T) {
	_, m, s := loadKernels(t)
	f := function(t, m, "empty")
	require.NoError(t, f.Launch(s, cuda.D1(1), cuda.D1(1), 0))
	require.NotZero(t, m.Handle())
	require.NotZero(t, f.Handle())
	require.NoError(t, m.Close())
	assert.Zero(t, m.Handle(), "no live handle after Close")
	assert.Zero(t, f.Handle(), "no live handle after its module's Close")
	require.ErrorIs(t, m.Close(), cuda.ErrClosed, "second Close")
	require.ErrorIs(t, f.Launch(s, cuda.D1(1), cuda.D1(1), 0), cuda.ErrClosed, "launch after Close")
	_, err := m.Function("empty")
	require.ErrorIs(t, err, cuda.ErrClosed)
	_, _, err = m.Global("magic")
	require.ErrorIs(t, err, cuda.ErrClosed)
	_, err = f.Attribute(cudaraw.CU_FUNC_ATTRIBUTE_NUM_REGS)
	require.ErrorIs(t, err, cuda.ErrClosed)
	require.NoError(t, s.Synchronize())
}

func TestLaunchFill(t *testing.T) {
	g, m, s := loadKernels(t, cudatest.Kernels)
	const n = 100_000
	p := cudatest.Alloc[uint32](t, g, n)
	f := function(t, m, "fill_u32")
	require.NoError(t, f.Launch(s, cuda.D1(cuda.Blocks(n, 256)), cuda.D1(256), 0, p, uint32(0xA5A5A5A5), uint64(n)))
	// A small grid covers the rest with its grid-stride loop.
	require.NoError(t, f.Launch(s, cuda.D1(3), cuda.Dim3{X: 64}, 0, p, uint32(7), uint64(n/2)))
	require.NoError(t, s.Synchronize())
	got := cudatest.FromDevice[uint32](t, p, n)
	for i, v := range got {
		want := uint32(0xA5A5A5A5)
		if i < n/2 {
			want = 7
		}
		if v != want {
			t.Fatalf("p[%d] = %#x, want %#x", i, v, want)
		}
	}
}

func TestLaunchAxpy(t *testing.T) {
	g, m, s := loadKernels(t, cudatest.Kernels)
	const n = 1000
	r := cudatest.Rand(1)
	x, y := cudatest.RandFloat32s(r, n), cudatest.RandFloat32s(r, n)
	dx, dy := cudatest.ToDevice(t, g, x), cudatest.ToDevice(t, g, y)
	f := function(t, m, "axpy_f32")
	a := float32(2.5)
	require.NoError(t, f.Launch(s, cuda.D1(cuda.Blocks(n, 128)), cuda.D1(128), 0, a, dx, dy, int32(n)))
	require.NoError(t, s.Synchronize())
	got := cudatest.Float32sFromDevice(t, dy, n)
	for i := range got {
		require.InDelta(t, a*x[i]+y[i], got[i], 1e-5, "y[%d]", i)
	}
}

// Every kind of argument arrives intact: sign-extended small integers, both float
// widths and a struct with inner padding, at the offsets the driver reports.
func TestLaunchMixed(t *testing.T) {
	g, m, s := loadKernels(t, cudatest.Kernels)
	type gArg struct {
		X int32
		Y float32
		Z float64
	}
	out := cudatest.Alloc[uint64](t, g, 9)
	f := function(t, m, "mixed")
	require.NoError(t, f.Launch(s, cuda.D1(1), cuda.D1(32), 0,
		int8(-3), int16(-300), int32(-70000), int64(-1<<40), float32(1.5), -2.25, gArg{7, 0.5, 3.125}, out))
	require.NoError(t, s.Synchronize())
	got := cudatest.FromDevice[uint64](t, out, 9)
	neg := func(v int64) uint64 { return uint64(v) }
	assert.Equal(t, []uint64{neg(-3), neg(-300), neg(-70000), neg(-1 << 40),
		uint64(math.Float32bits(1.5)), math.Float64bits(-2.25), 7, uint64(math.Float32bits(0.5)), math.Float64bits(3.125)}, got)
}

func TestLaunchReadSum(t *testing.T) {
	g, m, s := loadKernels(t, cudatest.Kernels)
	const n = 4096
	vals := make([]uint32, n)
	var want uint64
	for i := range vals {
		vals[i] = uint32(i * 7)
		want += uint64(vals[i])
	}
	p := cudatest.ToDevice(t, g, vals)
	out := cudatest.ToDevice(t, g, []uint64{0})
	f := function(t, m, "read_sum")
	require.NoError(t, f.Launch(s, cuda.D1(4), cuda.D1(256), 0, p, uint64(n), uint64(time.Millisecond), out))
	require.NoError(t, s.Synchronize())
	assert.Equal(t, []uint64{want}, cudatest.FromDevice[uint64](t, out, 1))
}

// spin holds the GPU for the time asked, measured on the GPU's clock.
func TestLaunchSpin(t *testing.T) {
	_, m, s := loadKernels(t, cudatest.Kernels)
	ctx := m.Context()
	start, err := ctx.NewEvent(true)
	require.NoError(t, err)
	defer start.Close()
	end, err := ctx.NewEvent(true)
	require.NoError(t, err)
	defer end.Close()
	f := function(t, m, "spin")
	host0 := time.Now()
	require.NoError(t, start.Record(s))
	require.NoError(t, f.Launch(s, cuda.D1(1), cuda.D1(1), 0, uint64(20*time.Millisecond)))
	require.NoError(t, end.Record(s))
	done, err := s.Query()
	require.NoError(t, err)
	assert.False(t, done, "a 20 ms kernel is still running")
	require.NoError(t, end.Synchronize())
	host := time.Since(host0)
	el, err := cuda.Elapsed(start, end)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, el, 19*time.Millisecond)
	assert.LessOrEqual(t, el, host, "the events' interval lies inside the host's, from before the first record to after the wait")
}

// Wrong arguments are errors naming the argument and both sizes; nothing is queued
// and the stream stays usable.
func TestLaunchArgumentErrors(t *testing.T) {
	g, m, s := loadKernels(t)
	f := function(t, m, "axpy_f32")
	p := cudatest.Alloc[float32](t, g, 1)

	err := f.Launch(s, cuda.D1(1), cuda.D1(1), 0, float32(1), p, p)
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "axpy_f32 takes 4 parameters, got 3 arguments")

	err = f.Launch(s, cuda.D1(1), cuda.D1(1), 0, float32(1), p, p, 1) // int: 8 bytes
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "argument 3: int is 8 bytes, the parameter is 4 bytes")

	err = f.Launch(s, cuda.D1(1), cuda.D1(1), 0, 1.0, p, p, int32(1)) // float64
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "argument 0: float64 is 8 bytes, the parameter is 4 bytes")

	err = f.Launch(s, cuda.D1(1), cuda.D1(1), 0, float32(1), []float32{1}, p, int32(1))
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "argument 1")

	require.ErrorIs(t, f.Launch(nil, cuda.D1(1), cuda.D1(1), 0, float32(1), p, p, int32(1)), cuda.ErrInvalidArgument)
	require.ErrorIs(t, f.Launch(s, cuda.Dim3{}, cuda.D1(1), 0, float32(1), p, p, int32(1)), cuda.ErrInvalidArgument)

	// A block too large for the device is the driver's error.
	err = f.Launch(s, cuda.D1(1), cuda.D1(4096), 0, float32(1), p, p, int32(1))
	require.Error(t, err)
	assert.ErrorIs(t, err, cudaraw.ErrInvalidValue)
	assert.Contains(t, err.Error(), "launching axpy_f32")

	require.NoError(t, function(t, m, "empty").Launch(s, cuda.D1(1), cuda.D1(1), 0))
	require.NoError(t, s.Synchronize())
}

// A *DeviceBuffer argument passes its device address, and a freed one is an error.
func TestLaunchDeviceBuffer(t *testing.T) {
	_, m, s := loadKernels(t)
	const n = 1000
	buf, err := m.Context().Alloc(s, 4*n)
	require.NoError(t, err)
	fill := function(t, m, "fill_u32")
	require.NoError(t, fill.Launch(s, cuda.D1(4), cuda.D1(256), 0, buf, uint32(9), uint64(n)))
	allocs := testing.AllocsPerRun(100, func() {
		if err := fill.Launch(s, cuda.D1(4), cuda.D1(256), 0, buf, uint32(9), uint64(n)); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
	require.NoError(t, s.Synchronize())
	if cudatest.FakeLoaded() {
		// No kernel runs: the launch recorded the buffer's address as argument 0.
		last := cudatest.Launches(cudatest.LaunchCount() - 1)
		require.Len(t, last, 1)
		assert.Equal(t, "fill_u32", last[0].Func)
		assert.Equal(t, uint64(buf.Ptr()), binary.NativeEndian.Uint64(last[0].Params))
		assert.Equal(t, uint32(9), binary.NativeEndian.Uint32(last[0].Params[8:]))
	} else {
		for i, v := range cudatest.FromDevice[uint32](t, buf.Ptr(), n) {
			require.Equal(t, uint32(9), v, "p[%d]", i)
		}
	}
	require.NoError(t, buf.Close())
	err = fill.Launch(s, cuda.D1(4), cuda.D1(256), 0, buf, uint32(9), uint64(n))
	require.ErrorIs(t, err, cuda.ErrClosed)
	assert.Contains(t, err.Error(), "argument 0")
}

func TestLaunchClosedStream(t *testing.T) {
	_, m, _ := loadKernels(t)
	ctx := m.Context()
	s, err := ctx.NewStream()
	require.NoError(t, err)
	require.NoError(t, s.Close())
	err = function(t, m, "empty").Launch(s, cuda.D1(1), cuda.D1(1), 0)
	require.ErrorIs(t, err, cuda.ErrClosed)
}

func TestLaunchWrongContext(t *testing.T) {
	_, m, _ := loadKernels(t)
	other, err := cuda.NewContext(cuda.Device(0), 0)
	require.NoError(t, err)
	defer other.Close()
	s, err := other.NewStream()
	require.NoError(t, err)
	defer s.Close()
	err = function(t, m, "empty").Launch(s, cuda.D1(1), cuda.D1(1), 0)
	require.ErrorIs(t, err, cuda.ErrWrongContext)

	// A module of the other context launches there.
	m2, err := other.LoadModule(kernelsPTX)
	require.NoError(t, err)
	defer m2.Close()
	require.NoError(t, function(t, m2, "empty").Launch(s, cuda.D1(1), cuda.D1(1), 0))
	require.NoError(t, s.Synchronize())
}

// Launching allocates nothing, scalar arguments included.
func TestLaunchAllocations(t *testing.T) {
	g, m, s := loadKernels(t)
	f := function(t, m, "axpy_f32")
	p := cudatest.Alloc[float32](t, g, 1)
	a, n := float32(1), int32(0)
	empty := function(t, m, "empty")
	allocs := testing.AllocsPerRun(200, func() {
		if err := f.Launch(s, cuda.D1(1), cuda.D1(1), 0, a, p, p, n); err != nil {
			t.Fatal(err)
		}
		if err := empty.Launch(s, cuda.D1(1), cuda.D1(1), 0); err != nil {
			t.Fatal(err)
		}
		a++
	})
	assert.Zero(t, allocs)
	require.NoError(t, s.Synchronize())
}

// Launches from many goroutines onto one stream and onto their own streams, with no
// thread locked and no context made current by the caller.
func TestLaunchConcurrent(t *testing.T) {
	g, m, s := loadKernels(t, cudatest.Kernels)
	const workers, each = 8, 200
	counts := cudatest.Alloc[uint32](t, g, workers)
	fill := function(t, m, "fill_u32")
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own, err := m.Context().NewStream()
			if err != nil {
				errs <- err
				return
			}
			defer own.Close()
			slot := counts + cudaraw.CUdeviceptr(4*w)
			for i := range each {
				st := own
				if i%2 == 0 {
					st = s
				}
				if err := fill.Launch(st, cuda.D1(1), cuda.D1(1), 0, slot, uint32(w+1), uint64(1)); err != nil {
					errs <- err
					return
				}
			}
			errs <- own.Synchronize()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, s.Synchronize())
	got := cudatest.FromDevice[uint32](t, counts, workers)
	for w, v := range got {
		assert.Equal(t, uint32(w+1), v)
	}
}

// loop runs k iterations of a workload and returns the time they took.
type loop func(k int) time.Duration

// goLoopOf returns a loop calling f.
func goLoopOf(b *testing.B, f func() error) loop {
	return func(k int) time.Duration {
		t0 := time.Now()
		for range k {
			if err := f(); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(t0)
	}
}

// lockContext locks the benchmark's goroutine to its thread and makes ctx current
// there, for C loops and raw bindings.
func lockContext(b testing.TB, ctx cudaraw.CUcontext) {
	runtime.LockOSThread()
	b.Cleanup(runtime.UnlockOSThread)
	require.NoError(b, cudaraw.CtxSetCurrent(ctx))
}

// pairLoops alternates chunks of 1,000 iterations of x and of y (the C loop), b.N
// each, calling settle after each chunk (callbench.Alternate), and reports both
// means and their difference: x-ns/op, c-ns/op and x-c-ns.
func pairLoops(b *testing.B, settle func(), x, y loop) {
	side := func(name string, l loop) callbench.Side {
		return callbench.Side{Name: name, Run: func(k int) (time.Duration, error) { return l(k), nil }}
	}
	callbench.Alternate(b, 1000, func() error { settle(); return nil }, side("c", y), side("x", x))
}

// BenchmarkLaunch times launch submission (cuLaunchKernel returning, not the kernel)
// through Function.Launch beside the same launch made from C in the same process,
// as ../shared/anchors/floors.cu does (C floor on an H200: 3.19 µs for the empty
// kernel; the goal is at most 0.15 µs over C).
//
// The go and c sub-benchmarks run alone, synchronizing every 20,000 launches off the
// clock (floors.cu launches 20,000 and synchronizes once). Their absolute times vary
// between runs by tenths of a µs with the GPU's pace, more than the difference looked
// for, so the pair sub-benchmarks alternate chunks of 1,000 launches of two loops,
// each chunk starting on an empty queue, and report both means and their
// difference:
//
//	pair      Function.Launch          vs C
//	pair-raw  generated LaunchKernel   vs C (cgo's share)
//	pair-ctx  C with the in-context check (cuCtxGetCurrent) per launch vs C
func BenchmarkLaunch(b *testing.B) {
	g, m, s := loadKernels(b)
	empty := function(b, m, "empty")
	axpy := function(b, m, "axpy_f32")
	p := cudatest.Alloc[float32](b, g, 1)
	fn, err := cudaraw.Library().NewProc("cuLaunchKernel").Addr()
	require.NoError(b, err)
	get, set, err := cudaraw.CtxSwitchProcs()
	require.NoError(b, err)

	// axpy_f32(float a, const float* x, float* y, int n) with n = 0: four arguments;
	// axpyParams is the same as C lays it out.
	a, n := float32(2), int32(0)
	axpyParams, axpyOffsets := make([]byte, 32), []uintptr{0, 8, 16, 24}
	*(*float32)(unsafe.Pointer(&axpyParams[0])) = a
	*(*cudaraw.CUdeviceptr)(unsafe.Pointer(&axpyParams[8])) = p
	*(*cudaraw.CUdeviceptr)(unsafe.Pointer(&axpyParams[16])) = p
	*(*int32)(unsafe.Pointer(&axpyParams[24])) = n

	cLoop := func(b *testing.B, f *cuda.Function, inCtx bool, params []byte, offsets []uintptr) loop {
		return func(k int) time.Duration {
			var d time.Duration
			var err error
			if inCtx {
				d, err = callbench.LoopLaunchInContext(fn, get, set, uintptr(g.Context), uintptr(f.Handle()),
					uintptr(s.Handle()), params, offsets, k)
			} else {
				d, err = callbench.LoopLaunch(fn, uintptr(f.Handle()), uintptr(s.Handle()), params, offsets, k)
			}
			require.NoError(b, err)
			return d
		}
	}
	setup := func(b *testing.B) { lockContext(b, g.Context) }
	settle := func(b *testing.B) {
		b.StopTimer()
		require.NoError(b, s.Synchronize())
		b.StartTimer()
	}
	// alone runs l for b.N launches, synchronizing every 20,000 off the clock.
	alone := func(b *testing.B, l loop) {
		setup(b)
		b.ReportAllocs()
		b.ResetTimer()
		var total time.Duration
		for done := 0; done < b.N; done += 20_000 {
			total += l(min(20_000, b.N-done))
			settle(b)
		}
		b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/launch")
	}
	pair := func(b *testing.B, x, y loop) {
		setup(b)
		pairLoops(b, func() { settle(b) }, x, y)
	}

	launchEmpty := func() error { return empty.Launch(s, cuda.D1(1), cuda.D1(1), 0) }
	launchAxpy := func() error { return axpy.Launch(s, cuda.D1(1), cuda.D1(1), 0, a, p, p, n) }
	// The same launch with the memory as *DeviceBuffer arguments, which Launch holds
	// until the kernel is queued (so that a concurrent Close cannot free them first).
	xb, err := s.Context().Alloc(s, 4)
	require.NoError(b, err)
	b.Cleanup(func() { xb.Close() })
	yb, err := s.Context().Alloc(s, 4)
	require.NoError(b, err)
	b.Cleanup(func() { yb.Close() })
	launchAxpyBuf := func() error { return axpy.Launch(s, cuda.D1(1), cuda.D1(1), 0, a, xb, yb, n) }
	launchAxpySame := func() error { return axpy.Launch(s, cuda.D1(1), cuda.D1(1), 0, a, xb, xb, n) }
	h, sh := empty.Handle(), s.Handle()
	launchRaw := func() error { return cudaraw.LaunchKernel(h, 1, 1, 1, 1, 1, 1, 0, sh, nil, nil) }

	b.Run("empty/go", func(b *testing.B) { alone(b, goLoopOf(b, launchEmpty)) })
	b.Run("empty/c", func(b *testing.B) { alone(b, cLoop(b, empty, false, nil, nil)) })
	b.Run("empty/pair", func(b *testing.B) { pair(b, goLoopOf(b, launchEmpty), cLoop(b, empty, false, nil, nil)) })
	b.Run("empty/pair-raw", func(b *testing.B) { pair(b, goLoopOf(b, launchRaw), cLoop(b, empty, false, nil, nil)) })
	b.Run("empty/pair-ctx", func(b *testing.B) {
		pair(b, cLoop(b, empty, true, nil, nil), cLoop(b, empty, false, nil, nil))
	})
	b.Run("axpy/go", func(b *testing.B) { alone(b, goLoopOf(b, launchAxpy)) })
	b.Run("axpy/c", func(b *testing.B) { alone(b, cLoop(b, axpy, false, axpyParams, axpyOffsets)) })
	b.Run("axpy/pair", func(b *testing.B) {
		pair(b, goLoopOf(b, launchAxpy), cLoop(b, axpy, false, axpyParams, axpyOffsets))
	})
	b.Run("axpy/go-buffers", func(b *testing.B) { alone(b, goLoopOf(b, launchAxpyBuf)) })
	// Both loops are Go here: x-c-ns is the cost of passing x and y as two buffers,
	// which Launch holds until the kernel is queued, rather than as CUdeviceptr;
	// pair-same passes one buffer as both.
	b.Run("axpy/pair-buffers", func(b *testing.B) { pair(b, goLoopOf(b, launchAxpyBuf), goLoopOf(b, launchAxpy)) })
	b.Run("axpy/pair-same", func(b *testing.B) { pair(b, goLoopOf(b, launchAxpySame), goLoopOf(b, launchAxpy)) })

	// Probes of where the time over C goes: C with a pause of d after each launch
	// (other code between launches), and k launches per cgo call from Go.
	for _, d := range []time.Duration{50, 100, 200} {
		iters := callbench.SpinIters(d)
		gap := func(k int) time.Duration {
			t, err := callbench.LoopLaunchGap(fn, uintptr(h), uintptr(sh), iters, k)
			require.NoError(b, err)
			return t
		}
		b.Run(fmt.Sprintf("empty/pair-gap%d", d.Nanoseconds()), func(b *testing.B) {
			pair(b, gap, cLoop(b, empty, false, nil, nil))
		})
	}
	// LaunchBatch: batches of 8 launches (a remainder launched one by one).
	var batch cuda.LaunchBatch
	for range 8 {
		require.NoError(b, batch.Add(empty, cuda.D1(1), cuda.D1(1), 0))
	}
	batched := func(k int) time.Duration {
		t0 := time.Now()
		for range k / 8 {
			if err := batch.Submit(s); err != nil {
				b.Fatal(err)
			}
		}
		for range k % 8 {
			if err := launchEmpty(); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(t0)
	}
	b.Run("empty/batch8", func(b *testing.B) { alone(b, batched) })
	b.Run("empty/pair-batch8", func(b *testing.B) { pair(b, batched, cLoop(b, empty, false, nil, nil)) })
	for _, per := range []int{1, 4} {
		b.Run(fmt.Sprintf("empty/pair-k%d", per), func(b *testing.B) {
			batched := func(k int) time.Duration {
				t0 := time.Now()
				for done := 0; done < k; done += per {
					if err := callbench.LaunchK(fn, uintptr(h), uintptr(sh), min(per, k-done)); err != nil {
						b.Fatal(err)
					}
				}
				return time.Since(t0)
			}
			pair(b, batched, cLoop(b, empty, false, nil, nil))
		})
	}
}

// cpuTime returns the CPU time the process has used.
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Long waits sleep instead of burning a core, for streams and events alike, even in a
// context whose scheduling flag says spin.
func TestSynchronizeSleeps(t *testing.T) {
	cudatest.Require(t, cudatest.Kernels)
	spinCtx, err := cuda.NewContext(cuda.Device(0), cudaraw.CU_CTX_SCHED_SPIN)
	require.NoError(t, err)
	defer spinCtx.Close()
	primary, err := cuda.Device(0).Context()
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		ctx  *cuda.Context
	}{{"primary", primary}, {"spin", spinCtx}} {
		m, err := c.ctx.LoadModule(kernelsPTX)
		require.NoError(t, err)
		s, err := c.ctx.NewStream()
		require.NoError(t, err)
		e, err := c.ctx.NewEvent(false)
		require.NoError(t, err)
		spin := function(t, m, "spin")
		const d = 300 * time.Millisecond
		for _, w := range []struct {
			what string
			sync func() error
		}{{"stream", s.Synchronize}, {"event", e.Synchronize}} {
			require.NoError(t, spin.Launch(s, cuda.D1(1), cuda.D1(1), 0, uint64(d)))
			require.NoError(t, e.Record(s))
			wall0, cpu0 := time.Now(), cpuTime(t)
			require.NoError(t, w.sync())
			wall, cpu := time.Since(wall0), cpuTime(t)-cpu0
			t.Logf("%s context, %s: waited %v using %v of CPU", c.name, w.what, wall, cpu)
			assert.GreaterOrEqual(t, wall, d-10*time.Millisecond, "the wait outlasts the kernel")
			assert.Less(t, cpu, d/4, "%s context, %s: a long wait must not spin", c.name, w.what)
		}
		require.NoError(t, e.Close())
		require.NoError(t, s.Close())
		require.NoError(t, m.Close())
	}
}
