package nccl_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/nccl"
	"github.com/gocuda/gocuda/nccl/ncclraw"
)

// BenchmarkAllReduce sums float32 buffers of each size over all the GPUs of the
// machine (one communicator per GPU, one goroutine issuing the all-reduces in a
// group, as nccl-tests' all_reduce_perf -g N does), in place, and reports NCCL's
// bandwidths: algbw = bytes / time, busbw = algbw · 2(n-1)/n (what each link
// carries; 0 with one GPU). For tools/bench's comparison with the C loop.
func BenchmarkAllReduce(b *testing.B) {
	cudatest.Require(b, cudatest.Kernels)
	cudatest.RequireLibrary(b, ncclraw.Library())
	n, err := cuda.DeviceCount()
	if err != nil {
		b.Fatal(err)
	}
	devs := make([]cuda.Device, n)
	for i := range devs {
		devs[i] = cuda.Device(i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	comms, err := nccl.NewComms(ctx, devs...)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	streams := make([]*cuda.Stream, n)
	for i, c := range comms {
		if streams[i], err = c.Context().NewStream(); err != nil {
			b.Fatal(err)
		}
		defer streams[i].Close()
	}
	for _, size := range []int{8, 1 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20, 1 << 30} {
		b.Run(sizeName(size), func(b *testing.B) {
			bufs := make([]*cuda.DeviceBuffer, n)
			for i, s := range streams {
				if bufs[i], err = cuda.AllocFor[float32](s, size/4); err != nil {
					b.Fatal(err)
				}
				defer bufs[i].Close()
				if err := bufs[i].Memset32Async(s, 0); err != nil {
					b.Fatal(err)
				}
			}
			step := func() {
				err := nccl.Group(func() error {
					for i, c := range comms {
						if err := nccl.AllReduce[float32](c, streams[i], bufs[i], bufs[i], nccl.Sum); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			wait := func() {
				for i, c := range comms {
					if err := c.Wait(ctx, streams[i]); err != nil {
						b.Fatal(err)
					}
				}
			}
			step() // warm-up: connections
			wait()
			b.SetBytes(int64(size))
			b.ResetTimer()
			start := time.Now()
			for b.Loop() {
				step()
			}
			wait()
			elapsed := time.Since(start)
			algbw := float64(size) * float64(b.N) / elapsed.Seconds() / 1e9
			b.ReportMetric(algbw, "algbw_GB/s")
			b.ReportMetric(algbw*2*float64(n-1)/float64(n), "busbw_GB/s")
		})
	}
}

func sizeName(n int) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
