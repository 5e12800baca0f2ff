// Seeded bug: a templated kernel's const T* argument batched without cuda.In.
package main

import (
	"log"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/nvrtc"
)

const src = `template <typename T>
__global__ void add(const T* __restrict__ a, const T* __restrict__ b, T* c, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) c[i] = a[i] + b[i];
}`

func adds(ctx *cuda.Context, s *cuda.Stream, a, b, c *cuda.DeviceBuffer) error {
	out, err := nvrtc.Compile(src, "add.cu", nvrtc.Options{Context: ctx, NameExpressions: []string{"add<float>"}})
	if err != nil {
		return err
	}
	mod, err := out.Load(ctx)
	if err != nil {
		return err
	}
	defer mod.Close()
	k, err := out.Function(mod, "add<float>")
	if err != nil {
		return err
	}
	var batch cuda.LaunchBatch
	n := a.Len()
	if err := batch.Add(k, cuda.D1(cuda.Blocks(n, 256)), cuda.D1(256), 0, cuda.In(a), b, c, int32(n)); err != nil { // BUG(readonly)
		return err
	}
	return batch.Submit(s)
}

func main() { log.Println(adds(nil, nil, nil, nil, nil)) }
