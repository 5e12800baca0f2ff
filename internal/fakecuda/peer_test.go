package fakecuda_test

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/internal/fakecuda"
)

// Two devices (FAKECUDA_DEVICES=2): peer queries, peer access per context pair and
// per pool, peer copies without peer access, and kernels that use another device's
// memory, a violation without access.
func TestPeerAccess(t *testing.T) {
	if fakecuda.Active() {
		fakecuda.Subprocess(t, map[string]string{"FAKECUDA_DEVICES": "2"})
		return
	}
	if !fakecuda.Strict() {
		t.Skip("needs the strict fake driver (run through fakecuda.Subprocess with two devices)")
	}
	e := newEnv(t)
	var dev1 cuda.CUdevice
	require.NoError(t, cuda.DeviceGet(&dev1, 1))
	var ctx1 cuda.CUcontext
	require.NoError(t, cuda.CtxCreate(&ctx1, nil, 0, dev1)) // pushed: current
	t.Cleanup(func() { assert.NoError(t, cuda.CtxDestroy(ctx1)) })
	mem1 := e.alloc(64) // in ctx1, on device 1
	var pool1 cuda.CUmemoryPool
	require.NoError(t, cuda.DeviceGetDefaultMemPool(&pool1, dev1))
	var pooled1 cuda.CUdeviceptr
	require.NoError(t, cuda.MemAllocFromPoolAsync(&pooled1, 64, pool1, 0))
	var cur cuda.CUcontext
	require.NoError(t, cuda.CtxPopCurrent(&cur))
	require.Equal(t, ctx1, cur)
	require.NoError(t, cuda.CtxSetCurrent(e.ctx))

	e.run("queries", func(t *testing.T) {
		var can int32
		require.NoError(t, cuda.DeviceCanAccessPeer(&can, e.dev, dev1))
		assert.EqualValues(t, 1, can)
		require.NoError(t, cuda.DeviceCanAccessPeer(&can, e.dev, e.dev))
		assert.EqualValues(t, 0, can, "a device is not its own peer")
		var v int32
		require.NoError(t, cuda.DeviceGetP2PAttribute(&v, cuda.CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, e.dev, dev1))
		assert.EqualValues(t, 1, v)
		require.NoError(t, cuda.DeviceGetP2PAttribute(&v, cuda.CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK, dev1, e.dev))
		assert.EqualValues(t, 0, v)
		assert.ErrorIs(t, cuda.DeviceGetP2PAttribute(&v, cuda.CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, e.dev, e.dev),
			cuda.CUDA_ERROR_INVALID_DEVICE)

		require.NoError(t, fakecuda.Control("peer", 1, 0))
		defer func() { require.NoError(t, fakecuda.Control("peer", 1, 1)) }()
		require.NoError(t, cuda.DeviceCanAccessPeer(&can, e.dev, dev1))
		assert.EqualValues(t, 0, can, "device 1 cut off")
		require.NoError(t, cuda.DeviceGetP2PAttribute(&v, cuda.CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, e.dev, dev1))
		assert.EqualValues(t, 0, v)
		assert.ErrorIs(t, cuda.CtxEnablePeerAccess(ctx1, 0), cuda.CUDA_ERROR_PEER_ACCESS_UNSUPPORTED)
	})

	m := e.module(testPTX)
	axpy := e.function(m, "axpy")
	one := [3]uint32{1, 1, 1}
	params := func(p cuda.CUdeviceptr) []byte {
		b := make([]byte, 28)
		binary.NativeEndian.PutUint64(b, uint64(p))
		return b
	}
	e.run("context peer access", func(t *testing.T) {
		violation(t, "launch on device 0 with memory of device 1 without peer access", 0,
			func() error { return e.launch(axpy, one, one, 0, 0, params(mem1)) })
		require.NoError(t, cuda.CtxEnablePeerAccess(ctx1, 0))
		assert.ErrorIs(t, cuda.CtxEnablePeerAccess(ctx1, 0), cuda.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
		require.NoError(t, e.launch(axpy, one, one, 0, 0, params(mem1)))
		// Context peer access does not reach pool memory.
		violation(t, "without peer access", 0, func() error { return e.launch(axpy, one, one, 0, 0, params(pooled1)) })
		require.NoError(t, cuda.CtxDisablePeerAccess(ctx1))
		assert.ErrorIs(t, cuda.CtxDisablePeerAccess(ctx1), cuda.CUDA_ERROR_PEER_ACCESS_NOT_ENABLED)
		violation(t, "without peer access", 0, func() error { return e.launch(axpy, one, one, 0, 0, params(mem1)) })
		require.NoError(t, cuda.CtxSynchronize())
	})
	e.run("pool access", func(t *testing.T) {
		access := cuda.CUmemAccessDesc{Location: cuda.CUmemLocation{Type: cuda.CU_MEM_LOCATION_TYPE_DEVICE, Id: int32(e.dev)},
			Flags: cuda.CU_MEM_ACCESS_FLAGS_PROT_READWRITE}
		require.NoError(t, cuda.MemPoolSetAccess(pool1, &access, 1))
		require.NoError(t, e.launch(axpy, one, one, 0, 0, params(pooled1)))
		require.NoError(t, cuda.CtxSynchronize())
		access.Flags = cuda.CU_MEM_ACCESS_FLAGS_PROT_NONE
		require.NoError(t, cuda.MemPoolSetAccess(pool1, &access, 1))
		violation(t, "without peer access", 0, func() error { return e.launch(axpy, one, one, 0, 0, params(pooled1)) })
		require.NoError(t, cuda.CtxSynchronize())

		require.NoError(t, fakecuda.Control("peer", 0, 0))
		defer func() { require.NoError(t, fakecuda.Control("peer", 0, 1)) }()
		access.Flags = cuda.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
		assert.ErrorIs(t, cuda.MemPoolSetAccess(pool1, &access, 1), cuda.CUDA_ERROR_INVALID_DEVICE,
			"device 0 cut off from its peers")
	})
	e.run("peer copies", func(t *testing.T) {
		// No peer access needed: the bytes move both ways, in stream order.
		mem0 := e.alloc(64)
		src := e.host(64)
		for i := range src {
			src[i] = byte(i + 1)
		}
		require.NoError(t, cuda.MemcpyHtoD(mem0, unsafe.Pointer(&src[0]), 64))
		s := e.stream(true)
		require.NoError(t, cuda.MemcpyPeerAsync(mem1, ctx1, mem0, e.ctx, 64, s))
		require.NoError(t, cuda.MemcpyPeerAsync(pooled1, ctx1, mem1, ctx1, 64, s))
		require.NoError(t, cuda.MemsetD8Async(mem0, 0, 64, s))
		require.NoError(t, cuda.MemcpyPeerAsync(mem0, e.ctx, pooled1, ctx1, 64, s))
		assert.Equal(t, src, e.download(mem0, 64))
		var x cuda.CUcontext
		require.NoError(t, cuda.CtxCreate(&x, nil, 0, e.dev))
		require.NoError(t, cuda.CtxDestroy(x))
		require.NoError(t, cuda.CtxSetCurrent(e.ctx))
		violation(t, "use of destroyed context", cuda.CUDA_ERROR_CONTEXT_IS_DESTROYED,
			func() error { return cuda.MemcpyPeerAsync(mem1, x, mem0, e.ctx, 64, s) })
		require.NoError(t, cuda.StreamDestroy(s))
	})
	e.run("event of another context", func(t *testing.T) {
		ev := e.event(false) // of ctx0
		require.NoError(t, cuda.CtxPushCurrent(ctx1))
		s1 := e.stream(true)
		violation(t, "recorded on stream", cuda.CUDA_ERROR_INVALID_HANDLE, func() error { return cuda.EventRecord(ev, s1) })
		// Waiting for an event of another context is allowed.
		ev1 := e.event(false)
		require.NoError(t, cuda.EventRecord(ev1, s1))
		require.NoError(t, cuda.CtxPopCurrent(&cur))
		s0 := e.stream(true)
		require.NoError(t, cuda.StreamWaitEvent(s0, ev1, 0))
		require.NoError(t, cuda.StreamSynchronize(s0))
		require.NoError(t, cuda.StreamDestroy(s0))
		require.NoError(t, cuda.EventDestroy(ev))
		require.NoError(t, cuda.EventDestroy(ev1))
		require.NoError(t, cuda.StreamDestroy(s1))
	})
	require.NoError(t, cuda.MemFreeAsync(pooled1, 0))
	require.NoError(t, cuda.CtxSynchronize())
}
