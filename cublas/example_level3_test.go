package cublas_test

import (
	"fmt"

	"github.com/gocuda/gocuda/cublas"
	"github.com/gocuda/gocuda/cuda"
)

// exampleStream returns a stream of device 0's primary context, or nil without a GPU.
func exampleStream() *cuda.Stream {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		fmt.Println("no GPU:", err)
		return nil
	}
	s, err := ctx.NewStream()
	if err != nil {
		fmt.Println(err)
		return nil
	}
	return s
}

// Solve L·X = B for X with a lower triangular L (2×2, column-major), B overwritten
// by X. (It needs a GPU and cuBLAS, so it is compiled but not run by go test.)
func ExampleTrsm() {
	s := exampleStream()
	if s == nil {
		return
	}
	defer s.Close()
	l, _ := cuda.AllocFrom(s, []float64{2, 1, 0, 4}) // [[2 0] [1 4]]
	defer l.Close()
	b, _ := cuda.AllocFrom(s, []float64{2, 9}) // one right-hand side
	defer b.Close()
	if err := cublas.Trsm(s, cublas.Left, cublas.Lower, cublas.NoTrans, cublas.NonUnit, 2, 1, 1.0, l, 2, b, 2); err != nil {
		fmt.Println(err)
		return
	}
	x := make([]float64, 2)
	if err := cuda.CopyFromDevice(x, b); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(x) // [1 2]
}

// The Gram matrix C = A·Aᵀ of a 2×3 A, lower triangle.
func ExampleSyrk() {
	s := exampleStream()
	if s == nil {
		return
	}
	defer s.Close()
	a, _ := cuda.AllocFrom(s, []float32{1, 0, 0, 1, 1, 1}) // columns (1,0), (0,1), (1,1)
	defer a.Close()
	c, _ := cuda.AllocFor[float32](s, 4)
	defer c.Close()
	if err := cublas.Syrk[float32](s, cublas.Lower, cublas.NoTrans, 2, 3, 1, a, 2, 0, c, 2); err != nil {
		fmt.Println(err)
		return
	}
	out := make([]float32, 4)
	_ = cuda.CopyFromDevice(out, c)
	fmt.Println(out[0], out[1], out[3]) // 2 1 2
}

// The Hermitian product C = A·Aᴴ of a 1×2 complex A.
func ExampleHerk() {
	s := exampleStream()
	if s == nil {
		return
	}
	defer s.Close()
	a, _ := cuda.AllocFrom(s, []complex128{1i, 2})
	defer a.Close()
	c, _ := cuda.AllocFor[complex128](s, 1)
	defer c.Close()
	if err := cublas.Herk[complex128](s, cublas.Upper, cublas.NoTrans, 1, 2, 1, a, 1, 0, c, 1); err != nil {
		fmt.Println(err)
		return
	}
	out := make([]complex128, 1)
	_ = cuda.CopyFromDevice(out, c)
	fmt.Println(real(out[0])) // 5
}

// Transpose a 2×3 matrix into C (3×2): C = 1·Aᵀ + 0·B.
func ExampleGeam() {
	s := exampleStream()
	if s == nil {
		return
	}
	defer s.Close()
	a, _ := cuda.AllocFrom(s, []float32{1, 4, 2, 5, 3, 6}) // [[1 2 3] [4 5 6]]
	defer a.Close()
	c, _ := cuda.AllocFor[float32](s, 6)
	defer c.Close()
	if err := cublas.Geam[float32](s, cublas.Trans, cublas.NoTrans, 3, 2, 1, a, 2, 0, c, 3, c, 3); err != nil {
		fmt.Println(err)
		return
	}
	out := make([]float32, 6)
	_ = cuda.CopyFromDevice(out, c)
	fmt.Println(out) // [1 2 3 4 5 6]: Aᵀ column-major
}

// Two 1×1 products of matrices in separate buffers, in one call.
func ExampleGemmBatched() {
	s := exampleStream()
	if s == nil {
		return
	}
	defer s.Close()
	var as, bs, cs []cuda.Memory
	for i := range 2 {
		a, _ := cuda.AllocFrom(s, []float64{float64(i + 2)})
		b, _ := cuda.AllocFrom(s, []float64{10})
		c, _ := cuda.AllocFor[float64](s, 1)
		defer a.Close()
		defer b.Close()
		defer c.Close()
		as, bs, cs = append(as, a), append(bs, b), append(cs, c)
	}
	if err := cublas.GemmBatched(s, cublas.NoTrans, cublas.NoTrans, 1, 1, 1, 1.0, as, 1, bs, 1, 0.0, cs, 1); err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range cs {
		out := make([]float64, 1)
		_ = cuda.CopyFromDevice(out, c.(*cuda.DeviceBuffer))
		fmt.Println(out[0]) // 20, then 30
	}
}

// One fused MLP layer: H = ReLU(W·X + b) in one cuBLASLt call, W 2×2, X 2×1.
func ExampleMatmul() {
	s := exampleStream()
	if s == nil {
		return
	}
	defer s.Close()
	w, _ := cuda.AllocFrom(s, []float32{1, 0, 0, 1}) // the identity
	defer w.Close()
	x, _ := cuda.AllocFrom(s, []float32{3, -5})
	defer x.Close()
	bias, _ := cuda.AllocFrom(s, []float32{1, 1})
	defer bias.Close()
	h, _ := cuda.AllocFor[float32](s, 2)
	defer h.Close()
	err := cublas.Matmul[float32](s, cublas.NoTrans, cublas.NoTrans, 2, 1, 2, 1, w, 2, x, 2, 0, h, 2,
		cublas.Epilogue{Act: cublas.ReLU, Bias: bias})
	if err != nil {
		fmt.Println(err)
		return
	}
	out := make([]float32, 2)
	_ = cuda.CopyFromDevice(out, h)
	fmt.Println(out) // [4 0]
}
