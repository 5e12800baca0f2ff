package cudatest_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
)

func TestDevicesAndErrors(t *testing.T) {
	e := setup(t)
	var n int32
	require.NoError(t, cudaraw.DeviceGetCount(&n))
	assert.Equal(t, int32(1), n)
	var d cudaraw.CUdevice
	require.ErrorIs(t, cudaraw.DeviceGet(&d, 1), cudaraw.CUDA_ERROR_INVALID_DEVICE)
	attr := func(a cudaraw.CUdevice_attribute) int32 {
		var v int32
		require.NoError(t, cudaraw.DeviceGetAttribute(&v, a, e.dev))
		return v
	}
	assert.Equal(t, int32(9), attr(cudaraw.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR))
	assert.Equal(t, int32(0), attr(cudaraw.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR))
	assert.Equal(t, int32(132), attr(cudaraw.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT))
	assert.Equal(t, int32(1024), attr(cudaraw.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK))
	assert.Equal(t, int32(48<<10), attr(cudaraw.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK))
	assert.Equal(t, int32(1), attr(cudaraw.CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING))
	assert.Equal(t, int32(1), attr(cudaraw.CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED))
	assert.Equal(t, int32(1), attr(cudaraw.CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS))
	assert.Equal(t, int32(32), attr(cudaraw.CU_DEVICE_ATTRIBUTE_WARP_SIZE))
	name := make([]byte, 64)
	require.NoError(t, cudaraw.DeviceGetName(&name[0], int32(len(name)), e.dev))
	assert.Equal(t, "Fake CUDA Device", gostr(&name[0]))
	var total, free uint64
	require.NoError(t, cudaraw.DeviceTotalMem(&total, e.dev))
	assert.Equal(t, uint64(8<<30), total)
	require.NoError(t, cudaraw.MemGetInfo(&free, &total))
	assert.Equal(t, uint64(8<<30), total)

	var v int32
	require.NoError(t, cudaraw.DriverGetVersion(&v))
	assert.Equal(t, int32(13000), v)
	var s *byte
	require.NoError(t, cudaraw.GetErrorName(cudaraw.CUDA_ERROR_OUT_OF_MEMORY, &s))
	assert.Equal(t, "CUDA_ERROR_OUT_OF_MEMORY", gostr(s))
	require.NoError(t, cudaraw.GetErrorString(cudaraw.CUDA_ERROR_INVALID_VALUE, &s))
	assert.Equal(t, "invalid argument", gostr(s))
	require.NoError(t, cudaraw.GetErrorString(cudaraw.CUDA_ERROR_CONTEXT_IS_DESTROYED, &s))
	assert.Equal(t, "context is destroyed", gostr(s))
	require.ErrorIs(t, cudaraw.GetErrorName(cudaraw.Result(12345), &s), cudaraw.CUDA_ERROR_INVALID_VALUE)
}

func TestContextStack(t *testing.T) {
	e := setup(t)
	var cur cudaraw.CUcontext
	require.NoError(t, cudaraw.CtxGetCurrent(&cur))
	require.Equal(t, e.ctx, cur)
	var c2 cudaraw.CUcontext
	require.NoError(t, cudaraw.CtxCreate(&c2, nil, 0, e.dev)) // pushed: current
	require.NoError(t, cudaraw.CtxGetCurrent(&cur))
	require.Equal(t, c2, cur)
	require.NoError(t, cudaraw.CtxPushCurrent(e.ctx))
	var popped cudaraw.CUcontext
	require.NoError(t, cudaraw.CtxPopCurrent(&popped))
	require.Equal(t, e.ctx, popped)
	require.NoError(t, cudaraw.CtxDestroy(c2)) // current: popped
	require.NoError(t, cudaraw.CtxGetCurrent(&cur))
	require.Equal(t, e.ctx, cur)

	require.NoError(t, cudaraw.CtxSetCurrent(0)) // NULL pops
	require.NoError(t, cudaraw.CtxGetCurrent(&cur))
	require.Zero(t, cur)
	var d cudaraw.CUdeviceptr
	require.ErrorIs(t, cudaraw.MemAlloc(&d, 16), cudaraw.CUDA_ERROR_INVALID_CONTEXT) // no context: no violation
	require.NoError(t, cudaraw.CtxSetCurrent(e.ctx))

	var least, greatest int32
	require.NoError(t, cudaraw.CtxGetStreamPriorityRange(&least, &greatest))
	assert.Equal(t, int32(0), least)
	assert.Equal(t, int32(-5), greatest)
	var s cudaraw.CUstream
	var prio int32
	require.NoError(t, cudaraw.StreamCreateWithPriority(&s, 0, -9))
	require.NoError(t, cudaraw.StreamGetPriority(s, &prio))
	assert.Equal(t, int32(-5), prio) // clamped

	// The primary context: retained, reset by its last release, the same handle
	// again when retained anew.
	var p1, p2 cudaraw.CUcontext
	var flags uint32
	var active int32
	require.NoError(t, cudaraw.DevicePrimaryCtxSetFlags(e.dev, 4))
	require.NoError(t, cudaraw.DevicePrimaryCtxRetain(&p1, e.dev))
	require.NoError(t, cudaraw.DevicePrimaryCtxGetState(e.dev, &flags, &active))
	assert.Equal(t, uint32(4), flags)
	assert.Equal(t, int32(1), active)
	require.NoError(t, cudaraw.DevicePrimaryCtxRetain(&p2, e.dev))
	require.Equal(t, p1, p2)
	require.NoError(t, cudaraw.DevicePrimaryCtxRelease(e.dev))
	require.NoError(t, cudaraw.DevicePrimaryCtxRelease(e.dev))
	require.NoError(t, cudaraw.DevicePrimaryCtxSetFlags(e.dev, 0))
}

