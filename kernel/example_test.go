package kernel_test

import (
	"fmt"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/kernel"
)

// y = a*x + y over a million elements, and the sum of the result, each written as
// one line of CUDA C. (Compiled, not run: it needs a GPU and NVRTC.)
func Example() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		fmt.Println("no GPU:", err)
		return
	}
	s, err := ctx.NewStream()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	axpy, err := kernel.NewElementwise("axpy", "y = a * x + y", nil,
		kernel.Scalar[float32]("a"), kernel.In[float32]("x"), kernel.InOut[float32]("y"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer axpy.Close()
	sum, err := kernel.NewReduction[float32]("sum", kernel.ReductionOps{Identity: "0", Combine: "a + b"}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sum.Close()

	const n = 1 << 20
	ones := make([]float32, n)
	for i := range ones {
		ones[i] = 1
	}
	x, _ := cuda.AllocFrom(s, ones)
	defer x.Close()
	y, _ := cuda.AllocFrom(s, ones)
	defer y.Close()
	if err := axpy.Launch(s, float32(2), x, y); err != nil { // y = 2·1 + 1
		fmt.Println(err)
		return
	}
	total, err := sum.Reduce(s, y)
	fmt.Println(total, err) // 3·n
}
