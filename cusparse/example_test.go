package cusparse_test

import (
	"errors"
	"fmt"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cusparse"
	"github.com/gocuda/gocuda/cusparse/cusparseraw"
)

// y = A·x for a 3×3 sparse matrix in CSR form. (It needs a GPU and cuSPARSE, so it
// is compiled but not run by go test.)
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
	// [[1 0 2]
	//  [0 3 0]
	//  [4 0 5]]
	ro, _ := cuda.AllocFor[int32](s, 4)
	ci, _ := cuda.AllocFor[int32](s, 5)
	v, _ := cuda.AllocFor[float64](s, 5)
	x, _ := cuda.AllocFor[float64](s, 3)
	y, _ := cuda.AllocFor[float64](s, 3)
	for _, b := range []*cuda.DeviceBuffer{ro, ci, v, x, y} {
		if b == nil {
			fmt.Println("out of memory")
			return
		}
		defer b.Close()
	}
	_ = cuda.CopyToDeviceAsync(s, ro, []int32{0, 2, 3, 5})
	_ = cuda.CopyToDeviceAsync(s, ci, []int32{0, 2, 1, 0, 2})
	_ = cuda.CopyToDeviceAsync(s, v, []float64{1, 2, 3, 4, 5})
	_ = cuda.CopyToDeviceAsync(s, x, []float64{1, 1, 1})
	a := &cusparse.CSR{Rows: 3, Cols: 3, NNZ: 5, RowOffsets: ro, ColIndices: ci, Values: v}
	if err := cusparse.MulVec[float64](s, cusparse.NoTrans, 1, a, x, 0, y); err != nil {
		fmt.Println(err)
		return
	}
	out := make([]float64, 3)
	if err := cuda.CopyFromDevice(out, y); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out) // [3 3 9]
}

// Statuses are errors that work without the library loaded.
func Example_errors() {
	var err error = cusparseraw.CUSPARSE_STATUS_INVALID_VALUE
	fmt.Println(err)
	fmt.Println(errors.Is(fmt.Errorf("call: %w", err), cusparseraw.ErrInvalidValue))
	// Output:
	// cusparse: CUSPARSE_STATUS_INVALID_VALUE (3): invalid value
	// true
}