func TestCopies(t *testing.T) {
	e := setup(t)
	const n = 4096
	src := make([]byte, n)
	for i := range src {
		src[i] = byte(i * 7)
	}
	d1, d2 := e.alloc(n), e.alloc(n)

	// Synchronous: host to device, device to device, device to host.
	require.NoError(t, cudaraw.MemcpyHtoD(d1, unsafe.Pointer(&src[0]), n))
	require.NoError(t, cudaraw.MemcpyDtoD(d2, d1, n))
	require.Equal(t, src, e.download(d2, n))

	// Asynchronous, through pinned memory.
	s := e.stream(true)
	pin := e.host(n)
	copy(pin, src)
	back := e.host(n)
	require.NoError(t, cudaraw.MemsetD8Async(d1, 0, n, s))
	require.NoError(t, cudaraw.MemcpyHtoDAsync(d1, unsafe.Pointer(&pin[0]), n, s))
	require.NoError(t, cudaraw.MemcpyDtoDAsync(d2, d1, n, s))
	require.NoError(t, cudaraw.MemcpyDtoHAsync(unsafe.Pointer(&back[0]), d2, n, s))
	require.NoError(t, cudaraw.StreamSynchronize(s))
	require.Equal(t, src, back)

	// To pageable memory: done when the call returns.
	out := make([]byte, n)
	require.NoError(t, cudaraw.MemsetD8Async(d2, 9, n, s))
	require.NoError(t, cudaraw.MemcpyDtoHAsync(unsafe.Pointer(&out[0]), d2, n, s))
	require.Equal(t, fill(n, 9), out)

	// The unified cuMemcpy and cuMemcpyAsync, with host pointers as addresses.
	require.NoError(t, cudaraw.Memcpy(d1, cudaraw.CUdeviceptr(uintptr(unsafe.Pointer(&src[0]))), n))
	require.NoError(t, cudaraw.MemcpyAsync(cudaraw.CUdeviceptr(uintptr(unsafe.Pointer(&back[0]))), d1, n, s))
	require.NoError(t, cudaraw.StreamSynchronize(s))
	require.Equal(t, src, back)

	// Managed memory: the host reads and writes it directly.
	var m cudaraw.CUdeviceptr
	require.NoError(t, cudaraw.MemAllocManaged(&m, n, uint32(cudaraw.CU_MEM_ATTACH_GLOBAL)))
	mb := unsafe.Slice((*byte)(ptr(m)), n)
	copy(mb, src)
	require.NoError(t, cudaraw.MemcpyDtoD(d1, m, n))
	require.Equal(t, src, e.download(d1, n))
	require.NoError(t, cudaraw.MemsetD32Async(m, 0x01020304, n/4, s))
	require.NoError(t, cudaraw.StreamSynchronize(s))
	assert.Equal(t, uint32(0x01020304), binary.NativeEndian.Uint32(mb[n-4:]))
	require.NoError(t, cudaraw.MemFree(m))
}

func TestMemsets(t *testing.T) {
	e := setup(t)
	d := e.alloc(64)
	s := e.stream(true)
	require.NoError(t, cudaraw.MemsetD8(d, 0xab, 64))
	require.Equal(t, fill(64, 0xab), e.download(d, 64))
	require.NoError(t, cudaraw.MemsetD16(d, 0x1234, 32))
	got := e.download(d, 64)
	assert.Equal(t, uint16(0x1234), binary.NativeEndian.Uint16(got[62:]))
	require.NoError(t, cudaraw.MemsetD32(d+4, 0xdeadbeef, 15))
	got = e.download(d, 64)
	assert.Equal(t, uint16(0x1234), binary.NativeEndian.Uint16(got[0:]))
	assert.Equal(t, uint32(0xdeadbeef), binary.NativeEndian.Uint32(got[60:]))
	require.NoError(t, cudaraw.MemsetD8Async(d, 1, 64, s))
	require.NoError(t, cudaraw.MemsetD16Async(d, 0x0202, 16, s))
	require.NoError(t, cudaraw.MemsetD32Async(d, 0x03030303, 4, s))
	require.NoError(t, cudaraw.StreamSynchronize(s))
	got = e.download(d, 64)
	assert.Equal(t, fill(16, 3), got[:16])
	assert.Equal(t, fill(16, 2), got[16:32])
	assert.Equal(t, fill(32, 1), got[32:])
	// Misaligned 16- and 32-bit memsets are refused, as the driver refuses them.
	require.ErrorIs(t, cudaraw.MemsetD16(d+1, 0, 2), cudaraw.CUDA_ERROR_INVALID_VALUE)
	require.ErrorIs(t, cudaraw.MemsetD32Async(d+2, 0, 2, s), cudaraw.CUDA_ERROR_INVALID_VALUE)
}

// An asynchronous copy from pageable memory reads it when the call is made.
func TestPageableSnapshot(t *testing.T) {
	e := setup(t)
	m := e.module(testPTX)
	empty := e.function(m, "empty")
	s := e.stream(true)
	d := e.alloc(256)
	require.NoError(t, cudatest.SetKernelTime(50*time.Millisecond))
	require.NoError(t, e.launch(empty, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, s, nil))
	require.NoError(t, cudatest.SetKernelTime(0))
	buf := fill(256, 1)
	require.NoError(t, cudaraw.MemcpyHtoDAsync(d, unsafe.Pointer(&buf[0]), 256, s))
	require.ErrorIs(t, cudaraw.StreamQuery(s), cudaraw.CUDA_ERROR_NOT_READY) // the kernel still runs
	copy(buf, fill(256, 2))
	require.NoError(t, cudaraw.StreamSynchronize(s))
	require.Equal(t, fill(256, 1), e.download(d, 256))

	// To pageable memory, the copy waits for the stream's earlier work.
	require.NoError(t, cudatest.SetKernelTime(30*time.Millisecond))
	require.NoError(t, e.launch(empty, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, s, nil))
	require.NoError(t, cudatest.SetKernelTime(0))
	require.NoError(t, cudaraw.MemsetD8Async(d, 5, 256, s))
	require.NoError(t, cudaraw.MemcpyDtoHAsync(unsafe.Pointer(&buf[0]), d, 256, s))
	require.NoError(t, cudaraw.StreamQuery(s))
	require.Equal(t, fill(256, 5), buf)
}

