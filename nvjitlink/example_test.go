package nvjitlink_test

import (
	"errors"
	"fmt"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/nvjitlink"
	"github.com/gocuda/gocuda/nvjitlink/nvjitlinkraw"
	"github.com/gocuda/gocuda/nvrtc"
)

// Compile two translation units to LTO-IR, one calling a __device__ function the
// other defines, link them into one cubin, load it and run it. (It needs a GPU,
// NVRTC and nvJitLink, so it is compiled but not run by go test.)
func Example() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		fmt.Println("no GPU:", err)
		return
	}
	const kernel = `
extern __device__ float twice(float x);
extern "C" __global__ void apply(float* x, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] = twice(x[i]);
}`
	const device = `__device__ float twice(float x) { return 2 * x; }`
	var inputs []nvjitlink.Input
	for name, src := range map[string]string{"kernel.cu": kernel, "device.cu": device} {
		out, err := nvrtc.Compile(src, name, nvrtc.Options{Context: ctx, LTO: true, Flags: []string{"-rdc=true"}})
		if err != nil {
			fmt.Println(err) // a *nvrtc.CompileError shows the compiler's log
			return
		}
		inputs = append(inputs, nvjitlink.Input{Kind: nvjitlink.LTOIR, Name: name, Data: out.LTOIR})
	}
	linked, err := nvjitlink.Link(nvjitlink.Options{Context: ctx}, inputs...)
	if err != nil {
		fmt.Println(err) // a *nvjitlink.LinkError shows the linker's log
		return
	}
	mod, err := linked.Load(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mod.Close()
	k, err := mod.Function("apply")
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := ctx.NewStream()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	x, err := cuda.AllocFrom(s, []float32{1, 2, 3, 4})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer x.Close()
	if err := k.Launch(s, cuda.D1(1), cuda.D1(4), 0, x, int32(4)); err != nil {
		fmt.Println(err)
		return
	}
	got := make([]float32, 4)
	if err := cuda.CopyFromDevice(got, x); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(got) // [2 4 6 8]
}

// A link failure is a *LinkError: nvJitLink's log, and the status it unwraps to.
func Example_linkError() {
	var err error = &nvjitlink.LinkError{
		Log: "error   : Undefined reference to '_Z5twicef' in 'kernel.cu'",
		Err: nvjitlinkraw.NVJITLINK_ERROR_FINALIZE,
	}
	var le *nvjitlink.LinkError
	if errors.As(err, &le) {
		fmt.Println(le.Log)
	}
	fmt.Println(errors.Is(err, nvjitlinkraw.ErrFinalize))
	// Output:
	// error   : Undefined reference to '_Z5twicef' in 'kernel.cu'
	// true
}
