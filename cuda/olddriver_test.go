package cuda_test

// The core on an older driver: the fake posing as CUDA 11.8 (cudatest.Driver118)
// exports only the symbols of the 11.8 headers and reports version 11080.

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/dl"
)

// driver118 runs the test in a child process on the strict fake posing as the CUDA
// 11.8 driver; it reports whether the caller is that child.
func driver118(t *testing.T) bool {
	t.Helper()
	if cudatest.Active() {
		cudatest.Subprocess(t, map[string]string{cudatest.EnvDriver: "11.8"})
		return false
	}
	if os.Getenv(cudatest.EnvChild) == "" || !cudatest.Strict() {
		t.Skip("runs on the strict fake driver posing as CUDA 11.8 (CI, where cudatest.Main installs the fake)")
	}
	var v int32
	require.NoError(t, cudaraw.DriverGetVersion(&v))
	require.Equal(t, int32(11080), v, "the child runs on the CUDA 11.8 pose")
	cudatest.Check(t)
	return true
}

// requireSymbolError checks that err is the typed error of symbol missing from the
// driver.
func requireSymbolError(t *testing.T, err error, symbol string) {
	t.Helper()
	require.ErrorIs(t, err, dl.ErrSymbolNotFound)
	var se *dl.SymbolError
	require.True(t, errors.As(err, &se), "%v", err)
	assert.Equal(t, symbol, se.Symbol)
	assert.Equal(t, "cuda", se.Library)
	assert.Equal(t, "libcuda.so.1", se.Soname)
	assert.Contains(t, se.Error(), "older than the headers")
}

