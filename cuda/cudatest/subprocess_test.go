package cudatest_test

import (
	"os"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/dl"
)

// A symbol left out of the build is missing for the Go side, as with an older
// driver.
func TestMissingSymbol(t *testing.T) {
	if !child(t, map[string]string{cudatest.EnvOmit: "cuMemsetD8Async,cuStreamQuery"}) {
		return
	}
	require.True(t, cudatest.Strict())
	e := newEnv(t)
	d := e.alloc(16)
	s := e.stream(true)
	err := cudaraw.MemsetD8Async(d, 1, 16, s)
	require.ErrorIs(t, err, dl.ErrSymbolNotFound)
	assert.Contains(t, err.Error(), "cuMemsetD8Async")
	require.ErrorIs(t, cudaraw.StreamQuery(s), dl.ErrSymbolNotFound)
	require.NoError(t, cudaraw.MemsetD8(d, 1, 16)) // the others are there
	require.NoError(t, cudaraw.StreamSynchronize(s))
}

// Without a driver the library is not found: the no-driver paths run for real.
func TestNoDriver(t *testing.T) {
	if os.Getenv(cudatest.EnvChild) == "" {
		if !cudatest.Active() {
			t.Skip("needs the strict fake driver")
		}
		cudatest.RunWithoutDriver(t)
		return
	}
	require.False(t, cudatest.FakeLoaded())
	require.ErrorIs(t, cudaraw.Init(0), dl.ErrLibraryNotFound)
	n, _ := cudatest.Violations()
	require.Zero(t, n)
	require.ErrorIs(t, cudatest.SetSeed(1), cudatest.ErrNotLoaded)
}

// Fast mode, for the benchmarks: everything succeeds, nothing is tracked.
func TestFastMode(t *testing.T) {
	if !child(t, map[string]string{"FAKECUDA_MODE": "fast"}) {
		return
	}
	require.True(t, cudatest.FakeLoaded())
	require.False(t, cudatest.Strict())
	require.NoError(t, cudaraw.Init(0))
	var dev cudaraw.CUdevice
	require.NoError(t, cudaraw.DeviceGet(&dev, 0))
	var ctx cudaraw.CUcontext
	require.NoError(t, cudaraw.DevicePrimaryCtxRetain(&ctx, dev))
	require.NoError(t, cudaraw.CtxSetCurrent(ctx))
	var s cudaraw.CUstream
	require.NoError(t, cudaraw.StreamCreate(&s, 0))
	var d cudaraw.CUdeviceptr
	require.NoError(t, cudaraw.MemAllocAsync(&d, 1<<40, s)) // nothing is allocated
	require.NotZero(t, d)
	require.NoError(t, cudaraw.MemsetD8Async(d, 1, 1<<40, s))
	require.NoError(t, cudaraw.MemFreeAsync(d, s))
	require.NoError(t, cudaraw.MemFreeAsync(d, s)) // nothing is checked
	img := append([]byte(testPTX), 0)
	var m cudaraw.CUmodule
	require.NoError(t, cudaraw.ModuleLoadData(&m, unsafe.Pointer(&img[0])))
	var f cudaraw.CUfunction
	require.NoError(t, cudaraw.ModuleGetFunction(&f, m, cstr("axpy")))
	var off, size uint64
	require.NoError(t, cudaraw.FuncGetParamInfo(f, 2, &off, &size))
	assert.Equal(t, [2]uint64{16, 8}, [2]uint64{off, size})
	require.NoError(t, cudaraw.LaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, nil, nil))
	require.NoError(t, cudaraw.StreamSynchronize(s))
	require.NoError(t, cudaraw.StreamDestroy(s))
	require.NoError(t, cudaraw.StreamDestroy(s))
	assert.Zero(t, cudatest.LaunchCount())
	n, _ := cudatest.Violations()
	assert.Zero(t, n)
}

// FAKECUDA_DEVICES and FAKECUDA_MEMORY_BYTES, in a fresh process (no primary
// context retained yet).
func TestDevices(t *testing.T) {
	if !child(t, map[string]string{"FAKECUDA_DEVICES": "8", "FAKECUDA_MEMORY_BYTES": "1G"}) {
		return
	}
	require.True(t, cudatest.Strict())
	var d cudaraw.CUdevice
	require.ErrorIs(t, cudaraw.DeviceGet(&d, 0), cudaraw.CUDA_ERROR_NOT_INITIALIZED)
	require.NoError(t, cudaraw.Init(0))
	var n int32
	require.NoError(t, cudaraw.DeviceGetCount(&n))
	require.Equal(t, int32(8), n)
	require.NoError(t, cudaraw.DeviceGet(&d, 7))
	require.ErrorIs(t, cudaraw.DeviceGet(&d, 8), cudaraw.CUDA_ERROR_INVALID_DEVICE)
	var total uint64
	require.NoError(t, cudaraw.DeviceTotalMem(&total, 7))
	require.Equal(t, uint64(1<<30), total)

	lockThread(t)
	var ctx cudaraw.CUcontext
	require.NoError(t, cudaraw.DevicePrimaryCtxRetain(&ctx, 5))
	require.NoError(t, cudaraw.CtxSetCurrent(ctx))
	var cd cudaraw.CUdevice
	require.NoError(t, cudaraw.CtxGetDevice(&cd))
	require.Equal(t, cudaraw.CUdevice(5), cd)
	var p cudaraw.CUdeviceptr
	require.NoError(t, cudaraw.MemAlloc(&p, 1<<29))
	require.ErrorIs(t, cudaraw.MemAlloc(&p, 1<<30), cudaraw.CUDA_ERROR_OUT_OF_MEMORY)
	// The last release resets the primary context: its memory is freed, and the
	// handle is a destroyed context until retained again.
	require.NoError(t, cudaraw.DevicePrimaryCtxRelease(5))
	assert.Zero(t, cudatest.Counters().DeviceAllocs)
	before, _ := cudatest.Violations()
	require.ErrorIs(t, cudaraw.MemAlloc(&p, 8), cudaraw.CUDA_ERROR_CONTEXT_IS_DESTROYED)
	require.ErrorIs(t, cudaraw.DevicePrimaryCtxRelease(5), cudaraw.CUDA_ERROR_INVALID_CONTEXT)
	after, text := cudatest.Violations()
	require.Equal(t, before+2, after, text)
	assert.Contains(t, text, "which is not retained")
	cudatest.ResetViolations()
	var again cudaraw.CUcontext
	require.NoError(t, cudaraw.DevicePrimaryCtxRetain(&again, 5))
	require.Equal(t, ctx, again)
	require.NoError(t, cudaraw.MemAlloc(&p, 8))
	require.NoError(t, cudaraw.DevicePrimaryCtxReset(5))
	require.NoError(t, cudaraw.CtxSetCurrent(0))
}
