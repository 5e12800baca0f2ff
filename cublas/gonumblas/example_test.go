package gonumblas_test

import (
	"fmt"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/gocuda/gocuda/cublas/gonumblas"
	"github.com/gocuda/gocuda/cuda"
)

// gonum's BLAS on the GPU: blas64 (and gonum/mat, which calls it) runs large
// products with cuBLAS. (It needs a GPU and cuBLAS, so it is compiled but not run
// by go test.)
func Example() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		fmt.Println("no GPU:", err)
		return
	}
	impl, err := gonumblas.New(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	blas64.Use(impl)

	// Go slices: copied to the GPU and back, for products of order 128 and up.
	const n = 1024
	a := blas64.General{Rows: n, Cols: n, Stride: n, Data: make([]float64, n*n)}
	b := blas64.General{Rows: n, Cols: n, Stride: n, Data: make([]float64, n*n)}
	c := blas64.General{Rows: n, Cols: n, Stride: n, Data: make([]float64, n*n)}
	for i := range n {
		a.Data[i*n+i], b.Data[i*n+i] = 2, 3
	}
	blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, a, b, 0, c)
	fmt.Println(c.Data[0], c.Data[n*n-1]) // 6 6

	// Managed memory, registered: cuBLAS works on it in place, no copies.
	buf, err := ctx.AllocManaged(8 * n * n)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer buf.Close()
	if err := impl.Register(buf); err != nil {
		fmt.Println(err)
		return
	}
	m := blas64.General{Rows: n, Cols: n, Stride: n, Data: cuda.HostSlice[float64](buf)}
	blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, c, b, 0, m)
	fmt.Println(m.Data[0], impl.Err()) // 18 <nil>
}
