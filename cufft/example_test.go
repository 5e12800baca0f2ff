package cufft_test

import (
	"errors"
	"fmt"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cufft"
	"github.com/gocuda/gocuda/cufft/cufftraw"
	"github.com/gocuda/gocuda/curand"
)

// Noise from cuRAND into a cuFFT on one stream, no host round trip in between: the
// power spectrum of white noise is flat. (It needs a GPU, cuRAND and cuFFT, so it is
// compiled but not run by go test.)
func Example_noise() {
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
	const n = 1 << 16
	noise, err := cuda.AllocFor[float32](s, n)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer noise.Close()
	spectrum, err := cuda.AllocFor[complex64](s, n/2+1)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer spectrum.Close()

	g, err := curand.NewGenerator(ctx, curand.Philox, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer g.Close()
	if err := curand.Normal[float32](g, s, noise, n, 0, 1); err != nil {
		fmt.Println(err)
		return
	}
	if err := cufft.RealToComplex[float32, complex64](s, []int{n}, 1, noise, spectrum); err != nil {
		fmt.Println(err)
		return
	}
	out := make([]complex64, n/2+1)
	if err := cuda.CopyFromDevice(out, spectrum); err != nil {
		fmt.Println(err)
		return
	}
	var power float64
	for _, c := range out[1 : n/2] {
		power += float64(real(c)*real(c) + imag(c)*imag(c))
	}
	fmt.Printf("mean power per bin ≈ n: %.1f\n", power/float64(n/2-1)/n) // about 1.0
}

// Statuses are errors that work without the library loaded.
func Example_errors() {
	var err error = cufftraw.CUFFT_INVALID_PLAN
	fmt.Println(err)
	fmt.Println(errors.Is(fmt.Errorf("call: %w", err), cufftraw.ErrInvalidPlan))
	// Output:
	// cufft: CUFFT_INVALID_PLAN (1): invalid plan
	// true
}
