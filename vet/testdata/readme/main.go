// The README's first program, as it is there: gocudavet finds nothing in it.
package main

import (
	"fmt"

	"github.com/gocuda/gocuda/cublas"
	"github.com/gocuda/gocuda/cuda"
)

func main() {
	ctx, err := cuda.Device(0).Context() // the primary context; the driver initializes itself
	if err != nil {
		panic(err) // without a GPU: cuda: no usable CUDA driver: ...
	}
	s, _ := ctx.NewStream()
	defer s.Close()
	a, _ := cuda.AllocFrom(s, []float32{1, 2, 3, 4}) // 2×2, column-major, copied on s
	c, _ := cuda.AllocFor[float32](s, 4)             // from the device's stream-ordered pool
	defer a.Close()                                  // Close is the one release, on every type
	defer c.Close()
	err = cublas.Gemm[float32](s, cublas.NoTrans, cublas.NoTrans, 2, 2, 2, 1, a, 2, a, 2, 0, c, 2) // C = A·A
	if err != nil {
		panic(err)
	}
	fmt.Println(cuda.ToSlice[float32](s, c)) // [7 10 15 22] <nil>, after the Gemm
}
