package cufft_test

import (
	"fmt"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cufft"
)

// An orthonormal round trip gives the input back (NumPy's norm="ortho"). (It needs a
// GPU and cuFFT, so it is compiled but not run by go test.)
func ExampleNorm() {
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
	b, err := cuda.AllocFor[complex64](s, 4)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	_ = cuda.CopyToDeviceAsync(s, b, []complex64{1, 2, 3, 4})
	if err := cufft.FFT[complex64](s, []int{4}, 1, b, b, false, cufft.Ortho); err != nil {
		fmt.Println(err)
		return
	}
	if err := cufft.FFT[complex64](s, []int{4}, 1, b, b, true, cufft.Ortho); err != nil {
		fmt.Println(err)
		return
	}
	out := make([]complex64, 4)
	if err := cuda.CopyFromDevice(out, b); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out) // about [(1+0i) (2+0i) (3+0i) (4+0i)]
}

// Two signals interleaved in one array (stride 2) transformed as a batch of two
// (distance 1), into a tight output; the plan is made once and reused, as Stats shows.
func ExampleLayout() {
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
	const n = 8
	in, err := cuda.AllocFor[complex128](s, 2*n)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer in.Close()
	out, err := cuda.AllocFor[complex128](s, 2*n)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer out.Close()
	x := make([]complex128, 2*n)
	for i := range n {
		x[2*i], x[2*i+1] = 1, complex(float64(i), 0) // signal 0: ones; signal 1: a ramp
	}
	_ = cuda.CopyToDeviceAsync(s, in, x)
	l := cufft.Layout{InStride: 2, InDist: 1} // the result tight, n apart
	before := cufft.Stats()
	for range 3 {
		if err := cufft.FFT[complex128](s, []int{n}, 2, in, out, false, l); err != nil {
			fmt.Println(err)
			return
		}
	}
	y := make([]complex128, 2*n)
	if err := cuda.CopyFromDevice(y, out); err != nil {
		fmt.Println(err)
		return
	}
	st := cufft.Stats()
	// The sums, (8+0i) and (28+0i), then 1 plan made and 2 reused.
	fmt.Println(y[0], y[n], st.Created-before.Created, st.Reused-before.Reused)
}
