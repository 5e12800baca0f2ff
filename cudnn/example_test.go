package cudnn_test

import (
	"errors"
	"fmt"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cudnn"
	"github.com/gocuda/gocuda/cudnn/cudnnraw"
)

// Convolve a 4×4 image with a 3×3 filter of ones, add a bias and apply ReLU, on the
// GPU. (It needs a GPU and cuDNN, so it is compiled but not run by go test.)
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

	xs := cudnn.Tensor4D{N: 1, C: 1, H: 4, W: 4}
	ws := cudnn.Filter{K: 1, C: 1, R: 3, S: 3}
	conv := cudnn.Conv{} // no padding, unit strides, cross-correlation
	ys, err := cudnn.ConvolutionOutputShape(xs, ws, conv)
	if err != nil {
		fmt.Println(err)
		return
	}
	x, err := cuda.AllocFrom(s, []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer x.Close()
	w, err := cuda.AllocFrom(s, []float32{1, 1, 1, 1, 1, 1, 1, 1, 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	b, err := cuda.AllocFrom(s, []float32{-60})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	y, err := cuda.AllocFor[float32](s, ys.Len())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer y.Close()

	// y = conv(x, w); y += b; y = ReLU(y), in place. Each call is queued on s.
	if err := cudnn.Convolve[float32](s, conv, 1, x, xs, w, ws, 0, y); err != nil {
		fmt.Println(err)
		return
	}
	if err := cudnn.AddBias[float32](s, ys, 1, b, 1, y); err != nil {
		fmt.Println(err)
		return
	}
	if err := cudnn.Activate[float32](s, cudnn.Activation{Mode: cudnn.ReLU}, ys, 1, y, 0, y); err != nil {
		fmt.Println(err)
		return
	}
	out := make([]float32, ys.Len())
	if err := cuda.CopyFromDevice(out, y); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(ys, out) // 1×1×2×2 [0 3 30 39]
}

// Statuses are errors that work without the library loaded.
func Example_errors() {
	var err error = cudnnraw.CUDNN_STATUS_BAD_PARAM
	fmt.Println(err)
	fmt.Println(errors.Is(fmt.Errorf("call: %w", err), cudnnraw.ErrBadParam))
	// Output:
	// cudnn: CUDNN_STATUS_BAD_PARAM (2000): bad param
	// true
}
