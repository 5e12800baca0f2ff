package cudatest_test

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
)

// Two devices (FAKECUDA_DEVICES=2): peer queries, peer access per context pair and
// per pool, peer copies without peer access, and kernels that use another device's
// memory, a violation without access.
func TestPeerAccess(t *testing.T) {
	if cudatest.Active() {
		cudatest.Subprocess(t, map[string]string{"FAKECUDA_DEVICES": "2"})
		return
	}
	if !cudatest.Strict() {
		t.Skip("needs the strict fake driver (run through cudatest.Subprocess with two devices)")
	}
	e := newEnv(t)
	var dev1 cudaraw.CUdevice
	require.NoError(t, cudaraw.DeviceGet(&dev1, 1))
	var ctx1 cudaraw.CUcontext
	require.NoError(t, cudaraw.CtxCreate(&ctx1, nil, 0, dev1)) // pushed: current
	t.Cleanup(func() { assert.NoError(t, cudaraw.CtxDestroy(ctx1)) })
	mem1 := e.alloc(64) // in ctx1, on device 1
	var pool1 cudaraw.CUmemoryPool
	require.NoError(t, cudaraw.DeviceGetDefaultMemPool(&pool1, dev1))
	var pooled1 cudaraw.CUdeviceptr
	require.NoError(t, cudaraw.MemAllocFromPoolAsync(&pooled1, 64, pool1, 0))
	var cur cudaraw.CUcontext
	require.NoError(t, cudaraw.CtxPopCurrent(&cur))
	require.Equal(t, ctx1, cur)
	require.NoError(t, cudaraw.CtxSetCurrent(e.ctx))

	e.run("queries", func(t *testing.T) {
		var can int32
		require.NoError(t, cudaraw.DeviceCanAccessPeer(&can, e.dev, dev1))
		assert.EqualValues(t, 1, can)
		require.NoError(t, cudaraw.DeviceCanAccessPeer(&can, e.dev, e.dev))
		assert.EqualValues(t, 0, can, "a device is not its own peer")
		var v int32
		require.NoError(t, cudaraw.DeviceGetP2PAttribute(&v, cudaraw.CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, e.dev, dev1))
		assert.EqualValues(t, 1, v)
		require.NoError(t, cudaraw.DeviceGetP2PAttribute(&v, cudaraw.CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK, dev1, e.dev))
		assert.EqualValues(t, 0, v)
		assert.ErrorIs(t, cudaraw.DeviceGetP2PAttribute(&v, cudaraw.CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, e.dev, e.dev),
			cudaraw.CUDA_ERROR_INVALID_DEVICE)

		require.NoError(t, cudatest.Control("peer", 1, 0))
		defer func() { require.NoError(t, cudatest.Control("peer", 1, 1)) }()
		require.NoError(t, cudaraw.DeviceCanAccessPeer(&can, e.dev, dev1))
		assert.EqualValues(t, 0, can, "device 1 cut off")
		require.NoError(t, cudaraw.DeviceGetP2PAttribute(&v, cudaraw.CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, e.dev, dev1))
		assert.EqualValues(t, 0, v)
		assert.ErrorIs(t, cudaraw.CtxEnablePeerAccess(ctx1, 0), cudaraw.CUDA_ERROR_PEER_ACCESS_UNSUPPORTED)
	})

	m := e.module(testPTX)
	axpy := e.function(m, "axpy")
	one := [3]uint32{1, 1, 1}
	params := func(p cudaraw.CUdeviceptr) []byte {
		b := make([]byte, 28)
		binary.NativeEndian.PutUint64(b, uint64(p))
		return b
	}
	e.run("context peer access", func(t *testing.T) {
		violation(t, "launch on device 0 with memory of device 1 without peer access", 0,
			func() error { return e.launch(axpy, one, one, 0, 0, params(mem1)) })
		require.NoError(t, cudaraw.CtxEnablePeerAccess(ctx1, 0))
		assert.ErrorIs(t, cudaraw.CtxEnablePeerAccess(ctx1, 0), cudaraw.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
		require.NoError(t, e.launch(axpy, one, one, 0, 0, params(mem1)))
		// Context peer access does not reach pool memory.
		violation(t, "without peer access", 0, func() error { return e.launch(axpy, one, one, 0, 0, params(pooled1)) })
		require.NoError(t, cudaraw.CtxDisablePeerAccess(ctx1))
		assert.ErrorIs(t, cudaraw.CtxDisablePeerAccess(ctx1), cudaraw.CUDA_ERROR_PEER_ACCESS_NOT_ENABLED)
		violation(t, "without peer access", 0, func() error { return e.launch(axpy, one, one, 0, 0, params(mem1)) })
		require.NoError(t, cudaraw.CtxSynchronize())
	})
	e.run("pool access", func(t *testing.T) {
		access := cudaraw.CUmemAccessDesc{Location: cudaraw.CUmemLocation{Type: cudaraw.CU_MEM_LOCATION_TYPE_DEVICE, Id: int32(e.dev)},
			Flags: cudaraw.CU_MEM_ACCESS_FLAGS_PROT_READWRITE}
		require.NoError(t, cudaraw.MemPoolSetAccess(pool1, &access, 1))
		require.NoError(t, e.launch(axpy, one, one, 0, 0, params(pooled1)))
		require.NoError(t, cudaraw.CtxSynchronize())
		access.Flags = cudaraw.CU_MEM_ACCESS_FLAGS_PROT_NONE
		require.NoError(t, cudaraw.MemPoolSetAccess(pool1, &access, 1))
		violation(t, "without peer access", 0, func() error { return e.launch(axpy, one, one, 0, 0, params(pooled1)) })
		require.NoError(t, cudaraw.CtxSynchronize())

		require.NoError(t, cudatest.Control("peer", 0, 0))
		defer func() { require.NoError(t, cudatest.Control("peer", 0, 1)) }()
		access.Flags = cudaraw.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
		assert.ErrorIs(t, cudaraw.MemPoolSetAccess(pool1, &access, 1), cudaraw.CUDA_ERROR_INVALID_DEVICE,
			"device 0 cut off from its peers")
	})
	e.run("peer copies", func(t *testing.T) {
		// No peer access needed: the bytes move both ways, in stream order.
		mem0 := e.alloc(64)
		src := e.host(64)
		for i := range src {
			src[i] = byte(i + 1)
		}
		require.NoError(t, cudaraw.MemcpyHtoD(mem0, unsafe.Pointer(&src[0]), 64))
		s := e.stream(true)
		require.NoError(t, cudaraw.MemcpyPeerAsync(mem1, ctx1, mem0, e.ctx, 64, s))
		require.NoError(t, cudaraw.MemcpyPeerAsync(pooled1, ctx1, mem1, ctx1, 64, s))
		require.NoError(t, cudaraw.MemsetD8Async(mem0, 0, 64, s))
		require.NoError(t, cudaraw.MemcpyPeerAsync(mem0, e.ctx, pooled1, ctx1, 64, s))
		assert.Equal(t, src, e.download(mem0, 64))
		var x cudaraw.CUcontext
		require.NoError(t, cudaraw.CtxCreate(&x, nil, 0, e.dev))
		require.NoError(t, cudaraw.CtxDestroy(x))
		require.NoError(t, cudaraw.CtxSetCurrent(e.ctx))
		violation(t, "use of destroyed context", cudaraw.CUDA_ERROR_CONTEXT_IS_DESTROYED,
			func() error { return cudaraw.MemcpyPeerAsync(mem1, x, mem0, e.ctx, 64, s) })
		require.NoError(t, cudaraw.StreamDestroy(s))
	})
	e.run("event of another context", func(t *testing.T) {
		ev := e.event(false) // of ctx0
		require.NoError(t, cudaraw.CtxPushCurrent(ctx1))
		s1 := e.stream(true)
		violation(t, "recorded on stream", cudaraw.CUDA_ERROR_INVALID_HANDLE, func() error { return cudaraw.EventRecord(ev, s1) })
		// Waiting for an event of another context is allowed.
		ev1 := e.event(false)
		require.NoError(t, cudaraw.EventRecord(ev1, s1))
		require.NoError(t, cudaraw.CtxPopCurrent(&cur))
		s0 := e.stream(true)
		require.NoError(t, cudaraw.StreamWaitEvent(s0, ev1, 0))
		require.NoError(t, cudaraw.StreamSynchronize(s0))
		require.NoError(t, cudaraw.StreamDestroy(s0))
		require.NoError(t, cudaraw.EventDestroy(ev))
		require.NoError(t, cudaraw.EventDestroy(ev1))
		require.NoError(t, cudaraw.StreamDestroy(s1))
	})
	require.NoError(t, cudaraw.MemFreeAsync(pooled1, 0))
	require.NoError(t, cudaraw.CtxSynchronize())
}
