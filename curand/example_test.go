package curand_test

import (
	"errors"
	"fmt"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/curand"
	"github.com/gocuda/gocuda/curand/curandraw"
)

// Normally distributed numbers into device memory, then to the host. (It needs a GPU
// and cuRAND, so it is compiled but not run by go test.)
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
	g, err := curand.NewGenerator(ctx, curand.Philox, 1234)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer g.Close()
	buf, err := cuda.AllocFor[float32](s, 1024)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer buf.Close()
	if err := curand.Normal[float32](g, s, buf, 1024, 0, 1); err != nil {
		fmt.Println(err)
		return
	}
	out := make([]float32, 1024)
	if err := cuda.CopyFromDevice(out, buf); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(out))
}

// Statuses are errors that work without the library loaded.
func Example_errors() {
	var err error = curandraw.CURAND_STATUS_NOT_INITIALIZED
	fmt.Println(err)
	fmt.Println(errors.Is(fmt.Errorf("call: %w", err), curandraw.ErrNotInitialized))
	// Output:
	// curand: CURAND_STATUS_NOT_INITIALIZED (101): not initialized
	// true
}