func TestStreamOrderAndEvents(t *testing.T) {
	e := setup(t)
	m := e.module(testPTX)
	empty := e.function(m, "empty")
	s1, s2 := e.stream(true), e.stream(true)
	d := e.alloc(16)
	start, end, ev, plain := e.event(true), e.event(true), e.event(true), e.event(false)

	var ms float32
	require.ErrorIs(t, cudaraw.EventElapsedTime(&ms, start, end), cudaraw.CUDA_ERROR_INVALID_HANDLE) // never recorded
	require.NoError(t, cudaraw.EventQuery(ev))                                                       // never recorded: complete

	require.NoError(t, cudaraw.EventRecord(start, s1))
	require.NoError(t, cudatest.SetKernelTime(40*time.Millisecond))
	require.NoError(t, e.launch(empty, [3]uint32{1, 1, 1}, [3]uint32{32, 1, 1}, 0, s1, nil))
	require.NoError(t, cudatest.SetKernelTime(0))
	require.NoError(t, cudaraw.EventRecord(end, s1))
	require.NoError(t, cudaraw.EventRecord(ev, s1))
	require.NoError(t, cudaraw.EventRecord(plain, s1))
	require.ErrorIs(t, cudaraw.StreamQuery(s1), cudaraw.CUDA_ERROR_NOT_READY)
	require.ErrorIs(t, cudaraw.EventQuery(ev), cudaraw.CUDA_ERROR_NOT_READY)
	require.ErrorIs(t, cudaraw.EventElapsedTime(&ms, start, end), cudaraw.CUDA_ERROR_NOT_READY)

	// s2 waits for ev: its memset runs after the kernel.
	require.NoError(t, cudaraw.StreamWaitEvent(s2, ev, 0))
	require.NoError(t, cudaraw.MemsetD8Async(d, 7, 16, s2))
	require.ErrorIs(t, cudaraw.StreamQuery(s2), cudaraw.CUDA_ERROR_NOT_READY)
	require.NoError(t, cudaraw.StreamSynchronize(s2))
	require.NoError(t, cudaraw.EventQuery(ev))
	require.NoError(t, cudaraw.StreamQuery(s1))

	require.NoError(t, cudaraw.EventSynchronize(end))
	require.NoError(t, cudaraw.EventElapsedTime(&ms, start, end))
	assert.GreaterOrEqual(t, ms, float32(35))
	assert.Less(t, ms, float32(5000))
	require.ErrorIs(t, cudaraw.EventElapsedTime(&ms, start, plain), cudaraw.CUDA_ERROR_INVALID_HANDLE) // no timing

	// cuCtxSynchronize waits for every stream.
	require.NoError(t, cudatest.SetKernelTime(20*time.Millisecond))
	require.NoError(t, e.launch(empty, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, s1, nil))
	require.NoError(t, e.launch(empty, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, s2, nil))
	require.NoError(t, cudatest.SetKernelTime(0))
	require.NoError(t, cudaraw.CtxSynchronize())
	require.NoError(t, cudaraw.StreamQuery(s1))
	require.NoError(t, cudaraw.StreamQuery(s2))
	assert.Zero(t, cudatest.Counters().OpsPending)

	// A destroyed stream's queued work still runs; a destroyed event still completes.
	require.NoError(t, cudatest.SetKernelTime(20*time.Millisecond))
	require.NoError(t, e.launch(empty, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, s1, nil))
	require.NoError(t, cudatest.SetKernelTime(0))
	require.NoError(t, cudaraw.EventRecord(ev, s1))
	require.NoError(t, cudaraw.StreamWaitEvent(s2, ev, 0))
	require.NoError(t, cudaraw.MemsetD8Async(d, 8, 16, s1))
	require.NoError(t, cudaraw.StreamDestroy(s1))
	require.NoError(t, cudaraw.EventDestroy(ev))
	require.NoError(t, cudaraw.StreamSynchronize(s2))
	require.Equal(t, fill(16, 8), e.download(d, 16))
}

// The executor interleaves independent streams pseudo-randomly: without a wait, an
// operation of stream B may run before an earlier one of stream A; with
// cuStreamWaitEvent it never does.
func TestInterleaving(t *testing.T) {
	e := setup(t)
	a, b := e.stream(true), e.stream(true)
	d := e.alloc(1)
	ev := e.event(false)
	run := func(seed int64, wait bool) byte {
		require.NoError(t, cudatest.SetSeed(seed))
		require.NoError(t, cudatest.Pause())
		require.NoError(t, cudaraw.MemsetD8Async(d, 1, 1, a))
		if wait {
			require.NoError(t, cudaraw.EventRecord(ev, a))
			require.NoError(t, cudaraw.StreamWaitEvent(b, ev, 0))
		}
		require.NoError(t, cudaraw.MemsetD8Async(d, 2, 1, b))
		require.ErrorIs(t, cudaraw.StreamQuery(a), cudaraw.CUDA_ERROR_NOT_READY)
		require.NoError(t, cudatest.Resume())
		return e.download(d, 1)[0]
	}
	seen := map[byte]int{}
	for seed := range int64(32) {
		seen[run(seed, false)]++
	}
	assert.Positive(t, seen[1], "B's memset never ran first: %v", seen)
	assert.Positive(t, seen[2], "A's memset never ran first: %v", seen)
	for seed := range int64(32) {
		require.Equal(t, byte(2), run(seed, true), "seed %d", seed)
	}
	// The same seed gives the same interleaving.
	first := run(7, false)
	for range 4 {
		require.Equal(t, first, run(7, false))
	}
}

