// Seeded bug: a module compiled with NVRTC and loaded, never unloaded.
package main

import (
	"log"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/nvrtc"
)

const src = `extern "C" __global__ void zero(float* x, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] = 0;
}`

func main() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		log.Fatal(err)
	}
	out, err := nvrtc.Compile(src, "zero.cu", nvrtc.Options{Context: ctx})
	if err != nil {
		log.Fatal(err)
	}
	mod, err := out.Load(ctx) // BUG(close)
	if err != nil {
		log.Fatal(err)
	}
	k, err := mod.Function("zero")
	log.Println(k.Name(), err)
}
