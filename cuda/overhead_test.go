package cuda_test

import (
	"testing"
	"unsafe"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/internal/callbench"
	"github.com/gocuda/gocuda/internal/gputest"
	"github.com/stretchr/testify/require"
)

// BenchmarkCallOverhead puts a call through the generated binding beside the same
// call made from C in the same process: the difference is the binding's cost (cgo's
// own floor is about 50 ns; the goal is at most 60 ns over C).
func BenchmarkCallOverhead(b *testing.B) {
	gputest.Require(b)
	var dev cuda.CUdevice
	require.NoError(b, cuda.DeviceGet(&dev, 0))

	b.Run("CtxGetCurrent/go", func(b *testing.B) {
		var ctx cuda.CUcontext
		for b.Loop() {
			if err := cuda.CtxGetCurrent(&ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("CtxGetCurrent/c", func(b *testing.B) {
		fn, err := cuda.Library().NewProc("cuCtxGetCurrent").Addr()
		require.NoError(b, err)
		var ctx cuda.CUcontext
		b.ResetTimer()
		_, err = callbench.LoopPtr(fn, unsafe.Pointer(&ctx), b.N)
		require.NoError(b, err)
	})
	b.Run("DeviceGetAttribute/go", func(b *testing.B) {
		var v int32
		for b.Loop() {
			if err := cuda.DeviceGetAttribute(&v, cuda.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DeviceGetAttribute/c", func(b *testing.B) {
		fn, err := cuda.Library().NewProc("cuDeviceGetAttribute").Addr()
		require.NoError(b, err)
		b.ResetTimer()
		_, err = callbench.LoopAttr(fn, int32(cuda.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT), int32(dev), b.N)
		require.NoError(b, err)
	})
}
