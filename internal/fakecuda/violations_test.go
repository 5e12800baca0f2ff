package fakecuda_test

import (
	"encoding/binary"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/internal/fakecuda"
)

// Every kind of violation is detected, counted once, and fails the call as the
// driver would (or not, where the driver would not). Each subtest resets the count.
func TestViolations(t *testing.T) {
	e := setup(t)
	m := e.module(testPTX)
	empty, axpy := e.function(m, "empty"), e.function(m, "axpy")
	one := [3]uint32{1, 1, 1}

	e.run("handles", func(t *testing.T) {
		s, ev := e.stream(true), e.event(false)
		violation(t, "invalid stream handle 0xdead0 (not a handle)", cuda.CUDA_ERROR_INVALID_HANDLE,
			func() error { return cuda.StreamQuery(0xdead0) })
		violation(t, "(it is a event)", cuda.CUDA_ERROR_INVALID_HANDLE,
			func() error { return cuda.StreamQuery(cuda.CUstream(ev)) })
		violation(t, "invalid event handle", cuda.CUDA_ERROR_INVALID_HANDLE,
			func() error { return cuda.EventRecord(cuda.CUevent(s), s) })
		violation(t, "invalid function handle", cuda.CUDA_ERROR_INVALID_HANDLE,
			func() error { return e.launch(cuda.CUfunction(m), one, one, 0, s, nil) })
	})
	e.run("destroyed stream", func(t *testing.T) {
		s := e.stream(true)
		require.NoError(t, cuda.StreamDestroy(s))
		violation(t, "use of destroyed stream", cuda.CUDA_ERROR_INVALID_HANDLE,
			func() error { return cuda.MemsetD8Async(e.alloc(8), 0, 8, s) })
		violation(t, "stream 0x", cuda.CUDA_ERROR_INVALID_HANDLE, func() error { return cuda.StreamDestroy(s) })
		violation(t, "destroy of the default stream", cuda.CUDA_ERROR_INVALID_HANDLE, func() error { return cuda.StreamDestroy(0) })
	})
	e.run("destroyed event", func(t *testing.T) {
		ev := e.event(true)
		require.NoError(t, cuda.EventDestroy(ev))
		violation(t, "use of destroyed event", cuda.CUDA_ERROR_INVALID_HANDLE, func() error { return cuda.EventRecord(ev, 0) })
		violation(t, "use of destroyed event", cuda.CUDA_ERROR_INVALID_HANDLE, func() error { return cuda.EventQuery(ev) })
		violation(t, "destroyed twice", cuda.CUDA_ERROR_INVALID_HANDLE, func() error { return cuda.EventDestroy(ev) })
	})
	e.run("unloaded module", func(t *testing.T) {
		m2 := e.module(testPTX)
		f := e.function(m2, "empty")
		require.NoError(t, cuda.ModuleUnload(m2))
		var f2 cuda.CUfunction
		violation(t, "use of destroyed module", cuda.CUDA_ERROR_INVALID_HANDLE,
			func() error { return cuda.ModuleGetFunction(&f2, m2, cstr("empty")) })
		violation(t, "use of destroyed function", cuda.CUDA_ERROR_INVALID_HANDLE,
			func() error { return e.launch(f, one, one, 0, 0, nil) })
		violation(t, "unloaded twice", cuda.CUDA_ERROR_INVALID_HANDLE, func() error { return cuda.ModuleUnload(m2) })
	})
	e.run("destroyed context", func(t *testing.T) {
		var c2 cuda.CUcontext
		require.NoError(t, cuda.CtxCreate(&c2, nil, 0, e.dev))
		require.NoError(t, cuda.CtxPushCurrent(e.ctx))
		require.NoError(t, cuda.CtxDestroy(c2)) // not on top: stays below, dangling
		var cur cuda.CUcontext
		require.NoError(t, cuda.CtxPopCurrent(&cur))
		require.NoError(t, cuda.CtxGetCurrent(&cur)) // never a use
		require.Equal(t, c2, cur)
		var d cuda.CUdeviceptr
		violation(t, "call with a destroyed context", cuda.CUDA_ERROR_CONTEXT_IS_DESTROYED,
			func() error { return cuda.MemAlloc(&d, 8) })
		require.NoError(t, cuda.CtxPopCurrent(&cur))
		violation(t, "destroyed context", cuda.CUDA_ERROR_CONTEXT_IS_DESTROYED, func() error { return cuda.CtxSetCurrent(c2) })
		violation(t, "destroyed twice", cuda.CUDA_ERROR_CONTEXT_IS_DESTROYED, func() error { return cuda.CtxDestroy(c2) })
		violation(t, "invalid context handle", cuda.CUDA_ERROR_INVALID_CONTEXT,
			func() error { return cuda.CtxSetCurrent(cuda.CUcontext(e.alloc(8))) })
		require.NoError(t, cuda.CtxSetCurrent(e.ctx))
	})
	e.run("destroyed pool", func(t *testing.T) {
		props := cuda.CUmemPoolProps{AllocType: cuda.CU_MEM_ALLOCATION_TYPE_PINNED,
			Location: cuda.CUmemLocation{Type: cuda.CU_MEM_LOCATION_TYPE_DEVICE}}
		var p, def cuda.CUmemoryPool
		require.NoError(t, cuda.MemPoolCreate(&p, &props))
		require.NoError(t, cuda.MemPoolDestroy(p))
		var d cuda.CUdeviceptr
		violation(t, "use of destroyed memory pool", cuda.CUDA_ERROR_INVALID_HANDLE,
			func() error { return cuda.MemAllocFromPoolAsync(&d, 8, p, 0) })
		violation(t, "destroyed twice", cuda.CUDA_ERROR_INVALID_HANDLE, func() error { return cuda.MemPoolDestroy(p) })
		require.NoError(t, cuda.DeviceGetDefaultMemPool(&def, e.dev))
		violation(t, "default memory pool", cuda.CUDA_ERROR_INVALID_VALUE, func() error { return cuda.MemPoolDestroy(def) })
	})
	e.run("freed memory", func(t *testing.T) {
		s := e.stream(true)
		var d cuda.CUdeviceptr
		require.NoError(t, cuda.MemAllocAsync(&d, 64, s))
		require.NoError(t, cuda.MemFreeAsync(d, s))
		// Free-pending: named by any later call.
		violation(t, "use of freed memory", cuda.CUDA_ERROR_INVALID_VALUE, func() error { return cuda.MemsetD8Async(d+8, 0, 8, s) })
		violation(t, "double free", cuda.CUDA_ERROR_INVALID_VALUE, func() error { return cuda.MemFreeAsync(d, s) })
		require.NoError(t, cuda.StreamSynchronize(s))
		violation(t, "(freed)", cuda.CUDA_ERROR_INVALID_VALUE, func() error { return cuda.MemcpyDtoD(e.alloc(64), d, 64) })
		d = e.alloc(64)
		violation(t, "but not its start", cuda.CUDA_ERROR_INVALID_VALUE, func() error { return cuda.MemFree(d + 8) })
		violation(t, "never allocated", cuda.CUDA_ERROR_INVALID_VALUE, func() error { return cuda.MemFree(0x1000) })
		violation(t, "with the wrong function", cuda.CUDA_ERROR_INVALID_VALUE,
			func() error { return cuda.MemFreeHost(ptr(d)) })
	})
	e.run("use after free at execution", func(t *testing.T) {
		// The free on b and the memset on a are not ordered: with some seed the
		// executor runs the free first.
		a, b := e.stream(true), e.stream(true)
		caught := false
		for seed := int64(0); seed < 64 && !caught; seed++ {
			d := e.alloc(64)
			require.NoError(t, fakecuda.SetSeed(seed))
			require.NoError(t, fakecuda.Pause())
			require.NoError(t, cuda.MemsetD8Async(d, 1, 64, a))
			require.NoError(t, cuda.MemFreeAsync(d, b))
			require.NoError(t, fakecuda.Resume())
			require.NoError(t, cuda.CtxSynchronize())
			n, text := fakecuda.Violations()
			if n > 0 {
				require.Equal(t, int64(1), n, text)
				require.Contains(t, text, "device use after free: the free executed before this operation")
				caught = true
			}
		}
		require.True(t, caught)
		fakecuda.ResetViolations()
		// Ordered by an event, it never happens.
		ev := e.event(false)
		for seed := range int64(16) {
			d := e.alloc(64)
			require.NoError(t, fakecuda.SetSeed(seed))
			require.NoError(t, fakecuda.Pause())
			require.NoError(t, cuda.MemsetD8Async(d, 1, 64, a))
			require.NoError(t, cuda.EventRecord(ev, a))
			require.NoError(t, cuda.StreamWaitEvent(b, ev, 0))
			require.NoError(t, cuda.MemFreeAsync(d, b))
			require.NoError(t, fakecuda.Resume())
			require.NoError(t, cuda.CtxSynchronize())
		}
		n, text := fakecuda.Violations()
		require.Zero(t, n, text)
	})
	e.run("out of bounds", func(t *testing.T) {
		d := e.alloc(100)
		src := make([]byte, 200)
		violation(t, "out-of-bounds destination: [0x", cuda.CUDA_ERROR_INVALID_VALUE,
			func() error { return cuda.MemcpyHtoD(d, unsafe.Pointer(&src[0]), 101) })
		violation(t, "out-of-bounds destination", cuda.CUDA_ERROR_INVALID_VALUE,
			func() error { return cuda.MemsetD8Async(d+50, 0, 51, 0) })
		violation(t, "out-of-bounds source", cuda.CUDA_ERROR_INVALID_VALUE,
			func() error { return cuda.MemcpyDtoDAsync(e.alloc(200), d, 200, 0) })
		violation(t, "out-of-bounds destination", cuda.CUDA_ERROR_INVALID_VALUE,
			func() error { return cuda.MemcpyAsync(d+100, d, 1, 0) })
		pin := e.host(64)
		violation(t, "pinned host allocation", cuda.CUDA_ERROR_INVALID_VALUE,
			func() error { return cuda.MemcpyDtoHAsync(unsafe.Pointer(&pin[0]), d, 65, 0) })
		// Host memory that no test registers (a heap slice may reuse the address of
		// one registered and unregistered earlier, which the fake reports as such).
		violation(t, "is not device memory", cuda.CUDA_ERROR_INVALID_VALUE,
			func() error {
				return cuda.MemsetD8(cuda.CUdeviceptr(uintptr(unsafe.Pointer(&neverRegistered[0]))), 0, 8)
			})
		got := make([]byte, 100)
		require.NoError(t, cuda.MemcpyDtoH(unsafe.Pointer(&got[0]), d, 100))
		require.Equal(t, make([]byte, 100), got) // nothing was copied
	})
	e.run("malformed launch", func(t *testing.T) {
		params := make([]byte, 28)
		violation(t, "malformed launch of axpy: extra gives 24 bytes", cuda.CUDA_ERROR_INVALID_VALUE,
			func() error { return e.launch(axpy, one, one, 0, 0, params[:24]) })
		violation(t, "malformed launch of axpy: no parameters given", cuda.CUDA_ERROR_INVALID_VALUE,
			func() error { return e.launch(axpy, one, one, 0, 0, nil) })
		violation(t, "malformed launch of empty", cuda.CUDA_ERROR_INVALID_VALUE,
			func() error { return e.launch(empty, one, one, 0, 0, params[:8]) })
		both := (*unsafe.Pointer)(unsafe.Add(e.scratch, 1024))
		violation(t, "both kernelParams and extra", cuda.CUDA_ERROR_INVALID_VALUE, func() error {
			return cuda.LaunchKernel(axpy, 1, 1, 1, 1, 1, 1, 0, 0, both, both)
		})
		arr := unsafe.Slice((*uintptr)(e.scratch), 4)
		arr[0], arr[1] = uintptr(unsafe.Add(e.scratch, 512)), 0
		violation(t, "kernelParams[1] is NULL", cuda.CUDA_ERROR_INVALID_VALUE, func() error {
			return cuda.LaunchKernel(axpy, 1, 1, 1, 1, 1, 1, 0, 0, (*unsafe.Pointer)(e.scratch), nil)
		})
	})
	e.run("launch with freed memory", func(t *testing.T) {
		var d cuda.CUdeviceptr
		require.NoError(t, cuda.MemAlloc(&d, 64))
		require.NoError(t, cuda.MemFree(d))
		params := make([]byte, 28)
		binary.NativeEndian.PutUint64(params[16:], uint64(d)+8)
		// The driver accepts the launch (the kernel would fault): CUDA_SUCCESS.
		violation(t, "launch with freed memory: axpy parameter 2", 0,
			func() error { return e.launch(axpy, one, one, 0, 0, params) })
		// Freed on another stream, unordered with the launch: with some seed the
		// free runs first, and the kernel's run catches it.
		s1, s2 := e.stream(true), e.stream(true)
		caught := false
		for seed := int64(0); seed < 64 && !caught; seed++ {
			require.NoError(t, cuda.MemAlloc(&d, 64))
			binary.NativeEndian.PutUint64(params[16:], uint64(d))
			require.NoError(t, fakecuda.SetSeed(seed))
			require.NoError(t, fakecuda.Pause())
			require.NoError(t, e.launch(axpy, one, one, 0, s1, params))
			require.NoError(t, cuda.MemFreeAsync(d, s2))
			require.NoError(t, fakecuda.Resume())
			require.NoError(t, cuda.CtxSynchronize())
			if n, text := fakecuda.Violations(); n > 0 {
				require.Equal(t, int64(1), n, text)
				require.Contains(t, text, "cuLaunchKernel: device use after free")
				caught = true
			}
		}
		require.True(t, caught)
		fakecuda.ResetViolations()
	})
	e.run("unregistered memory", func(t *testing.T) {
		buf := make([]byte, 4096)
		p := unsafe.Pointer(&buf[0])
		require.NoError(t, cuda.MemHostRegister(p, 4096, 0))
		require.NoError(t, cuda.MemHostUnregister(p))
		params := make([]byte, 28)
		binary.NativeEndian.PutUint64(params[0:], uint64(uintptr(p))+16)
		violation(t, "launch with unregistered host memory: axpy parameter 0", 0,
			func() error { return e.launch(axpy, one, one, 0, 0, params) })
		violation(t, "use of unregistered host memory", cuda.CUDA_ERROR_INVALID_VALUE,
			func() error { return cuda.MemsetD8Async(cuda.CUdeviceptr(uintptr(p)), 0, 8, 0) })
		violation(t, "unregistered twice", cuda.CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
			func() error { return cuda.MemHostUnregister(p) })
		// Still registered when queued, unregistered before it ran.
		s := e.stream(true)
		d := e.alloc(64)
		require.NoError(t, cuda.MemHostRegister(p, 4096, 0))
		require.NoError(t, fakecuda.SetKernelTime(30*time.Millisecond))
		require.NoError(t, e.launch(empty, one, one, 0, s, nil))
		require.NoError(t, fakecuda.SetKernelTime(0))
		require.NoError(t, cuda.MemcpyDtoHAsync(p, d, 64, s))
		violation(t, "was unregistered before this operation executed", 0, func() error {
			require.NoError(t, cuda.MemHostUnregister(p))
			return cuda.StreamSynchronize(s)
		})
	})
	e.run("graphs", func(t *testing.T) {
		s := e.stream(true)
		require.NoError(t, cuda.StreamBeginCapture(s, cuda.CU_STREAM_CAPTURE_MODE_GLOBAL))
		var g cuda.CUgraph
		require.NoError(t, cuda.StreamEndCapture(s, &g))
		var x cuda.CUgraphExec
		require.NoError(t, cuda.GraphInstantiateWithFlags(&x, g, 0))
		require.NoError(t, cuda.GraphDestroy(g))
		require.NoError(t, cuda.GraphExecDestroy(x))
		violation(t, "graph 0x", cuda.CUDA_ERROR_INVALID_HANDLE, func() error { return cuda.GraphDestroy(g) })
		violation(t, "use of destroyed graph exec", cuda.CUDA_ERROR_INVALID_HANDLE, func() error { return cuda.GraphLaunch(x, s) })
	})
	n, text := fakecuda.Violations()
	assert.Zero(t, n, text)
}

