package cuda_test

import (
	"testing"
	"unsafe"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/tools/bench/callbench"
	"github.com/stretchr/testify/require"
)

// BenchmarkCallOverhead puts a call through the generated binding beside the same
// call made from C in the same process: the difference is the binding's cost (cgo's
// own floor is about 50 ns; the goal is at most 60 ns over C).
func BenchmarkCallOverhead(b *testing.B) {
	cudatest.Require(b)
	var dev cudaraw.CUdevice
	require.NoError(b, cudaraw.DeviceGet(&dev, 0))

	b.Run("CtxGetCurrent/go", func(b *testing.B) {
		var ctx cudaraw.CUcontext
		for b.Loop() {
			if err := cudaraw.CtxGetCurrent(&ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("CtxGetCurrent/c", func(b *testing.B) {
		fn, err := cudaraw.Library().NewProc("cuCtxGetCurrent").Addr()
		require.NoError(b, err)
		var ctx cudaraw.CUcontext
		b.ResetTimer()
		_, err = callbench.LoopPtr(fn, unsafe.Pointer(&ctx), b.N)
		require.NoError(b, err)
	})
	b.Run("DeviceGetAttribute/go", func(b *testing.B) {
		var v int32
		for b.Loop() {
			if err := cudaraw.DeviceGetAttribute(&v, cudaraw.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DeviceGetAttribute/c", func(b *testing.B) {
		fn, err := cudaraw.Library().NewProc("cuDeviceGetAttribute").Addr()
		require.NoError(b, err)
		b.ResetTimer()
		_, err = callbench.LoopAttr(fn, int32(cudaraw.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT), int32(dev), b.N)
		require.NoError(b, err)
	})
}
