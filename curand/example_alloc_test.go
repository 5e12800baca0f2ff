package curand_test

import (
	"fmt"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/curand"
)

// A new buffer of normally distributed numbers, and half-precision ones (drawn as
// float32 and converted on the GPU). (It needs a GPU and cuRAND, so it is
// compiled but not run by go test.)
func ExampleNewNormal() {
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
	g, err := curand.NewGenerator(ctx, curand.Philox, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer g.Close()
	x, err := curand.NewNormal[float64](g, s, 1024, 0, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer x.Close()
	h, err := curand.NewUniform[cuda.Float16](g, s, 1024)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()
	out := make([]cuda.Float16, 1024)
	if err := cuda.CopyFromDevice(out, h); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(x.Len(), len(out), out[0].Float32() > 0) // 1024 1024 true
}
