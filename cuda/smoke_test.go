package cuda_test

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
)

// TestSmokeDevice reads the driver version and the device's name, memory and
// compute capability through the generated bindings.
func TestSmokeDevice(t *testing.T) {
	g := cudatest.Require(t)

	var ver int32
	require.NoError(t, cudaraw.DriverGetVersion(&ver))
	t.Logf("driver API version %d.%d (%d); headers CUDA_VERSION %d", ver/1000, ver%1000/10, ver, cudaraw.CUDA_VERSION)
	assert.GreaterOrEqual(t, ver, int32(12000), "driver older than CUDA 12")

	var n int32
	require.NoError(t, cudaraw.DeviceGetCount(&n))
	assert.Positive(t, n)

	name := make([]byte, 256)
	require.NoError(t, cudaraw.DeviceGetName(&name[0], int32(len(name)), g.Device))
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	assert.NotEmpty(t, name)

	var total uint64
	require.NoError(t, cudaraw.DeviceTotalMem(&total, g.Device))
	assert.Greater(t, total, uint64(1)<<30, "total memory below 1 GiB")

	attr := func(a cudaraw.CUdevice_attribute) int32 {
		var v int32
		require.NoError(t, cudaraw.DeviceGetAttribute(&v, a, g.Device), "cuDeviceGetAttribute(%v)", a)
		return v
	}
	major := attr(cudaraw.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
	minor := attr(cudaraw.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
	sms := attr(cudaraw.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
	assert.GreaterOrEqual(t, major, int32(5))
	assert.Equal(t, int32(32), attr(cudaraw.CU_DEVICE_ATTRIBUTE_WARP_SIZE))
	assert.Positive(t, sms)

	var free, tot uint64
	require.NoError(t, cudaraw.MemGetInfo(&free, &tot))
	assert.Equal(t, total, tot)
	assert.LessOrEqual(t, free, tot)

	var cur cudaraw.CUcontext
	require.NoError(t, cudaraw.CtxGetCurrent(&cur))
	assert.Equal(t, g.Context, cur, "Require's primary context is current")

	t.Logf("%d device(s); device 0: %s, compute capability %d.%d, %d SMs, %.1f GiB (%.1f GiB free)",
		n, name, major, minor, sms, float64(total)/(1<<30), float64(free)/(1<<30))
}

// TestSmokeMemory copies random data to the device and back, device to
// device, and fills memory with cuMemsetD32.
func TestSmokeMemory(t *testing.T) {
	g := cudatest.Require(t)
	const n = 1 << 20
	src := cudatest.RandFloat32s(cudatest.Rand(1), n)

	d := cudatest.Float32sToDevice(t, g, src)
	got := cudatest.Float32sFromDevice(t, d, n)
	require.Equal(t, src, got, "host → device → host round trip")

	d2 := cudatest.Alloc[float32](t, g, n)
	require.NoError(t, cudaraw.MemcpyDtoD(d2, d, n*4))
	require.Equal(t, src, cudatest.Float32sFromDevice(t, d2, n), "device → device copy")

	const pattern = 0xdeadbeef
	require.NoError(t, cudaraw.MemsetD32(d2, pattern, n))
	words := cudatest.FromDevice[uint32](t, d2, n)
	for i, w := range words {
		if w != pattern {
			t.Fatalf("word %d after cuMemsetD32 = %#x, want %#x", i, w, pattern)
		}
	}
	// cuMemsetD32 with a float's bits: the float view reads it back.
	one := float32(1.5)
	require.NoError(t, cudaraw.MemsetD32(d2, math.Float32bits(one), n))
	for i, v := range cudatest.Float32sFromDevice(t, d2, n) {
		if v != one {
			t.Fatalf("element %d = %v, want %v", i, v, one)
		}
	}
}

// TestSmokeStatusError checks that a failing driver call returns the Result
// as an error that matches its sentinel.
func TestSmokeStatusError(t *testing.T) {
	cudatest.Require(t)
	var d cudaraw.CUdeviceptr
	err := cudaraw.MemAlloc(&d, 0) // zero bytes is CUDA_ERROR_INVALID_VALUE
	require.Error(t, err)
	assert.True(t, errors.Is(err, cudaraw.ErrInvalidValue), "got %v", err)
	var r cudaraw.Result
	require.True(t, errors.As(err, &r))
	assert.Equal(t, cudaraw.CUDA_ERROR_INVALID_VALUE, r)
	assert.Contains(t, err.Error(), "CUDA_ERROR_INVALID_VALUE")
}
