package cuda_test

import (
	"fmt"
	"log"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/nvrtc"
)

// A loop that runs on the GPU until a kernel clears its condition: x = x/2 until it
// is below a threshold, in one graph launch. The body is captured into the while
// node; its kernel takes the condition as an argument and sets it with
// cudaGraphSetConditional. (It needs a GPU and NVRTC, so it is compiled but not run
// by go test.)
func ExampleGraph_AddConditional() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		log.Fatal(err)
	}
	const src = `
extern "C" __device__ __cudart_builtin__ void CUDARTAPI cudaGraphSetConditional(
	cudaGraphConditionalHandle handle, unsigned int value);

extern "C" __global__ void halve(float *x, float thr, unsigned *steps, cudaGraphConditionalHandle loop) {
	x[0] *= 0.5f;
	steps[0]++;
	cudaGraphSetConditional(loop, x[0] >= thr); // 0 ends the loop
}`
	out, err := nvrtc.Compile(src, "halve.cu", nvrtc.Options{Context: ctx})
	if err != nil {
		log.Fatal(err)
	}
	mod, err := out.Load(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer mod.Close()
	halve, err := mod.Function("halve")
	if err != nil {
		log.Fatal(err)
	}
	s, err := ctx.NewStream()
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	x, err := cuda.AllocFrom(s, []float32{1000})
	if err != nil {
		log.Fatal(err)
	}
	defer x.Close()
	steps, err := cuda.AllocFrom(s, []uint32{0})
	if err != nil {
		log.Fatal(err)
	}
	defer steps.Close()

	g, err := ctx.NewGraph()
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()
	loop, err := g.NewCondition(1, true) // 1 at each launch: the body runs at least once
	if err != nil {
		log.Fatal(err)
	}
	_, body, err := g.AddConditional(cuda.While, loop, 1)
	if err != nil {
		log.Fatal(err)
	}
	_, err = body[0].CaptureInto(nil, func(cs *cuda.Stream) error {
		return halve.Launch(cs, cuda.D1(1), cuda.D1(1), 0, x, float32(1), steps, loop)
	})
	if err != nil {
		log.Fatal(err)
	}
	exec, err := g.Instantiate()
	if err != nil {
		log.Fatal(err)
	}
	defer exec.Close()
	if err := exec.Launch(s); err != nil { // the whole loop, without returning to the host
		log.Fatal(err)
	}
	xs, err := cuda.ToSlice[float32](s, x)
	if err != nil {
		log.Fatal(err)
	}
	n, err := cuda.ToSlice[uint32](s, steps)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(xs[0], n[0]) // 0.9765625 10
}
