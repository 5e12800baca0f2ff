package cusparse_test

import (
	"fmt"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cusparse"
)

// exampleStream returns a stream of device 0's context, or prints why not.
func exampleStream() (*cuda.Stream, bool) {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		fmt.Println("no GPU:", err)
		return nil, false
	}
	s, err := ctx.NewStream()
	if err != nil {
		fmt.Println(err)
		return nil, false
	}
	return s, true
}

// A CSR matrix from Go slices, back to a dense matrix. (It needs a GPU and cuSPARSE,
// so it is compiled but not run by go test.)
func ExampleNewCSR() {
	s, ok := exampleStream()
	if !ok {
		return
	}
	defer s.Close()
	// [[1 0 2]
	//  [0 3 0]]
	a, err := cusparse.NewCSR(s, 2, 3, []int32{0, 2, 3}, []int32{0, 2, 1}, []float64{1, 2, 3})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()
	d, err := cuda.AllocFor[float64](s, 6)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	if err := cusparse.ToDense[float64](s, a, d, 2); err != nil {
		fmt.Println(err)
		return
	}
	out := make([]float64, 6)
	if err := cuda.CopyFromDevice(out, d); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out) // column-major: [1 0 0 3 2 0]
}

// A dense matrix's non-zero elements as a CSR matrix.
func ExampleDenseToCSR() {
	s, ok := exampleStream()
	if !ok {
		return
	}
	defer s.Close()
	d, err := cuda.AllocFor[float32](s, 4)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	_ = cuda.CopyToDeviceAsync(s, d, []float32{5, 0, 0, 7}) // [[5 0] [0 7]], column-major
	a, err := cusparse.DenseToCSR[float32](s, 2, 2, d, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()
	fmt.Println(a.NNZ) // 2
}

// The product of two sparse matrices, itself sparse: A·A for A = [[1 1] [0 1]].
func ExampleMulSparse() {
	s, ok := exampleStream()
	if !ok {
		return
	}
	defer s.Close()
	a, err := cusparse.NewCSR(s, 2, 2, []int32{0, 2, 3}, []int32{0, 1, 1}, []float64{1, 1, 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()
	c, err := cusparse.MulSparse(s, 1.0, a, a)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	v := make([]float64, c.NNZ)
	if err := cuda.CopyFromDevice(v, c.Values.(*cuda.DeviceBuffer)); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.NNZ, v) // 3 [1 2 1]
}

// Solving L·y = x with a sparse lower triangular L, analysed once.
func ExampleNewTriangularSolve() {
	s, ok := exampleStream()
	if !ok {
		return
	}
	defer s.Close()
	// L = [[2 0] [1 4]]
	l, err := cusparse.NewCSR(s, 2, 2, []int32{0, 1, 3}, []int32{0, 0, 1}, []float64{2, 1, 4})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	sv, err := cusparse.NewTriangularSolve[float64](s, cusparse.NoTrans, l, cusparse.Lower, cusparse.NonUnit)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sv.Close()
	x, err := cuda.AllocFor[float64](s, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer x.Close()
	_ = cuda.CopyToDeviceAsync(s, x, []float64{2, 9})
	if err := sv.Solve(s, x, x); err != nil { // in place
		fmt.Println(err)
		return
	}
	y := make([]float64, 2)
	if err := cuda.CopyFromDevice(y, x); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(y) // [1 2]
}

// Solving U·C = B for two right-hand sides with a sparse upper triangular U.
func ExampleNewTriangularSolveMat() {
	s, ok := exampleStream()
	if !ok {
		return
	}
	defer s.Close()
	// U = [[1 1] [0 2]]
	u, err := cusparse.NewCSR(s, 2, 2, []int32{0, 2, 3}, []int32{0, 1, 1}, []float64{1, 1, 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer u.Close()
	sm, err := cusparse.NewTriangularSolveMat[float64](s, cusparse.NoTrans, u, cusparse.Upper, cusparse.NonUnit, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sm.Close()
	b, err := cuda.AllocFor[float64](s, 4)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	c, err := cuda.AllocFor[float64](s, 4)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	_ = cuda.CopyToDeviceAsync(s, b, []float64{3, 4, 1, 0}) // columns [3 4] and [1 0]
	if err := sm.Solve(s, b, c); err != nil {
		fmt.Println(err)
		return
	}
	out := make([]float64, 4)
	if err := cuda.CopyFromDevice(out, c); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out) // [1 2 1 0]
}
