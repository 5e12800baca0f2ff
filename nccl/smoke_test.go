package nccl_test

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/nccl/ncclraw"
)

// These tests need libnccl.so.2 (TestVersion, TestStatusFromLibrary) and a GPU
// (TestSmokeAllReduce): they skip in CI, and run on the GPU machine.

// TestVersion checks that the library is at least the version of the headers the
// bindings were generated from (NCCL 2.28.3), of the same major version as the soname.
func TestVersion(t *testing.T) {
	cudatest.RequireLibrary(t, ncclraw.Library())
	var v int32
	require.NoError(t, ncclraw.GetVersion(&v))
	t.Logf("NCCL version %d (headers %d)", v, ncclraw.NCCL_VERSION_CODE)
	assert.GreaterOrEqual(t, v, int32(ncclraw.NCCL_VERSION_CODE))
	assert.GreaterOrEqual(t, v, int32(22803))
	assert.Equal(t, int32(ncclraw.NCCL_MAJOR), v/10000, "NCCL_VERSION(X,Y,Z) is X*10000+Y*100+Z from 2.9 on")
}

// TestStatusFromLibrary checks that a status NCCL returns comes back as a typed Result
// and that NCCL's own text for it is reachable: NCCL checks a communicator argument
// before it uses it, so a NULL one is ncclInvalidArgument.
func TestStatusFromLibrary(t *testing.T) {
	cudatest.RequireLibrary(t, ncclraw.Library())
	var n int32
	err := ncclraw.CommCount(0, &n)
	require.Error(t, err)
	assert.ErrorIs(t, err, ncclraw.ErrInvalidArgument)
	var r ncclraw.Result
	require.True(t, errors.As(err, &r), "got %T %v", err, err)
	assert.Equal(t, ncclraw.NcclInvalidArgument, r)

	msg, err := ncclraw.GetErrorString(ncclraw.NcclInvalidArgument)
	require.NoError(t, err)
	assert.Contains(t, msg, "invalid argument")
	msg, err = ncclraw.GetErrorString(ncclraw.NcclSuccess)
	require.NoError(t, err)
	assert.Equal(t, "no error", msg)
}

// TestSmokeAllReduce makes a one-rank communicator on device 0 with ncclCommInitAll
// through the raw layer, checks what it reports, sums a float32 buffer over its one
// rank (the result is the input) on a stream of the cuda package, and destroys it.
func TestSmokeAllReduce(t *testing.T) {
	ctx, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, ncclraw.Library())

	dev := int32(ctx.Device())
	var comm ncclraw.NcclComm
	require.NoError(t, ctx.Locked(func() error { return ncclraw.CommInitAll(&comm, 1, &dev) }))
	require.NotZero(t, comm)
	destroyed := false
	t.Cleanup(func() { // when the test fails before its own destroy
		if !destroyed {
			_ = ctx.Locked(func() error { return ncclraw.CommDestroy(comm) })
		}
	})

	var count, cuDev, rank int32
	require.NoError(t, ncclraw.CommCount(comm, &count))
	require.NoError(t, ncclraw.CommCuDevice(comm, &cuDev))
	require.NoError(t, ncclraw.CommUserRank(comm, &rank))
	assert.Equal(t, int32(1), count)
	assert.Equal(t, dev, cuDev)
	assert.Equal(t, int32(0), rank)

	in := []float32{1, -2.5, 3, 0.125, 1e6, -7, 42}
	n := len(in)
	send, err := cuda.AllocFor[float32](s, n)
	require.NoError(t, err)
	defer send.Close()
	recv, err := cuda.AllocFor[float32](s, n)
	require.NoError(t, err)
	defer recv.Close()
	require.NoError(t, cuda.CopyToDeviceAsync(s, send, in))
	require.NoError(t, recv.Memset32Async(s, 0x7fc00000)) // NaN: the all-reduce must write every value
	ps, err := cuda.DevicePtr[float32](send)
	require.NoError(t, err)
	pr, err := cuda.DevicePtr[float32](recv)
	require.NoError(t, err)
	require.NoError(t, cuda.Enqueue(s, func(_ cudaraw.CUcontext, h cudaraw.CUstream) error {
		return ctx.Locked(func() error {
			return ncclraw.AllReduce(unsafe.Pointer(ps), unsafe.Pointer(pr), uint64(n), ncclraw.NcclFloat32, ncclraw.NcclSum, comm, h)
		})
	}, cuda.Reads(send), cuda.Writes(recv)))
	out := make([]float32, n)
	require.NoError(t, cuda.CopyFromDeviceAsync(s, out, recv))
	require.NoError(t, s.Synchronize())
	assert.Equal(t, in, out, "a sum over one rank is the input")

	var async ncclraw.Result
	require.NoError(t, ncclraw.CommGetAsyncError(comm, &async))
	assert.Equal(t, ncclraw.NcclSuccess, async)

	destroyed = true
	require.NoError(t, ctx.Locked(func() error { return ncclraw.CommDestroy(comm) }))
}
