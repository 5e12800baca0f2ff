package cuda_test

import (
	_ "embed"
	"fmt"
	"log"

	"github.com/gocuda/gocuda/cuda"
)

// kernels is PTX compiled by nvcc from testdata/kernels.cu; a cubin or fatbin embeds
// the same way.
//
//go:embed testdata/kernels.ptx
var kernels []byte

// Load a module from an embedded image, look up a kernel and launch it with typed
// arguments. fill_u32(uint32_t* p, uint32_t v, uint64_t n) sets p[0..n) to v; here p
// is the module's global variable magic.
func ExampleFunction_Launch() {
	ctx, err := cuda.Device(0).Context() // the device's primary context
	if err != nil {
		log.Fatal(err)
	}
	m, err := ctx.LoadModule(kernels)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	fill, err := m.Function("fill_u32")
	if err != nil {
		log.Fatal(err)
	}
	magic, size, err := m.Global("magic")
	if err != nil {
		log.Fatal(err)
	}
	s, err := ctx.NewStream()
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	n := size / 4
	// Arguments are checked against the kernel's parameters: uint32 and uint64 here,
	// as the kernel declares them (a plain Go int would be an error, not a crash).
	err = fill.Launch(s, cuda.D1(cuda.Blocks(n, 256)), cuda.D1(256), 0, magic, uint32(42), uint64(n))
	if err != nil {
		log.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("filled", n, "values")
}

// A LaunchBatch queues several launches with one call into the driver: here a fill
// and two in-place updates of the same buffer, in order.
func ExampleLaunchBatch() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		log.Fatal(err)
	}
	m, err := ctx.LoadModule(kernels)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	fill, err := m.Function("fill_u32")
	if err != nil {
		log.Fatal(err)
	}
	s, err := ctx.NewStream()
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	const n = 1 << 10
	buf, err := cuda.AllocFor[uint32](s, n)
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Close()

	var b cuda.LaunchBatch
	for _, v := range []uint32{1, 2, 3} {
		if err := b.Add(fill, cuda.D1(cuda.Blocks(n, 256)), cuda.D1(256), 0, buf, v, uint64(n)); err != nil {
			log.Fatal(err)
		}
	}
	if err := b.Submit(s); err != nil { // the batch can be submitted again later
		log.Fatal(err)
	}
	out := make([]uint32, n)
	if err := cuda.CopyFromDeviceAsync(s, out, buf); err != nil {
		log.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		log.Fatal(err)
	}
	fmt.Println(b.Len(), "launches, last value", out[n-1])
}