// Work on the legacy default stream waits for the blocking streams, not for the
// non-blocking ones.
func TestLegacyStream(t *testing.T) {
	e := setup(t)
	m := e.module(testPTX)
	empty := e.function(m, "empty")
	blocking, nonBlocking := e.stream(false), e.stream(true)
	d := e.alloc(8)
	require.NoError(t, cudatest.SetKernelTime(30*time.Millisecond))
	require.NoError(t, e.launch(empty, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, blocking, nil))
	require.NoError(t, e.launch(empty, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, nonBlocking, nil))
	require.NoError(t, cudatest.SetKernelTime(0))
	require.NoError(t, cudaraw.MemsetD8Async(d, 1, 8, blocking))
	require.NoError(t, cudaraw.MemsetD8Async(d, 2, 8, 0)) // after the blocking stream's memset
	require.NoError(t, cudaraw.StreamQuery(blocking))
	out := make([]byte, 8)
	require.NoError(t, cudaraw.MemcpyDtoH(unsafe.Pointer(&out[0]), d, 8))
	require.Equal(t, fill(8, 2), out)
	require.NoError(t, cudaraw.StreamSynchronize(cudaraw.CUstream(cudaraw.CU_STREAM_PER_THREAD)))
	require.NoError(t, cudaraw.StreamSynchronize(nonBlocking))
}

func TestDelay(t *testing.T) {
	e := setup(t)
	s := e.stream(true)
	d := e.alloc(4)
	require.NoError(t, cudatest.Delay(uintptr(s), 30*time.Millisecond))
	require.NoError(t, cudaraw.MemsetD8Async(d, 3, 4, s))
	require.ErrorIs(t, cudaraw.StreamQuery(s), cudaraw.CUDA_ERROR_NOT_READY)
	require.NoError(t, cudaraw.StreamSynchronize(s))
	require.Equal(t, fill(4, 3), e.download(d, 4))
	require.Error(t, cudatest.Delay(0x1234, time.Millisecond))
}

func TestHostFunc(t *testing.T) {
	e := setup(t)
	s := e.stream(true)
	counter := e.host(8)
	fn := cudaraw.CUhostFn(cudatest.HostFuncAdd())
	require.NotZero(t, fn)
	for range 3 {
		require.NoError(t, cudaraw.LaunchHostFunc(s, fn, unsafe.Pointer(&counter[0])))
	}
	require.NoError(t, cudaraw.LaunchHostFunc(0, fn, unsafe.Pointer(&counter[0]))) // legacy: run now
	require.NoError(t, cudaraw.StreamSynchronize(s))
	assert.Equal(t, uint64(4), binary.NativeEndian.Uint64(counter))
}

func TestPools(t *testing.T) {
	e := setup(t)
	s := e.stream(true)
	var def, cur cudaraw.CUmemoryPool
	require.NoError(t, cudaraw.DeviceGetDefaultMemPool(&def, e.dev))
	require.NoError(t, cudaraw.DeviceGetMemPool(&cur, e.dev))
	require.Equal(t, def, cur)
	attr := func(p cudaraw.CUmemoryPool, a cudaraw.CUmemPool_attribute) uint64 {
		var v uint64
		require.NoError(t, cudaraw.MemPoolGetAttribute(p, a, unsafe.Pointer(&v)))
		return v
	}
	used0 := attr(def, cudaraw.CU_MEMPOOL_ATTR_USED_MEM_CURRENT)
	var d cudaraw.CUdeviceptr
	require.NoError(t, cudaraw.MemAllocAsync(&d, 1<<20, s))
	require.NoError(t, cudaraw.MemsetD8Async(d, 3, 1<<20, s)) // usable at once
	assert.Equal(t, used0+1<<20, attr(def, cudaraw.CU_MEMPOOL_ATTR_USED_MEM_CURRENT))
	assert.Equal(t, used0+1<<20, attr(def, cudaraw.CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT))
	require.NoError(t, cudaraw.MemFreeAsync(d, s))
	require.NoError(t, cudaraw.StreamSynchronize(s))
	assert.Zero(t, cudatest.Counters().FreePending)
	assert.Equal(t, used0, attr(def, cudaraw.CU_MEMPOOL_ATTR_USED_MEM_CURRENT))
	assert.GreaterOrEqual(t, attr(def, cudaraw.CU_MEMPOOL_ATTR_USED_MEM_HIGH), used0+1<<20)
	zero := uint64(0)
	require.NoError(t, cudaraw.MemPoolSetAttribute(def, cudaraw.CU_MEMPOOL_ATTR_USED_MEM_HIGH, unsafe.Pointer(&zero)))
	assert.Equal(t, used0, attr(def, cudaraw.CU_MEMPOOL_ATTR_USED_MEM_HIGH))
	thr := uint64(math.MaxUint64)
	require.NoError(t, cudaraw.MemPoolSetAttribute(def, cudaraw.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, unsafe.Pointer(&thr)))
	assert.Equal(t, thr, attr(def, cudaraw.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD))
	require.NoError(t, cudaraw.MemPoolTrimTo(def, 0))

	// A device pool of its own, with access for the device.
	props := cudaraw.CUmemPoolProps{AllocType: cudaraw.CU_MEM_ALLOCATION_TYPE_PINNED,
		Location: cudaraw.CUmemLocation{Type: cudaraw.CU_MEM_LOCATION_TYPE_DEVICE, Id: int32(e.dev)}}
	var p cudaraw.CUmemoryPool
	require.NoError(t, cudaraw.MemPoolCreate(&p, &props))
	desc := cudaraw.CUmemAccessDesc{Location: props.Location, Flags: cudaraw.CU_MEM_ACCESS_FLAGS_PROT_READWRITE}
	require.NoError(t, cudaraw.MemPoolSetAccess(p, &desc, 1))
	var flags cudaraw.CUmemAccess_flags
	require.NoError(t, cudaraw.MemPoolGetAccess(&flags, p, &props.Location))
	assert.Equal(t, cudaraw.CU_MEM_ACCESS_FLAGS_PROT_READWRITE, flags)
	require.NoError(t, cudaraw.MemAllocFromPoolAsync(&d, 4096, p, s))
	assert.Equal(t, uint64(4096), attr(p, cudaraw.CU_MEMPOOL_ATTR_USED_MEM_CURRENT))
	require.NoError(t, cudaraw.MemFreeAsync(d, s))

	// A pinned host pool: its memory is host memory the Go side can touch.
	props.Location = cudaraw.CUmemLocation{Type: cudaraw.CU_MEM_LOCATION_TYPE_HOST}
	var hp cudaraw.CUmemoryPool
	require.NoError(t, cudaraw.MemPoolCreate(&hp, &props))
	require.NoError(t, cudaraw.MemAllocFromPoolAsync(&d, 64, hp, s))
	require.NoError(t, cudaraw.MemsetD8Async(d, 6, 64, s))
	require.NoError(t, cudaraw.StreamSynchronize(s))
	assert.Equal(t, fill(64, 6), unsafe.Slice((*byte)(ptr(d)), 64))
	before := cudatest.Counters()
	require.NoError(t, cudaraw.MemFreeAsync(d, s))

	// A managed pool.
	props = cudaraw.CUmemPoolProps{AllocType: cudaraw.CU_MEM_ALLOCATION_TYPE_MANAGED}
	var mp cudaraw.CUmemoryPool
	require.NoError(t, cudaraw.MemPoolCreate(&mp, &props))
	require.NoError(t, cudaraw.MemAllocFromPoolAsync(&d, 64, mp, s))
	assert.Equal(t, before.ManagedAllocs+1, cudatest.Counters().ManagedAllocs)
	require.NoError(t, cudaraw.MemFreeAsync(d, s))
	require.NoError(t, cudaraw.StreamSynchronize(s))
	require.NoError(t, cudaraw.MemPoolDestroy(p))
	require.NoError(t, cudaraw.MemPoolDestroy(hp))
	require.NoError(t, cudaraw.MemPoolDestroy(mp))

	props.AllocType = 7
	require.ErrorIs(t, cudaraw.MemPoolCreate(&p, &props), cudaraw.CUDA_ERROR_INVALID_VALUE)
}