// TestDriver118 runs the idiomatic layer's core on a CUDA 11.8 driver: contexts,
// streams, events, device memory from the stream-ordered pool, copies and memsets,
// pinned and unified memory, modules and launches; and the raw layer's newer
// functions fail with the typed symbol error. One child process: one build of the
// fake.
func TestDriver118(t *testing.T) {
	if !driver118(t) {
		return
	}
	ctx, err := cuda.Device(0).Context()
	require.NoError(t, err)
	s, err := ctx.NewStream()
	require.NoError(t, err)
	defer s.Close()

	t.Run("NewContext", func(t *testing.T) {
		// cuCtxCreate_v4 is missing: NewContext creates it with cuCtxCreate_v2.
		var c cudaraw.CUcontext
		requireSymbolError(t, cudaraw.CtxCreate(&c, nil, 0, 0), "cuCtxCreate_v4")
		before := cudatest.Counters().Contexts
		own, err := cuda.NewContext(cuda.Device(0), 0)
		require.NoError(t, err)
		assert.Equal(t, before+1, cudatest.Counters().Contexts)
		ost, err := own.NewStream()
		require.NoError(t, err)
		b, err := cuda.AllocFor[uint32](ost, 64)
		require.NoError(t, err)
		require.NoError(t, b.Memset32Async(ost, 5))
		got := make([]uint32, 64)
		require.NoError(t, cuda.CopyFromDeviceAsync(ost, got, b))
		require.NoError(t, ost.Synchronize())
		for i, v := range got {
			require.Equal(t, uint32(5), v, "element %d", i)
		}
		require.NoError(t, b.Close())
		require.NoError(t, own.Close())
		assert.Equal(t, before, cudatest.Counters().Contexts)
	})

	t.Run("StreamsAndEvents", func(t *testing.T) {
		least, greatest, err := ctx.StreamPriorityRange()
		require.NoError(t, err)
		hi, err := ctx.NewStream(cuda.WithPriority(cuda.High))
		require.NoError(t, err)
		defer hi.Close()
		t.Logf("stream priorities [%d, %d]", least, greatest)

		start, err := ctx.NewEvent(true)
		require.NoError(t, err)
		defer start.Close()
		end, err := ctx.NewEvent(true)
		require.NoError(t, err)
		defer end.Close()
		require.NoError(t, start.Record(s))
		require.NoError(t, cudatest.Delay(uintptr(s.Handle()), 2*time.Millisecond))
		require.NoError(t, end.Record(s))
		require.NoError(t, hi.WaitEvent(end))
		require.NoError(t, hi.Synchronize())
		done, err := end.Query()
		require.NoError(t, err)
		assert.True(t, done, "hi waited for end")
		// cuEventElapsedTime_v2 is missing: Elapsed calls cuEventElapsedTime.
		var ms float32
		requireSymbolError(t, cudaraw.EventElapsedTime(&ms, start.Handle(), end.Handle()), "cuEventElapsedTime_v2")
		d, err := cuda.Elapsed(start, end)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, d, 2*time.Millisecond, "the delay between the records")

		// Streams from the context's pool.
		err = ctx.WithStream(context.Background(), func(cctx context.Context, ps *cuda.Stream) error {
			assert.Same(t, ps, cuda.StreamFromContext(cctx))
			return ps.Synchronize()
		})
		require.NoError(t, err)
	})

	t.Run("Memory", func(t *testing.T) {
		const n = 1 << 16
		src := make([]float32, n)
		for i := range src {
			src[i] = float32(i) * 0.5
		}
		a, err := cuda.AllocFor[float32](s, n)
		require.NoError(t, err)
		defer a.Close()
		b, err := cuda.AllocFor[float32](s, n)
		require.NoError(t, err)
		defer b.Close()
		require.NoError(t, cuda.CopyToDeviceAsync(s, a, src))
		require.NoError(t, cuda.CopyAsync(s, b, a))
		tail, err := b.Slice(n/2, n/2)
		require.NoError(t, err)
		require.NoError(t, tail.Memset32Async(s, math.Float32bits(-1)))
		got := make([]float32, n)
		require.NoError(t, cuda.CopyFromDeviceAsync(s, got, b))
		require.NoError(t, s.Synchronize())
		assert.Equal(t, src[:n/2], got[:n/2])
		for i, v := range got[n/2:] {
			require.Equal(t, float32(-1), v, "element %d", n/2+i)
		}

		// The device's stream-ordered pool serves device memory; 11.8 has no host or
		// managed pools, so pinned and unified memory come from cuMemAllocHost and
		// cuMemAllocManaged.
		h, err := ctx.AllocHost(4096)
		require.NoError(t, err)
		defer h.Close()
		u, err := ctx.AllocManaged(4096)
		require.NoError(t, err)
		defer u.Close()
		w, err := cuda.Wrap(ctx, make([]uint64, 512))
		require.NoError(t, err)
		defer w.Close()
		head, err := a.Slice(0, 1024)
		require.NoError(t, err)
		require.NoError(t, cuda.CopyAsync(s, h, head)) // device → pinned
		require.NoError(t, cuda.CopyAsync(s, u, h))    // pinned → unified
		require.NoError(t, cuda.CopyAsync(s, w, u))    // unified → registered Go memory
		require.NoError(t, s.Synchronize())
		assert.Equal(t, src[:1024], cuda.HostSlice[float32](u))
		assert.Equal(t, unsafe.Slice((*byte)(unsafe.Pointer(&src[0])), 4096), h.Bytes())

		st, err := cuda.MemoryStatus()
		require.NoError(t, err)
		var cs *cuda.ContextMemoryStats
		for i := range st.Contexts {
			if st.Contexts[i].Primary && st.Contexts[i].Device == 0 {
				cs = &st.Contexts[i]
			}
		}
		require.NotNil(t, cs)
		dev := cs.Kinds[cuda.KindDevice]
		assert.True(t, dev.Pool, "device memory comes from the pool: %v", dev.PoolError)
		assert.GreaterOrEqual(t, dev.Used, uint64(2*4*n))
		for _, k := range []cuda.MemoryKind{cuda.KindPinned, cuda.KindUnified} {
			assert.False(t, cs.Kinds[k].Pool, "%v", k)
			assert.ErrorIs(t, cs.Kinds[k].PoolError, cudaraw.ErrInvalidValue, "%v: CUDA 11.8 has no such pool", k)
		}
	})

	t.Run("ModuleAndLaunch", func(t *testing.T) {
		m, err := ctx.LoadModule(kernelsPTX)
		require.NoError(t, err)
		defer m.Close()
		mixed, err := m.Function("mixed")
		require.NoError(t, err)
		// cuFuncGetParamInfo is missing: the layout is unknown, and arguments are
		// packed by their Go types at their natural alignment.
		var off, size uint64
		requireSymbolError(t, cudaraw.FuncGetParamInfo(mixed.Handle(), 0, &off, &size), "cuFuncGetParamInfo")
		params, ok := mixed.Params()
		assert.False(t, ok)
		assert.Nil(t, params)

		out, err := cuda.AllocFor[uint64](s, 8)
		require.NoError(t, err)
		defer out.Close()
		type g struct {
			X int32
			Y float32
			Z float64
		}
		seq := cudatest.LaunchCount()
		require.NoError(t, mixed.Launch(s, cuda.D1(1), cuda.D1(32), 0,
			int8(-3), int16(-300), int32(-70000), int64(-1<<40), float32(1.5), float64(-2.25), g{7, 0.5, 3.125}, out))
		launches := cudatest.Launches(seq)
		require.Len(t, launches, 1)
		l := launches[0]
		assert.Equal(t, "mixed", l.Func)
		// The kernel's C layout (testdata/kernels.cu): the fake checked the buffer's
		// size against the PTX parameters, and the values sit at their offsets.
		ne := binary.NativeEndian
		require.Equal(t, 56, l.ParamSize)
		assert.Equal(t, int8(-3), int8(l.Params[0]))
		assert.Equal(t, int16(-300), int16(ne.Uint16(l.Params[2:])))
		assert.Equal(t, int32(-70000), int32(ne.Uint32(l.Params[4:])))
		assert.Equal(t, int64(-1<<40), int64(ne.Uint64(l.Params[8:])))
		assert.Equal(t, float32(1.5), math.Float32frombits(ne.Uint32(l.Params[16:])))
		assert.Equal(t, -2.25, math.Float64frombits(ne.Uint64(l.Params[24:])))
		assert.Equal(t, int32(7), int32(ne.Uint32(l.Params[32:])))
		assert.Equal(t, 3.125, math.Float64frombits(ne.Uint64(l.Params[40:])))
		assert.Equal(t, uint64(out.Ptr()), ne.Uint64(l.Params[48:]))

		// A hand-off to another stream, and a batch.
		fill, err := m.Function("fill_u32")
		require.NoError(t, err)
		buf, err := cuda.AllocFor[uint32](s, 1024)
		require.NoError(t, err)
		defer buf.Close()
		s2, err := ctx.NewStream()
		require.NoError(t, err)
		defer s2.Close()
		require.NoError(t, fill.Launch(s2, cuda.D1(4), cuda.D1(256), 0, buf, uint32(3), uint64(buf.Len())))
		var batch cuda.LaunchBatch
		require.NoError(t, batch.Add(fill, cuda.D1(4), cuda.D1(256), 0, buf, uint32(4), uint64(buf.Len())))
		require.NoError(t, batch.Add(mixed, cuda.D1(1), cuda.D1(1), 0,
			int8(0), int16(0), int32(0), int64(0), float32(0), float64(0), g{}, out))
		require.NoError(t, batch.Submit(s))
		require.NoError(t, ctx.Synchronize())
		assert.Equal(t, seq+4, cudatest.LaunchCount())
	})

	// What the core does not use and CUDA 11.8 lacks returns the typed symbol error
	// from the raw layer, never a crash.
	t.Run("Missing", func(t *testing.T) {
		b, err := cuda.AllocFor[byte](s, 4096)
		require.NoError(t, err)
		defer b.Close()
		err = ctx.Locked(func() error {
			var lib cudaraw.CUlibrary
			requireSymbolError(t, cudaraw.LibraryLoadData(&lib, nil, nil, nil, 0, nil, nil, 0), "cuLibraryLoadData")
			var id uint64
			requireSymbolError(t, cudaraw.StreamGetId(s.Handle(), &id), "cuStreamGetId")
			requireSymbolError(t, cudaraw.CtxGetId(ctx.Handle(), &id), "cuCtxGetId")
			loc := cudaraw.CUmemLocation{Type: cudaraw.CU_MEM_LOCATION_TYPE_DEVICE}
			requireSymbolError(t, cudaraw.MemPrefetchAsync(b.Ptr(), 4096, loc, 0, s.Handle()), "cuMemPrefetchAsync_v2")
			var cond cudaraw.Cuuint64
			requireSymbolError(t, cudaraw.GraphConditionalHandleCreate(&cond, 0, ctx.Handle(), 0, 0), "cuGraphConditionalHandleCreate")
			return nil
		})
		require.NoError(t, err)
		require.NoError(t, s.Synchronize())
	})
}