func TestInjections(t *testing.T) {
	e := setup(t)
	s := e.stream(true)
	e.run("oom", func(t *testing.T) {
		var d cuda.CUdeviceptr
		var p unsafe.Pointer
		require.NoError(t, fakecuda.InjectOOM(2, 1, fakecuda.KindDevice))
		require.NoError(t, cuda.MemAlloc(&d, 8))
		require.ErrorIs(t, cuda.MemAlloc(&d, 8), cuda.CUDA_ERROR_OUT_OF_MEMORY)
		require.NoError(t, cuda.MemAlloc(&d, 8))

		require.NoError(t, fakecuda.InjectOOM(1, 1, fakecuda.KindHost))
		require.NoError(t, cuda.MemAlloc(&d, 8)) // not a host allocation: not counted
		require.NoError(t, cuda.MemAllocAsync(&d, 8, s))
		require.ErrorIs(t, cuda.MemAllocHost(&p, 8), cuda.CUDA_ERROR_OUT_OF_MEMORY)
		require.NoError(t, cuda.MemAllocHost(&p, 8))

		require.NoError(t, fakecuda.InjectOOM(1, 3, fakecuda.KindPool|fakecuda.KindManaged))
		require.ErrorIs(t, cuda.MemAllocAsync(&d, 8, s), cuda.CUDA_ERROR_OUT_OF_MEMORY)
		require.ErrorIs(t, cuda.MemAllocManaged(&d, 8, uint32(cuda.CU_MEM_ATTACH_GLOBAL)), cuda.CUDA_ERROR_OUT_OF_MEMORY)
		require.ErrorIs(t, cuda.MemAllocAsync(&d, 8, s), cuda.CUDA_ERROR_OUT_OF_MEMORY)
		require.NoError(t, cuda.MemAllocAsync(&d, 8, s))

		require.NoError(t, fakecuda.InjectOOM(1, 5, fakecuda.KindAll))
		require.NoError(t, fakecuda.ResetInjections())
		require.NoError(t, cuda.MemAlloc(&d, 8))
	})
	e.run("capacity", func(t *testing.T) {
		// Other tests' memory may still be live (the cuda package caches some).
		c := fakecuda.Counters()
		used := uint64(c.DeviceBytes + c.ManagedBytes)
		require.NoError(t, fakecuda.SetCapacity(int64(used+3<<20)))
		defer fakecuda.SetCapacity(8 << 30)
		var free, total uint64
		require.NoError(t, cuda.MemGetInfo(&free, &total))
		assert.Equal(t, used+3<<20, total)
		assert.Equal(t, uint64(3<<20), free)
		var d1, d2 cuda.CUdeviceptr
		require.NoError(t, cuda.MemAlloc(&d1, 2<<20))
		require.ErrorIs(t, cuda.MemAlloc(&d2, 2<<20), cuda.CUDA_ERROR_OUT_OF_MEMORY)
		require.ErrorIs(t, cuda.MemAllocAsync(&d2, 2<<20, s), cuda.CUDA_ERROR_OUT_OF_MEMORY)
		var p unsafe.Pointer
		require.NoError(t, cuda.MemAllocHost(&p, 2<<20)) // host memory is not the device's
		require.NoError(t, cuda.MemFree(d1))
		require.NoError(t, cuda.MemAlloc(&d2, 2<<20))
		require.NoError(t, cuda.MemFree(d2))
		require.ErrorIs(t, cuda.MemAlloc(&d2, 0), cuda.CUDA_ERROR_INVALID_VALUE)
	})
	e.run("fail destroy", func(t *testing.T) {
		const code = cuda.CUDA_ERROR_UNKNOWN
		s2 := e.stream(true)
		require.NoError(t, fakecuda.FailDestroy(fakecuda.DestroyStream, int32(code)))
		require.ErrorIs(t, cuda.StreamDestroy(s2), code)
		require.NoError(t, cuda.StreamQuery(s2)) // still live
		require.NoError(t, cuda.StreamDestroy(s2))

		ev := e.event(false)
		require.NoError(t, fakecuda.FailDestroy(fakecuda.DestroyEvent, int32(code)))
		require.ErrorIs(t, cuda.EventDestroy(ev), code)
		require.NoError(t, cuda.EventDestroy(ev))

		m := e.module(testPTX)
		require.NoError(t, fakecuda.FailDestroy(fakecuda.DestroyModule, int32(code)))
		require.ErrorIs(t, cuda.ModuleUnload(m), code)
		require.NoError(t, cuda.ModuleUnload(m))

		var c2 cuda.CUcontext
		require.NoError(t, cuda.CtxCreate(&c2, nil, 0, e.dev))
		require.NoError(t, fakecuda.FailDestroy(fakecuda.DestroyContext, int32(code)))
		require.ErrorIs(t, cuda.CtxDestroy(c2), code)
		require.NoError(t, cuda.CtxDestroy(c2))

		props := cuda.CUmemPoolProps{AllocType: cuda.CU_MEM_ALLOCATION_TYPE_PINNED,
			Location: cuda.CUmemLocation{Type: cuda.CU_MEM_LOCATION_TYPE_DEVICE}}
		var p cuda.CUmemoryPool
		require.NoError(t, cuda.MemPoolCreate(&p, &props))
		require.NoError(t, fakecuda.FailDestroy(fakecuda.DestroyPool, int32(code)))
		require.ErrorIs(t, cuda.MemPoolDestroy(p), code)
		require.NoError(t, cuda.MemPoolDestroy(p))

		d := e.alloc(8)
		require.NoError(t, fakecuda.FailDestroy(fakecuda.DestroyMemFree, int32(code)))
		require.ErrorIs(t, cuda.MemFreeAsync(d, s), code)
		require.NoError(t, cuda.MemsetD8Async(d, 0, 8, s)) // still allocated
		require.NoError(t, cuda.MemFreeAsync(d, s))

		buf := make([]byte, 64)
		require.NoError(t, cuda.MemHostRegister(unsafe.Pointer(&buf[0]), 64, 0))
		require.NoError(t, fakecuda.FailDestroy(fakecuda.DestroyHostUnregister, int32(code)))
		require.ErrorIs(t, cuda.MemHostUnregister(unsafe.Pointer(&buf[0])), code)
		require.NoError(t, cuda.MemHostUnregister(unsafe.Pointer(&buf[0])))
	})
	e.run("slow destroy", func(t *testing.T) {
		require.NoError(t, fakecuda.SlowDestroy(fakecuda.DestroyEvent, 30*time.Millisecond))
		ev := e.event(false)
		start := time.Now()
		require.NoError(t, cuda.EventDestroy(ev))
		assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond)
		require.NoError(t, fakecuda.ResetInjections())
		ev = e.event(false)
		start = time.Now()
		require.NoError(t, cuda.EventDestroy(ev))
		assert.Less(t, time.Since(start), 30*time.Millisecond)
	})
	e.run("kernel time", func(t *testing.T) {
		m := e.module(testPTX)
		f := e.function(m, "empty")
		require.NoError(t, fakecuda.SetKernelTime(20*time.Millisecond))
		start := time.Now()
		require.NoError(t, e.launch(f, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, s, nil))
		require.ErrorIs(t, cuda.StreamQuery(s), cuda.CUDA_ERROR_NOT_READY)
		require.NoError(t, cuda.StreamSynchronize(s))
		assert.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond)
		require.NoError(t, fakecuda.SetKernelTime(0))
	})
	e.run("commands", func(t *testing.T) {
		require.Error(t, fakecuda.Control("no such command", 0, 0))
		require.Error(t, fakecuda.Control("oom_at", 0, 1))
		require.Error(t, fakecuda.Control("fail_destroy", 99, 1))
		require.NoError(t, fakecuda.Control("verbose", 0, 0))
	})
}

// neverRegistered is host memory that no test registers with the driver.
var neverRegistered [64]byte
