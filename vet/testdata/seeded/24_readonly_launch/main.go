// Seeded bug: a read-only (const float*) argument launched without cuda.In.
package main

import (
	"log"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/nvrtc"
)

const src = `extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) y[i] += a * x[i];
}`

func axpy(ctx *cuda.Context, s *cuda.Stream, x, y *cuda.DeviceBuffer) error {
	out, err := nvrtc.Compile(src, "axpy.cu", nvrtc.Options{Context: ctx})
	if err != nil {
		return err
	}
	mod, err := out.Load(ctx)
	if err != nil {
		return err
	}
	defer mod.Close()
	k, err := mod.Function("axpy")
	if err != nil {
		return err
	}
	return k.Launch(s, cuda.D1(cuda.Blocks(x.Len(), 256)), cuda.D1(256), 0, float32(2), x, y, int32(x.Len())) // BUG(readonly)
}

func main() { log.Println(axpy(nil, nil, nil, nil)) }
