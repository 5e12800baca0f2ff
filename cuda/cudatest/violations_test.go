package cudatest_test

import (
	"encoding/binary"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
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
		violation(t, "invalid stream handle 0xdead0 (not a handle)", cudaraw.CUDA_ERROR_INVALID_HANDLE,
			func() error { return cudaraw.StreamQuery(0xdead0) })
		violation(t, "(it is a event)", cudaraw.CUDA_ERROR_INVALID_HANDLE,
			func() error { return cudaraw.StreamQuery(cudaraw.CUstream(ev)) })
		violation(t, "invalid event handle", cudaraw.CUDA_ERROR_INVALID_HANDLE,
			func() error { return cudaraw.EventRecord(cudaraw.CUevent(s), s) })
		violation(t, "invalid function handle", cudaraw.CUDA_ERROR_INVALID_HANDLE,
			func() error { return e.launch(cudaraw.CUfunction(m), one, one, 0, s, nil) })
	})
	e.run("destroyed stream", func(t *testing.T) {
		s := e.stream(true)
		require.NoError(t, cudaraw.StreamDestroy(s))
		violation(t, "use of destroyed stream", cudaraw.CUDA_ERROR_INVALID_HANDLE,
			func() error { return cudaraw.MemsetD8Async(e.alloc(8), 0, 8, s) })
		violation(t, "stream 0x", cudaraw.CUDA_ERROR_INVALID_HANDLE, func() error { return cudaraw.StreamDestroy(s) })
		violation(t, "destroy of the default stream", cudaraw.CUDA_ERROR_INVALID_HANDLE, func() error { return cudaraw.StreamDestroy(0) })
	})
	e.run("destroyed event", func(t *testing.T) {
		ev := e.event(true)
		require.NoError(t, cudaraw.EventDestroy(ev))
		violation(t, "use of destroyed event", cudaraw.CUDA_ERROR_INVALID_HANDLE, func() error { return cudaraw.EventRecord(ev, 0) })
		violation(t, "use of destroyed event", cudaraw.CUDA_ERROR_INVALID_HANDLE, func() error { return cudaraw.EventQuery(ev) })
		violation(t, "destroyed twice", cudaraw.CUDA_ERROR_INVALID_HANDLE, func() error { return cudaraw.EventDestroy(ev) })
	})
	e.run("unloaded module", func(t *testing.T) {
		m2 := e.module(testPTX)
		f := e.function(m2, "empty")
		require.NoError(t, cudaraw.ModuleUnload(m2))
		var f2 cudaraw.CUfunction
		violation(t, "use of destroyed module", cudaraw.CUDA_ERROR_INVALID_HANDLE,
			func() error { return cudaraw.ModuleGetFunction(&f2, m2, cstr("empty")) })
		violation(t, "use of destroyed function", cudaraw.CUDA_ERROR_INVALID_HANDLE,
			func() error { return e.launch(f, one, one, 0, 0, nil) })
		violation(t, "unloaded twice", cudaraw.CUDA_ERROR_INVALID_HANDLE, func() error { return cudaraw.ModuleUnload(m2) })
	})
	e.run("destroyed context", func(t *testing.T) {
		var c2 cudaraw.CUcontext
		require.NoError(t, cudaraw.CtxCreate(&c2, nil, 0, e.dev))
		require.NoError(t, cudaraw.CtxPushCurrent(e.ctx))
		require.NoError(t, cudaraw.CtxDestroy(c2)) // not on top: stays below, dangling
		var cur cudaraw.CUcontext
		require.NoError(t, cudaraw.CtxPopCurrent(&cur))
		require.NoError(t, cudaraw.CtxGetCurrent(&cur)) // never a use
		require.Equal(t, c2, cur)
		var d cudaraw.CUdeviceptr
		violation(t, "call with a destroyed context", cudaraw.CUDA_ERROR_CONTEXT_IS_DESTROYED,
			func() error { return cudaraw.MemAlloc(&d, 8) })
		require.NoError(t, cudaraw.CtxPopCurrent(&cur))
		violation(t, "destroyed context", cudaraw.CUDA_ERROR_CONTEXT_IS_DESTROYED, func() error { return cudaraw.CtxSetCurrent(c2) })
		violation(t, "destroyed twice", cudaraw.CUDA_ERROR_CONTEXT_IS_DESTROYED, func() error { return cudaraw.CtxDestroy(c2) })
		violation(t, "invalid context handle", cudaraw.CUDA_ERROR_INVALID_CONTEXT,
			func() error { return cudaraw.CtxSetCurrent(cudaraw.CUcontext(e.alloc(8))) })
		require.NoError(t, cudaraw.CtxSetCurrent(e.ctx))
	})
	e.run("destroyed pool", func(t *testing.T) {
		props := cudaraw.CUmemPoolProps{AllocType: cudaraw.CU_MEM_ALLOCATION_TYPE_PINNED,
			Location: cudaraw.CUmemLocation{Type: cudaraw.CU_MEM_LOCATION_TYPE_DEVICE}}
		var p, def cudaraw.CUmemoryPool
		require.NoError(t, cudaraw.MemPoolCreate(&p, &props))
		require.NoError(t, cudaraw.MemPoolDestroy(p))
		var d cudaraw.CUdeviceptr
		violation(t, "use of destroyed memory pool", cudaraw.CUDA_ERROR_INVALID_HANDLE,
			func() error { return cudaraw.MemAllocFromPoolAsync(&d, 8, p, 0) })
		violation(t, "destroyed twice", cudaraw.CUDA_ERROR_INVALID_HANDLE, func() error { return cudaraw.MemPoolDestroy(p) })
		require.NoError(t, cudaraw.DeviceGetDefaultMemPool(&def, e.dev))
		violation(t, "default memory pool", cudaraw.CUDA_ERROR_INVALID_VALUE, func() error { return cudaraw.MemPoolDestroy(def) })
	})
	e.run("freed memory", func(t *testing.T) {
		s := e.stream(true)
		var d cudaraw.CUdeviceptr
		require.NoError(t, cudaraw.MemAllocAsync(&d, 64, s))
		require.NoError(t, cudaraw.MemFreeAsync(d, s))
		// Free-pending: named by any later call.
		violation(t, "use of freed memory", cudaraw.CUDA_ERROR_INVALID_VALUE, func() error { return cudaraw.MemsetD8Async(d+8, 0, 8, s) })
		violation(t, "double free", cudaraw.CUDA_ERROR_INVALID_VALUE, func() error { return cudaraw.MemFreeAsync(d, s) })
		require.NoError(t, cudaraw.StreamSynchronize(s))
		violation(t, "(freed)", cudaraw.CUDA_ERROR_INVALID_VALUE, func() error { return cudaraw.MemcpyDtoD(e.alloc(64), d, 64) })
		d = e.alloc(64)
		violation(t, "but not its start", cudaraw.CUDA_ERROR_INVALID_VALUE, func() error { return cudaraw.MemFree(d + 8) })
		violation(t, "never allocated", cudaraw.CUDA_ERROR_INVALID_VALUE, func() error { return cudaraw.MemFree(0x1000) })
		violation(t, "with the wrong function", cudaraw.CUDA_ERROR_INVALID_VALUE,
			func() error { return cudaraw.MemFreeHost(ptr(d)) })
	})
	e.run("use after free at execution", func(t *testing.T) {
		// The free on b and the memset on a are not ordered: with some seed the
		// executor runs the free first.
		a, b := e.stream(true), e.stream(true)
		caught := false
		for seed := int64(0); seed < 64 && !caught; seed++ {
			d := e.alloc(64)
			require.NoError(t, cudatest.SetSeed(seed))
			require.NoError(t, cudatest.Pause())
			require.NoError(t, cudaraw.MemsetD8Async(d, 1, 64, a))
			require.NoError(t, cudaraw.MemFreeAsync(d, b))
			require.NoError(t, cudatest.Resume())
			require.NoError(t, cudaraw.CtxSynchronize())
			n, text := cudatest.Violations()
			if n > 0 {
				require.Equal(t, int64(1), n, text)
				require.Contains(t, text, "device use after free: the free executed before this operation")
				caught = true
			}
		}
		require.True(t, caught)
		cudatest.ResetViolations()
		// Ordered by an event, it never happens.
		ev := e.event(false)
		for seed := range int64(16) {
			d := e.alloc(64)
			require.NoError(t, cudatest.SetSeed(seed))
			require.NoError(t, cudatest.Pause())
			require.NoError(t, cudaraw.MemsetD8Async(d, 1, 64, a))
			require.NoError(t, cudaraw.EventRecord(ev, a))
			require.NoError(t, cudaraw.StreamWaitEvent(b, ev, 0))
			require.NoError(t, cudaraw.MemFreeAsync(d, b))
			require.NoError(t, cudatest.Resume())
			require.NoError(t, cudaraw.CtxSynchronize())
		}
		n, text := cudatest.Violations()
		require.Zero(t, n, text)
	})
	e.run("out of bounds", func(t *testing.T) {
		d := e.alloc(100)
		src := make([]byte, 200)
		violation(t, "out-of-bounds destination: [0x", cudaraw.CUDA_ERROR_INVALID_VALUE,
			func() error { return cudaraw.MemcpyHtoD(d, unsafe.Pointer(&src[0]), 101) })
		violation(t, "out-of-bounds destination", cudaraw.CUDA_ERROR_INVALID_VALUE,
			func() error { return cudaraw.MemsetD8Async(d+50, 0, 51, 0) })
		violation(t, "out-of-bounds source", cudaraw.CUDA_ERROR_INVALID_VALUE,
			func() error { return cudaraw.MemcpyDtoDAsync(e.alloc(200), d, 200, 0) })
		violation(t, "out-of-bounds destination", cudaraw.CUDA_ERROR_INVALID_VALUE,
			func() error { return cudaraw.MemcpyAsync(d+100, d, 1, 0) })
		pin := e.host(64)
		violation(t, "pinned host allocation", cudaraw.CUDA_ERROR_INVALID_VALUE,
			func() error { return cudaraw.MemcpyDtoHAsync(unsafe.Pointer(&pin[0]), d, 65, 0) })
		// Host memory that no test registers (a heap slice may reuse the address of
		// one registered and unregistered earlier, which the fake reports as such).
		violation(t, "is not device memory", cudaraw.CUDA_ERROR_INVALID_VALUE,
			func() error {
				return cudaraw.MemsetD8(cudaraw.CUdeviceptr(uintptr(unsafe.Pointer(&neverRegistered[0]))), 0, 8)
			})
		got := make([]byte, 100)
		require.NoError(t, cudaraw.MemcpyDtoH(unsafe.Pointer(&got[0]), d, 100))
		require.Equal(t, make([]byte, 100), got) // nothing was copied
	})
	e.run("malformed launch", func(t *testing.T) {
		params := make([]byte, 28)
		violation(t, "malformed launch of axpy: extra gives 24 bytes", cudaraw.CUDA_ERROR_INVALID_VALUE,
			func() error { return e.launch(axpy, one, one, 0, 0, params[:24]) })
		violation(t, "malformed launch of axpy: no parameters given", cudaraw.CUDA_ERROR_INVALID_VALUE,
			func() error { return e.launch(axpy, one, one, 0, 0, nil) })
		violation(t, "malformed launch of empty", cudaraw.CUDA_ERROR_INVALID_VALUE,
			func() error { return e.launch(empty, one, one, 0, 0, params[:8]) })
		both := (*unsafe.Pointer)(unsafe.Add(e.scratch, 1024))
		violation(t, "both kernelParams and extra", cudaraw.CUDA_ERROR_INVALID_VALUE, func() error {
			return cudaraw.LaunchKernel(axpy, 1, 1, 1, 1, 1, 1, 0, 0, both, both)
		})
		arr := unsafe.Slice((*uintptr)(e.scratch), 4)
		arr[0], arr[1] = uintptr(unsafe.Add(e.scratch, 512)), 0
		violation(t, "kernelParams[1] is NULL", cudaraw.CUDA_ERROR_INVALID_VALUE, func() error {
			return cudaraw.LaunchKernel(axpy, 1, 1, 1, 1, 1, 1, 0, 0, (*unsafe.Pointer)(e.scratch), nil)
		})
	})
	e.run("launch with freed memory", func(t *testing.T) {
		var d cudaraw.CUdeviceptr
		require.NoError(t, cudaraw.MemAlloc(&d, 64))
		require.NoError(t, cudaraw.MemFree(d))
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
			require.NoError(t, cudaraw.MemAlloc(&d, 64))
			binary.NativeEndian.PutUint64(params[16:], uint64(d))
			require.NoError(t, cudatest.SetSeed(seed))
			require.NoError(t, cudatest.Pause())
			require.NoError(t, e.launch(axpy, one, one, 0, s1, params))
			require.NoError(t, cudaraw.MemFreeAsync(d, s2))
			require.NoError(t, cudatest.Resume())
			require.NoError(t, cudaraw.CtxSynchronize())
			if n, text := cudatest.Violations(); n > 0 {
				require.Equal(t, int64(1), n, text)
				require.Contains(t, text, "cuLaunchKernel: device use after free")
				caught = true
			}
		}
		require.True(t, caught)
		cudatest.ResetViolations()
	})
	e.run("unregistered memory", func(t *testing.T) {
		buf := make([]byte, 4096)
		p := unsafe.Pointer(&buf[0])
		require.NoError(t, cudaraw.MemHostRegister(p, 4096, 0))
		require.NoError(t, cudaraw.MemHostUnregister(p))
		params := make([]byte, 28)
		binary.NativeEndian.PutUint64(params[0:], uint64(uintptr(p))+16)
		violation(t, "launch with unregistered host memory: axpy parameter 0", 0,
			func() error { return e.launch(axpy, one, one, 0, 0, params) })
		violation(t, "use of unregistered host memory", cudaraw.CUDA_ERROR_INVALID_VALUE,
			func() error { return cudaraw.MemsetD8Async(cudaraw.CUdeviceptr(uintptr(p)), 0, 8, 0) })
		violation(t, "unregistered twice", cudaraw.CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
			func() error { return cudaraw.MemHostUnregister(p) })
		// Still registered when queued, unregistered before it ran.
		s := e.stream(true)
		d := e.alloc(64)
		require.NoError(t, cudaraw.MemHostRegister(p, 4096, 0))
		require.NoError(t, cudatest.SetKernelTime(30*time.Millisecond))
		require.NoError(t, e.launch(empty, one, one, 0, s, nil))
		require.NoError(t, cudatest.SetKernelTime(0))
		require.NoError(t, cudaraw.MemcpyDtoHAsync(p, d, 64, s))
		violation(t, "was unregistered before this operation executed", 0, func() error {
			require.NoError(t, cudaraw.MemHostUnregister(p))
			return cudaraw.StreamSynchronize(s)
		})
	})
	e.run("graphs", func(t *testing.T) {
		s := e.stream(true)
		require.NoError(t, cudaraw.StreamBeginCapture(s, cudaraw.CU_STREAM_CAPTURE_MODE_GLOBAL))
		var g cudaraw.CUgraph
		require.NoError(t, cudaraw.StreamEndCapture(s, &g))
		var x cudaraw.CUgraphExec
		require.NoError(t, cudaraw.GraphInstantiateWithFlags(&x, g, 0))
		require.NoError(t, cudaraw.GraphDestroy(g))
		require.NoError(t, cudaraw.GraphExecDestroy(x))
		violation(t, "graph 0x", cudaraw.CUDA_ERROR_INVALID_HANDLE, func() error { return cudaraw.GraphDestroy(g) })
		violation(t, "use of destroyed graph exec", cudaraw.CUDA_ERROR_INVALID_HANDLE, func() error { return cudaraw.GraphLaunch(x, s) })
	})
	n, text := cudatest.Violations()
	assert.Zero(t, n, text)
}

