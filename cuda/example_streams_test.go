package cuda_test

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
)

// streamKernels is PTX compiled by nvcc from testdata/kernels.cu: fill_u32 and
// read_sum among others.
//
//go:embed testdata/kernels.ptx
var streamKernels []byte

// Goroutines with pooled streams, and a buffer handed from a producer to a
// consumer: the consumer's kernel waits on the GPU for the producer's, never on the
// host. (It needs a GPU, so it is compiled but not run by go test.)
func Example_streams() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		fmt.Println("no GPU:", err)
		return
	}
	m, err := ctx.LoadModule(streamKernels)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	fill, _ := m.Function("fill_u32")
	readSum, _ := m.Function("read_sum")

	buffers := make(chan *cuda.DeviceBuffer)
	go func() { // the producer, on a stream of its own
		defer close(buffers)
		err := ctx.WithStream(context.Background(), func(_ context.Context, s *cuda.Stream) error {
			for range 3 {
				b, err := cuda.AllocFor[uint32](s, 256)
				if err != nil {
					return err
				}
				if err := fill.Launch(s, cuda.D1(1), cuda.D1(256), 0, b, uint32(1), uint64(256)); err != nil {
					return err
				}
				buffers <- b // no synchronization: the consumer's stream waits on the GPU
			}
			return nil
		})
		if err != nil {
			fmt.Println(err)
		}
	}()

	// The consumer, on another pooled stream, carried in its context.Context.
	err = ctx.WithStream(context.Background(), func(cctx context.Context, s *cuda.Stream) error {
		for b := range buffers {
			sum, err := cuda.AllocFor[uint64](cuda.StreamFromContext(cctx), 1)
			if err != nil {
				return err
			}
			if err := sum.Memset32Async(s, 0); err != nil {
				return err
			}
			// In: the kernel only reads b, so other readers would not wait for it.
			if err := readSum.Launch(s, cuda.D1(1), cuda.D1(256), 0, cuda.In(b), uint64(256), uint64(0), sum); err != nil {
				return err
			}
			out := make([]uint64, 1)
			if err := cuda.CopyFromDevice(out, sum); err != nil {
				return err
			}
			fmt.Println(out[0])
			sum.Close()
			b.Close() // freed on s, after the read that waited for the fill
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
}

// Work queued outside the package (the raw layer, another library, cgo) goes
// through Enqueue with the memory it uses: here a raw memset on a second stream,
// ordered after the first stream's write and before the copy back.
func ExampleEnqueue() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		fmt.Println("no GPU:", err)
		return
	}
	s1, _ := ctx.NewStream()
	defer s1.Close()
	s2, _ := ctx.NewStream()
	defer s2.Close()
	b, err := cuda.AllocFor[uint32](s1, 1024)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	_ = b.Memset32Async(s1, 1)
	// s2 waits on the GPU for the memset on s1; later uses of b wait for s2.
	err = cuda.Enqueue(s2, func(c cudaraw.CUcontext, h cudaraw.CUstream) error {
		return cudaraw.MemsetD32AsyncIn(c, b.Ptr(), 7, 1024, h)
	}, cuda.Writes(b))
	if err != nil {
		fmt.Println(err)
		return
	}
	out, err := cuda.ToSlice[uint32](s1, b)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out[0], out[1023])
	// Output: 7 7
}
