package cuda_test

import (
	"errors"
	"fmt"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
)

// Streams and events from any goroutine: no thread locking, no explicit init.
func Example() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		fmt.Println(err) // without a GPU: cuda: no usable CUDA driver: ...
		return
	}
	s, err := ctx.NewStream()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	start, _ := ctx.NewEvent(true)
	end, _ := ctx.NewEvent(true)
	defer start.Close()
	defer end.Close()
	_ = start.Record(s)
	// ... queue work on s ...
	_ = end.Record(s)
	if err := end.Synchronize(); err != nil {
		fmt.Println(err)
		return
	}
	d, _ := cuda.Elapsed(start, end)
	fmt.Println("GPU time:", d)
}

// Results are errors; success is nil. Names work without the driver.
func Example_errors() {
	var err error = cudaraw.CUDA_ERROR_OUT_OF_MEMORY
	fmt.Println(err)
	fmt.Println(errors.Is(fmt.Errorf("alloc: %w", err), cudaraw.ErrOutOfMemory))
	// Output:
	// cuda: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory
	// true
}
