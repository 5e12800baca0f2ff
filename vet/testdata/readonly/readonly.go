// Package readonly holds what the readonly analyzer must report (want lines) and
// what it must not.
package readonly

import (
	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/nvrtc"
)

const saxpy = `
// y = a*x + y: x is only read.
extern "C" __global__ void __launch_bounds__(256) saxpy(float a, const float* __restrict__ x, float* y, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) y[i] = a * x[i] + y[i];
}
template <typename T>
__global__ void scale(T const* in, T* out, T* const tmp, T a, int n) { /* in: read-only; tmp: a const pointer */ }
`

func launch(ctx *cuda.Context, s *cuda.Stream, x, y, t *cuda.DeviceBuffer) error {
	out, err := nvrtc.Compile(saxpy, "saxpy.cu", nvrtc.Options{NameExpressions: []string{"scale<float>"}})
	if err != nil {
		return err
	}
	mod, err := out.Load(ctx)
	if err != nil {
		return err
	}
	defer mod.Close()
	k, err := mod.Function("saxpy")
	if err != nil {
		return err
	}
	sc, err := out.Function(mod, "scale<float>")
	if err != nil {
		return err
	}
	if err := k.Launch(s, cuda.D1(1), cuda.D1(256), 0, float32(2), x, y, int32(16)); err != nil { // want `x is passed to kernel saxpy's read-only parameter "const float\* __restrict__ x" without cuda.In`
		return err
	}
	if err := k.Launch(s, cuda.D1(1), cuda.D1(256), 0, float32(2), cuda.In(x), y, int32(16)); err != nil { // marked
		return err
	}
	if err := sc.Launch(s, cuda.D1(1), cuda.D1(256), 0, x, y, t, float32(2), int32(16)); err != nil { // want `x is passed to kernel scale's read-only parameter "T const\* in"`
		return err
	}
	var b cuda.LaunchBatch
	if err := b.Add(k, cuda.D1(1), cuda.D1(256), 0, float32(2), y, x, int32(16)); err != nil { // want `y is passed to kernel saxpy's read-only parameter`
		return err
	}
	return b.Submit(s)
}

// A kernel this function does not compile is not known: nothing is reported.
func unknown(f *cuda.Function, s *cuda.Stream, x, y *cuda.DeviceBuffer) error {
	return f.Launch(s, cuda.D1(1), cuda.D1(256), 0, float32(2), x, y, int32(16))
}
