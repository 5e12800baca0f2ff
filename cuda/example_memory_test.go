package cuda_test

import (
	"fmt"

	"github.com/gocuda/gocuda/cuda"
)

// Device, pinned and unified memory with copies on a stream. (It needs a GPU, so it
// is compiled but not run by go test.)
func Example_memory() {
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

	// Device memory for 4 float32, from the device's stream-ordered pool.
	x := []float32{1, 2, 3, 4}
	d, err := cuda.AllocFor[float32](s, len(x))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close() // freed on s, after the work queued there

	// Pinned host memory: copies from and to it overlap with other work.
	h, err := ctx.AllocHost(d.Size())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()
	copy(cuda.HostSlice[float32](h), x)

	if err := cuda.CopyAsync(s, d, h); err != nil {
		fmt.Println(err)
		return
	}
	if err := d.Memset32Async(s, 0x40000000); err != nil { // 2.0f everywhere
		fmt.Println(err)
		return
	}
	if err := cuda.CopyAsync(s, h, d); err != nil {
		fmt.Println(err)
		return
	}
	if err := s.Synchronize(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cuda.HostSlice[float32](h))

	// Or straight into a Go slice, waiting for the copy.
	y := make([]float32, len(x))
	if err := cuda.CopyFromDevice(y, d); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(y)

	// What the package holds, per context and kind.
	st, err := cuda.MemoryStatus()
	if err == nil {
		fmt.Print(st)
	}
}

// A Go slice to device memory and back: AllocFrom and ToSlice. (It runs on the
// strict fake driver without a GPU, which keeps real memory behind allocations.)
func ExampleAllocFrom() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := ctx.NewStream()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	d, err := cuda.AllocFrom(s, []int32{1, 2, 3})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	back, err := cuda.ToSlice[int32](s, d)
	fmt.Println(back, err)
	// Output: [1 2 3] <nil>
}