func TestRegisteredMemory(t *testing.T) {
	e := setup(t)
	m := e.module(testPTX)
	empty := e.function(m, "empty")
	s := e.stream(true)
	buf := make([]byte, 8192)
	p := unsafe.Pointer(&buf[0])
	require.NoError(t, cudaraw.MemHostRegister(p, 8192, uint32(cudaraw.CU_MEMHOSTREGISTER_DEVICEMAP)))
	require.ErrorIs(t, cudaraw.MemHostRegister(unsafe.Add(p, 4096), 16, 0), cudaraw.CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
	var dp cudaraw.CUdeviceptr
	require.NoError(t, cudaraw.MemHostGetDevicePointer(&dp, p, 0))
	require.Equal(t, uintptr(p), uintptr(dp))
	d := e.alloc(8192)
	require.NoError(t, cudaraw.MemsetD8(d, 4, 8192))

	// Copies to registered memory are asynchronous: they run in stream order.
	require.NoError(t, cudatest.SetKernelTime(30*time.Millisecond))
	require.NoError(t, e.launch(empty, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, s, nil))
	require.NoError(t, cudatest.SetKernelTime(0))
	require.NoError(t, cudaraw.MemcpyDtoHAsync(p, d, 8192, s))
	require.ErrorIs(t, cudaraw.StreamQuery(s), cudaraw.CUDA_ERROR_NOT_READY)
	require.NoError(t, cudaraw.StreamSynchronize(s))
	require.Equal(t, fill(8192, 4), buf)
	// A registered range used as device memory.
	require.NoError(t, cudaraw.MemsetD8Async(dp+100, 9, 10, s))
	require.NoError(t, cudaraw.StreamSynchronize(s))
	require.Equal(t, fill(10, 9), buf[100:110])

	require.NoError(t, cudaraw.MemHostUnregister(p))
	require.ErrorIs(t, cudaraw.MemHostUnregister(unsafe.Add(p, 8)), cudaraw.CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED)
	// Registered again (Go reuses memory): usable again.
	require.NoError(t, cudaraw.MemHostRegister(p, 4096, 0))
	require.NoError(t, cudaraw.MemsetD8Async(dp, 1, 4096, s))
	require.NoError(t, cudaraw.StreamSynchronize(s))
	require.NoError(t, cudaraw.MemHostUnregister(p))
	assert.Equal(t, byte(1), buf[0])
}

func TestModules(t *testing.T) {
	e := setup(t)
	m := e.module(testPTX)
	params := func(f cudaraw.CUfunction) [][2]uint64 {
		var out [][2]uint64
		for i := uint64(0); ; i++ {
			var off, size uint64
			if err := cudaraw.FuncGetParamInfo(f, i, &off, &size); err != nil {
				require.ErrorIs(t, err, cudaraw.CUDA_ERROR_INVALID_VALUE)
				return out
			}
			out = append(out, [2]uint64{off, size})
		}
	}
	assert.Empty(t, params(e.function(m, "empty")))
	assert.Equal(t, [][2]uint64{{0, 8}, {8, 4}, {16, 8}, {24, 4}}, params(e.function(m, "axpy")))
	assert.Equal(t, [][2]uint64{{0, 1}, {8, 24}, {32, 2}}, params(e.function(m, "mixed")))
	require.Equal(t, e.function(m, "axpy"), e.function(m, "axpy")) // the same handle
	var f cudaraw.CUfunction
	require.ErrorIs(t, cudaraw.ModuleGetFunction(&f, m, cstr("nope")), cudaraw.CUDA_ERROR_NOT_FOUND)
	require.ErrorIs(t, cudaraw.ModuleGetFunction(&f, m, cstr("axp")), cudaraw.CUDA_ERROR_NOT_FOUND)

	f = e.function(m, "axpy")
	var v int32
	require.NoError(t, cudaraw.FuncGetAttribute(&v, cudaraw.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f))
	assert.Equal(t, int32(1024), v)
	require.NoError(t, cudaraw.FuncGetAttribute(&v, cudaraw.CU_FUNC_ATTRIBUTE_NUM_REGS, f))
	assert.Equal(t, int32(32), v)
	require.NoError(t, cudaraw.FuncGetAttribute(&v, cudaraw.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, f))
	assert.Zero(t, v)

	global := func(name string) (cudaraw.CUdeviceptr, uint64, error) {
		var d cudaraw.CUdeviceptr
		var n uint64
		err := cudaraw.ModuleGetGlobal(&d, &n, m, cstr(name))
		return d, n, err
	}
	d, n, err := global("table")
	require.NoError(t, err)
	assert.Equal(t, uint64(40), n)
	require.NoError(t, cudaraw.MemsetD8(d, 1, 40))
	d2, _, _ := global("table")
	assert.Equal(t, d, d2)
	_, n, err = global("scale")
	require.NoError(t, err)
	assert.Equal(t, uint64(4), n)
	_, n, err = global("counter")
	require.NoError(t, err)
	assert.Equal(t, uint64(8), n)
	_, _, err = global("axpy_param_0")
	require.ErrorIs(t, err, cudaraw.CUDA_ERROR_NOT_FOUND)
	// Initial values, as the JIT compiler sets them.
	d, _, err = global("magic")
	require.NoError(t, err)
	assert.Equal(t, uint32(12648430), binary.NativeEndian.Uint32(e.download(d, 4)))
	d, n, err = global("coef")
	require.NoError(t, err)
	require.Equal(t, uint64(12), n)
	got := e.download(d, 12)
	for i, want := range []float32{1.5, 2, -2} {
		assert.Equal(t, want, math.Float32frombits(binary.NativeEndian.Uint32(got[4*i:])))
	}
	d, n, err = global("bytes")
	require.NoError(t, err)
	assert.Equal(t, []byte{1, 2, 0x10, 255, 0, 0}, e.download(d, int(n)))

	// A failing image: CUDA_ERROR_INVALID_PTX, with the JIT error log written.
	jit := unsafe.Slice((*uintptr)(e.scratch), 8)
	logBuf := unsafe.Slice((*byte)(unsafe.Add(e.scratch, 64)), 1024)
	opts := (*[2]cudaraw.CUjit_option)(unsafe.Pointer(&jit[0]))
	opts[0], opts[1] = cudaraw.CU_JIT_ERROR_LOG_BUFFER, cudaraw.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
	jit[2], jit[3] = uintptr(unsafe.Pointer(&logBuf[0])), 1024
	bad := []byte("this is not a kernel\x00")
	var bm cudaraw.CUmodule
	err = cudaraw.ModuleLoadDataEx(&bm, unsafe.Pointer(&bad[0]), 2, &opts[0], (*unsafe.Pointer)(unsafe.Pointer(&jit[2])))
	require.ErrorIs(t, err, cudaraw.CUDA_ERROR_INVALID_PTX)
	assert.Contains(t, gostr(&logBuf[0]), "ptxas fatal")
	assert.Equal(t, uintptr(len(gostr(&logBuf[0]))), jit[3]) // the log's length, written back

	// A cubin: its functions take no parameters.
	elf := make([]byte, 64)
	copy(elf, "\x7fELF\x02\x01\x01")
	require.NoError(t, cudaraw.ModuleLoadData(&bm, unsafe.Pointer(&elf[0])))
	assert.Empty(t, params(e.function(bm, "anything")))
	require.NoError(t, cudaraw.ModuleUnload(bm))
	require.NoError(t, cudaraw.ModuleUnload(m))
}

func TestLaunchRecords(t *testing.T) {
	e := setup(t)
	m := e.module(testPTX)
	axpy, empty := e.function(m, "axpy"), e.function(m, "empty")
	s := e.stream(true)
	d := e.alloc(1024)
	since := cudatest.LaunchCount()

	// extra: one buffer, as the cuda package passes it.
	params := make([]byte, 28)
	binary.NativeEndian.PutUint64(params[0:], uint64(d))
	binary.NativeEndian.PutUint32(params[8:], math.Float32bits(2.5))
	binary.NativeEndian.PutUint64(params[16:], uint64(d+512))
	binary.NativeEndian.PutUint32(params[24:], 256)
	require.NoError(t, e.launch(axpy, [3]uint32{4, 2, 1}, [3]uint32{128, 1, 1}, 1024, s, params))

	// kernelParams: one pointer per parameter.
	arr := unsafe.Slice((*unsafe.Pointer)(e.scratch), 4)
	vals := unsafe.Slice((*byte)(unsafe.Add(e.scratch, 256)), 32)
	copy(vals, params)
	for i, off := range []int{0, 8, 16, 24} {
		arr[i] = unsafe.Pointer(&vals[off])
	}
	require.NoError(t, cudaraw.LaunchKernel(axpy, 1, 1, 1, 32, 2, 2, 0, s, (*unsafe.Pointer)(e.scratch), nil))
	require.NoError(t, e.launch(empty, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, 0, nil))

	// Shapes the driver refuses: no violation, CUDA_ERROR_INVALID_VALUE.
	require.ErrorIs(t, e.launch(empty, [3]uint32{1, 1, 1}, [3]uint32{1025, 1, 1}, 0, s, nil), cudaraw.CUDA_ERROR_INVALID_VALUE)
	require.ErrorIs(t, e.launch(empty, [3]uint32{1, 65536, 1}, [3]uint32{1, 1, 1}, 0, s, nil), cudaraw.CUDA_ERROR_INVALID_VALUE)
	require.ErrorIs(t, e.launch(empty, [3]uint32{0, 1, 1}, [3]uint32{1, 1, 1}, 0, s, nil), cudaraw.CUDA_ERROR_INVALID_VALUE)
	require.ErrorIs(t, e.launch(empty, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 48<<10+1, s, nil), cudaraw.CUDA_ERROR_INVALID_VALUE)
	require.NoError(t, cudaraw.FuncSetAttribute(empty, cudaraw.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 100<<10))
	require.NoError(t, e.launch(empty, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 100<<10, s, nil))
	require.NoError(t, cudaraw.StreamSynchronize(s))

	ls := cudatest.Launches(since)
	require.Len(t, ls, 4)
	assert.Equal(t, since+4, cudatest.LaunchCount())
	l := ls[0]
	assert.Equal(t, since+1, l.Seq)
	assert.Equal(t, "axpy", l.Func)
	assert.Equal(t, [3]uint32{4, 2, 1}, l.Grid)
	assert.Equal(t, [3]uint32{128, 1, 1}, l.Block)
	assert.Equal(t, uint32(1024), l.SharedMem)
	assert.Equal(t, uintptr(s), l.Stream)
	assert.Equal(t, uintptr(e.ctx), l.Context)
	assert.Equal(t, params, l.Params)
	assert.Equal(t, 28, l.ParamSize)
	assert.Equal(t, params, ls[1].Params)
	assert.Equal(t, [3]uint32{32, 2, 2}, ls[1].Block)
	assert.Equal(t, "empty", ls[2].Func)
	assert.Zero(t, ls[2].Stream)
	assert.Empty(t, ls[2].Params)
	assert.Equal(t, uint32(100<<10), ls[3].SharedMem)
	assert.Len(t, cudatest.Launches(since+3), 1)
}

func TestGraphCapture(t *testing.T) {
	e := setup(t)
	m := e.module(testPTX)
	empty := e.function(m, "empty")
	s := e.stream(true)
	d := e.alloc(64)
	require.NoError(t, cudaraw.MemsetD8(d, 0, 64))
	since := cudatest.LaunchCount()

	require.NoError(t, cudaraw.StreamBeginCapture(s, cudaraw.CU_STREAM_CAPTURE_MODE_GLOBAL))
	var st cudaraw.CUstreamCaptureStatus
	require.NoError(t, cudaraw.StreamIsCapturing(s, &st))
	assert.Equal(t, cudaraw.CU_STREAM_CAPTURE_STATUS_ACTIVE, st)
	require.NoError(t, cudaraw.MemsetD8Async(d, 7, 32, s))
	require.NoError(t, e.launch(empty, [3]uint32{2, 1, 1}, [3]uint32{64, 1, 1}, 0, s, nil))
	require.NoError(t, cudaraw.MemsetD8Async(d+32, 8, 32, s))
	var g cudaraw.CUgraph
	require.NoError(t, cudaraw.StreamEndCapture(s, &g))
	require.NoError(t, cudaraw.StreamIsCapturing(s, &st))
	assert.Equal(t, cudaraw.CU_STREAM_CAPTURE_STATUS_NONE, st)
	require.Equal(t, fill(64, 0), e.download(d, 64)) // captured, not run
	assert.Equal(t, since, cudatest.LaunchCount())

	var x cudaraw.CUgraphExec
	require.NoError(t, cudaraw.GraphInstantiateWithFlags(&x, g, 0))
	require.NoError(t, cudaraw.GraphDestroy(g))
	require.NoError(t, cudaraw.GraphLaunch(x, s))
	require.NoError(t, cudaraw.GraphLaunch(x, s))
	require.NoError(t, cudaraw.StreamSynchronize(s))
	require.Equal(t, append(fill(32, 7), fill(32, 8)...), e.download(d, 64))
	assert.Equal(t, since+2, cudatest.LaunchCount())
	require.NoError(t, cudaraw.GraphExecDestroy(x))

	// Synchronizing a capturing stream is refused, and invalidates the capture.
	require.NoError(t, cudaraw.StreamBeginCapture(s, cudaraw.CU_STREAM_CAPTURE_MODE_GLOBAL))
	require.ErrorIs(t, cudaraw.StreamSynchronize(s), cudaraw.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
	require.ErrorIs(t, cudaraw.StreamEndCapture(s, &g), cudaraw.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
}

// Destroying a context waits for its work and destroys everything in it.
func TestContextDestroy(t *testing.T) {
	e := setup(t)
	var c2 cudaraw.CUcontext
	require.NoError(t, cudaraw.CtxCreate(&c2, nil, 0, e.dev))
	before := cudatest.Counters()
	s := e.stream(true)
	_ = e.event(true)
	m := e.module(testPTX)
	empty := e.function(m, "empty")
	_ = e.function(m, "axpy")
	var p cudaraw.CUmemoryPool
	props := cudaraw.CUmemPoolProps{AllocType: cudaraw.CU_MEM_ALLOCATION_TYPE_PINNED,
		Location: cudaraw.CUmemLocation{Type: cudaraw.CU_MEM_LOCATION_TYPE_DEVICE}}
	require.NoError(t, cudaraw.MemPoolCreate(&p, &props))
	_ = e.alloc(1 << 20)
	var pd cudaraw.CUdeviceptr
	require.NoError(t, cudaraw.MemAllocFromPoolAsync(&pd, 4096, p, s))
	_ = e.host(4096)
	var md cudaraw.CUdeviceptr
	require.NoError(t, cudaraw.MemAllocManaged(&md, 4096, uint32(cudaraw.CU_MEM_ATTACH_GLOBAL)))
	buf := make([]byte, 4096)
	require.NoError(t, cudaraw.MemHostRegister(unsafe.Pointer(&buf[0]), 4096, 0))
	require.NoError(t, cudatest.SetKernelTime(30*time.Millisecond))
	require.NoError(t, e.launch(empty, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, s, nil))
	require.NoError(t, cudatest.SetKernelTime(0))
	mid := cudatest.Counters()
	assert.Equal(t, before.Streams+1, mid.Streams)
	assert.Equal(t, before.Modules+1, mid.Modules)
	assert.Equal(t, before.Functions+2, mid.Functions)
	assert.Equal(t, before.Registrations+1, mid.Registrations)
	assert.Equal(t, before.DeviceAllocs+2, mid.DeviceAllocs)

	start := time.Now()
	require.NoError(t, cudaraw.CtxDestroy(c2))
	assert.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond) // waited for the kernel
	after := cudatest.Counters()
	assert.Equal(t, before.Streams, after.Streams)
	assert.Equal(t, before.Events, after.Events)
	assert.Equal(t, before.Modules, after.Modules)
	assert.Equal(t, before.Functions, after.Functions)
	// Memory pools belong to the device (as on the real driver): the pool and its
	// allocation outlive the context.
	assert.Equal(t, before.Pools+1, after.Pools)
	assert.Equal(t, before.Registrations, after.Registrations)
	assert.Equal(t, before.DeviceAllocs+1, after.DeviceAllocs)
	assert.Equal(t, before.DeviceBytes+4096, after.DeviceBytes)
	assert.Equal(t, before.HostAllocs, after.HostAllocs)
	assert.Equal(t, before.ManagedAllocs, after.ManagedAllocs)
	assert.Equal(t, before.Contexts-1, after.Contexts)
	assert.Equal(t, before.StreamsDestroyed+1, after.StreamsDestroyed)
	assert.Zero(t, after.OpsPending)

	// Its objects are destroyed handles now, and its memory freed.
	var cur cudaraw.CUcontext
	require.NoError(t, cudaraw.CtxGetCurrent(&cur))
	require.Equal(t, e.ctx, cur) // popped
	violation(t, "use of destroyed stream", cudaraw.CUDA_ERROR_INVALID_HANDLE, func() error { return cudaraw.StreamQuery(s) })
	violation(t, "destroyed context", cudaraw.CUDA_ERROR_CONTEXT_IS_DESTROYED, func() error { return cudaraw.CtxSetCurrent(c2) })
	// The pool's memory is still there, to be freed in another context.
	require.NoError(t, cudaraw.MemsetD8(pd, 0, 1))
	require.NoError(t, cudaraw.MemFree(pd))
	require.NoError(t, cudaraw.MemPoolDestroy(p))
	end := cudatest.Counters()
	assert.Equal(t, before.Pools, end.Pools)
	assert.Equal(t, before.DeviceAllocs, end.DeviceAllocs)
}

// Many threads use the fake at once (run under the race detector).
func TestConcurrentUse(t *testing.T) {
	e := setup(t)
	m := e.module(testPTX)
	axpy := e.function(m, "axpy")
	const workers, rounds = 8, 300
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- func() error {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				if err := cudaraw.CtxSetCurrent(e.ctx); err != nil {
					return err
				}
				var s cudaraw.CUstream
				if err := cudaraw.StreamCreate(&s, uint32(cudaraw.CU_STREAM_NON_BLOCKING)); err != nil {
					return err
				}
				var ev cudaraw.CUevent
				if err := cudaraw.EventCreate(&ev, uint32(cudaraw.CU_EVENT_DISABLE_TIMING)); err != nil {
					return err
				}
				var scratch unsafe.Pointer // this goroutine's C-side launch arrays
				if err := cudaraw.MemAllocHost(&scratch, 4096); err != nil {
					return err
				}
				out := make([]byte, 256)
				params := make([]byte, 28)
				for i := range rounds {
					var d cudaraw.CUdeviceptr
					if err := cudaraw.MemAllocAsync(&d, 256, s); err != nil {
						return err
					}
					v := byte(w*rounds + i)
					if err := cudaraw.MemsetD8Async(d, v, 256, s); err != nil {
						return err
					}
					binary.NativeEndian.PutUint64(params, uint64(d))
					if err := launchWith(scratch, axpy, [3]uint32{1, 1, 1}, [3]uint32{32, 1, 1}, 0, s, params); err != nil {
						return err
					}
					if err := cudaraw.EventRecord(ev, s); err != nil {
						return err
					}
					if err := cudaraw.StreamWaitEvent(s, ev, 0); err != nil {
						return err
					}
					if err := cudaraw.MemcpyDtoHAsync(unsafe.Pointer(&out[0]), d, 256, s); err != nil {
						return err
					}
					if !bytes.Equal(out, fill(256, v)) {
						return assert.AnError
					}
					if err := cudaraw.MemFreeAsync(d, s); err != nil {
						return err
					}
					_ = cudaraw.StreamQuery(s)
				}
				if err := cudaraw.StreamSynchronize(s); err != nil {
					return err
				}
				if err := cudaraw.EventDestroy(ev); err != nil {
					return err
				}
				if err := cudaraw.MemFreeHost(scratch); err != nil {
					return err
				}
				return cudaraw.StreamDestroy(s)
			}()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}
