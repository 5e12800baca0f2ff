package nvrtc_test

import (
	"errors"
	"fmt"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/nvrtc"
	"github.com/gocuda/gocuda/nvrtc/nvrtcraw"
)

// Compile a templated kernel for the GPU at hand, load it and run it. (It needs a
// GPU and NVRTC, so it is compiled but not run by go test.)
func Example() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		fmt.Println("no GPU:", err)
		return
	}
	const src = `
template <typename T>
__global__ void scale(T* x, T a, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] *= a;
}`
	out, err := nvrtc.Compile(src, "scale.cu", nvrtc.Options{
		Context:         ctx, // -arch=sm_XY of its device: a cubin
		NameExpressions: []string{"scale<float>"},
	})
	if err != nil {
		fmt.Println(err) // a *nvrtc.CompileError shows the compiler's log
		return
	}
	mod, err := out.Load(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mod.Close()
	k, err := out.Function(mod, "scale<float>") // its lowered name, such as _Z5scaleIfEvPT_S0_i
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
	if err := k.Launch(s, cuda.D1(1), cuda.D1(4), 0, x, float32(10), int32(4)); err != nil {
		fmt.Println(err)
		return
	}
	got := make([]float32, 4)
	if err := cuda.CopyFromDevice(got, x); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(got) // [10 20 30 40]
}

// A compile failure is a *CompileError: the program's name and NVRTC's log, and the
// status it unwraps to.
func Example_compileError() {
	var err error = &nvrtc.CompileError{
		Name: "k.cu",
		Log:  `k.cu(2): error: identifier "y" is undefined`,
		Err:  nvrtcraw.NVRTC_ERROR_COMPILATION,
	}
	var ce *nvrtc.CompileError
	if errors.As(err, &ce) {
		fmt.Println(ce.Log)
	}
	fmt.Println(errors.Is(err, nvrtcraw.ErrCompilation))
	// Output:
	// k.cu(2): error: identifier "y" is undefined
	// true
}