func TestInjections(t *testing.T) {
	e := setup(t)
	s := e.stream(true)
	e.run("oom", func(t *testing.T) {
		var d cudaraw.CUdeviceptr
		var p unsafe.Pointer
		require.NoError(t, cudatest.InjectOOM(2, 1, cudatest.KindDevice))
		require.NoError(t, cudaraw.MemAlloc(&d, 8))
		require.ErrorIs(t, cudaraw.MemAlloc(&d, 8), cudaraw.CUDA_ERROR_OUT_OF_MEMORY)
		require.NoError(t, cudaraw.MemAlloc(&d, 8))

		require.NoError(t, cudatest.InjectOOM(1, 1, cudatest.KindHost))
		require.NoError(t, cudaraw.MemAlloc(&d, 8)) // not a host allocation: not counted
		require.NoError(t, cudaraw.MemAllocAsync(&d, 8, s))
		require.ErrorIs(t, cudaraw.MemAllocHost(&p, 8), cudaraw.CUDA_ERROR_OUT_OF_MEMORY)
		require.NoError(t, cudaraw.MemAllocHost(&p, 8))

		require.NoError(t, cudatest.InjectOOM(1, 3, cudatest.KindPool|cudatest.KindManaged))
		require.ErrorIs(t, cudaraw.MemAllocAsync(&d, 8, s), cudaraw.CUDA_ERROR_OUT_OF_MEMORY)
		require.ErrorIs(t, cudaraw.MemAllocManaged(&d, 8, uint32(cudaraw.CU_MEM_ATTACH_GLOBAL)), cudaraw.CUDA_ERROR_OUT_OF_MEMORY)
		require.ErrorIs(t, cudaraw.MemAllocAsync(&d, 8, s), cudaraw.CUDA_ERROR_OUT_OF_MEMORY)
		require.NoError(t, cudaraw.MemAllocAsync(&d, 8, s))

		require.NoError(t, cudatest.InjectOOM(1, 5, cudatest.KindAll))
		require.NoError(t, cudatest.ResetInjections())
		require.NoError(t, cudaraw.MemAlloc(&d, 8))
	})
	e.run("capacity", func(t *testing.T) {
		// Other tests' memory may still be live (the cuda package caches some).
		c := cudatest.Counters()
		used := uint64(c.DeviceBytes + c.ManagedBytes)
		require.NoError(t, cudatest.SetCapacity(int64(used+3<<20)))
		defer cudatest.SetCapacity(8 << 30)
		var free, total uint64
		require.NoError(t, cudaraw.MemGetInfo(&free, &total))
		assert.Equal(t, used+3<<20, total)
		assert.Equal(t, uint64(3<<20), free)
		var d1, d2 cudaraw.CUdeviceptr
		require.NoError(t, cudaraw.MemAlloc(&d1, 2<<20))
		require.ErrorIs(t, cudaraw.MemAlloc(&d2, 2<<20), cudaraw.CUDA_ERROR_OUT_OF_MEMORY)
		require.ErrorIs(t, cudaraw.MemAllocAsync(&d2, 2<<20, s), cudaraw.CUDA_ERROR_OUT_OF_MEMORY)
		var p unsafe.Pointer
		require.NoError(t, cudaraw.MemAllocHost(&p, 2<<20)) // host memory is not the device's
		require.NoError(t, cudaraw.MemFree(d1))
		require.NoError(t, cudaraw.MemAlloc(&d2, 2<<20))
		require.NoError(t, cudaraw.MemFree(d2))
		require.ErrorIs(t, cudaraw.MemAlloc(&d2, 0), cudaraw.CUDA_ERROR_INVALID_VALUE)
	})
	e.run("fail destroy", func(t *testing.T) {
		const code = cudaraw.CUDA_ERROR_UNKNOWN
		s2 := e.stream(true)
		require.NoError(t, cudatest.FailDestroy(cudatest.DestroyStream, int32(code)))
		require.ErrorIs(t, cudaraw.StreamDestroy(s2), code)
		require.NoError(t, cudaraw.StreamQuery(s2)) // still live
		require.NoError(t, cudaraw.StreamDestroy(s2))

		ev := e.event(false)
		require.NoError(t, cudatest.FailDestroy(cudatest.DestroyEvent, int32(code)))
		require.ErrorIs(t, cudaraw.EventDestroy(ev), code)
		require.NoError(t, cudaraw.EventDestroy(ev))

		m := e.module(testPTX)
		require.NoError(t, cudatest.FailDestroy(cudatest.DestroyModule, int32(code)))
		require.ErrorIs(t, cudaraw.ModuleUnload(m), code)
		require.NoError(t, cudaraw.ModuleUnload(m))

		var c2 cudaraw.CUcontext
		require.NoError(t, cudaraw.CtxCreate(&c2, nil, 0, e.dev))
		require.NoError(t, cudatest.FailDestroy(cudatest.DestroyContext, int32(code)))
		require.ErrorIs(t, cudaraw.CtxDestroy(c2), code)
		require.NoError(t, cudaraw.CtxDestroy(c2))

		props := cudaraw.CUmemPoolProps{AllocType: cudaraw.CU_MEM_ALLOCATION_TYPE_PINNED,
			Location: cudaraw.CUmemLocation{Type: cudaraw.CU_MEM_LOCATION_TYPE_DEVICE}}
		var p cudaraw.CUmemoryPool
		require.NoError(t, cudaraw.MemPoolCreate(&p, &props))
		require.NoError(t, cudatest.FailDestroy(cudatest.DestroyPool, int32(code)))
		require.ErrorIs(t, cudaraw.MemPoolDestroy(p), code)
		require.NoError(t, cudaraw.MemPoolDestroy(p))

		d := e.alloc(8)
		require.NoError(t, cudatest.FailDestroy(cudatest.DestroyMemFree, int32(code)))
		require.ErrorIs(t, cudaraw.MemFreeAsync(d, s), code)
		require.NoError(t, cudaraw.MemsetD8Async(d, 0, 8, s)) // still allocated
		require.NoError(t, cudaraw.MemFreeAsync(d, s))

		buf := make([]byte, 64)
		require.NoError(t, cudaraw.MemHostRegister(unsafe.Pointer(&buf[0]), 64, 0))
		require.NoError(t, cudatest.FailDestroy(cudatest.DestroyHostUnregister, int32(code)))
		require.ErrorIs(t, cudaraw.MemHostUnregister(unsafe.Pointer(&buf[0])), code)
		require.NoError(t, cudaraw.MemHostUnregister(unsafe.Pointer(&buf[0])))
	})
	e.run("slow destroy", func(t *testing.T) {
		require.NoError(t, cudatest.SlowDestroy(cudatest.DestroyEvent, 30*time.Millisecond))
		ev := e.event(false)
		start := time.Now()
		require.NoError(t, cudaraw.EventDestroy(ev))
		assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond)
		// After the reset a destroy no longer waits out an injected delay, here one
		// long enough that waiting it out would be a hang, not a slow machine.
		require.NoError(t, cudatest.SlowDestroy(cudatest.DestroyEvent, time.Minute))
		require.NoError(t, cudatest.ResetInjections())
		ev = e.event(false)
		start = time.Now()
		require.NoError(t, cudaraw.EventDestroy(ev))
		assert.Less(t, time.Since(start), 30*time.Second)
	})
	e.run("kernel time", func(t *testing.T) {
		m := e.module(testPTX)
		f := e.function(m, "empty")
		require.NoError(t, cudatest.SetKernelTime(20*time.Millisecond))
		start := time.Now()
		require.NoError(t, e.launch(f, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, s, nil))
		require.ErrorIs(t, cudaraw.StreamQuery(s), cudaraw.CUDA_ERROR_NOT_READY)
		require.NoError(t, cudaraw.StreamSynchronize(s))
		assert.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond)
		require.NoError(t, cudatest.SetKernelTime(0))
	})
	e.run("commands", func(t *testing.T) {
		require.Error(t, cudatest.Control("no such command", 0, 0))
		require.Error(t, cudatest.Control("oom_at", 0, 1))
		require.Error(t, cudatest.Control("fail_destroy", 99, 1))
		require.NoError(t, cudatest.Control("verbose", 0, 0))
	})
}

// neverRegistered is host memory that no test registers with the driver.
var neverRegistered [64]byte
