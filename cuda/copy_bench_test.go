package cuda_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
)

// copySizes are the sizes of the bandwidth rows (tools/bench's copy/... workloads).
var copySizes = []struct {
	name string
	n    int
}{{"4KiB", 4 << 10}, {"1MiB", 1 << 20}, {"64MiB", 64 << 20}, {"1GiB", 1 << 30}}

// BenchmarkCopyBW measures synchronous host ↔ device copies through the public API,
// as tools/floor's copy/<dir>/<kind>/<size> rows do in C (cuMemcpyHtoD/DtoH), with
// b.SetBytes so that MB/s shows:
//
//	<dir>          h2d (CopyToDevice, Copy(d, pinned)) or d2h (CopyFromDevice, Copy(pinned, d))
//	pageable-warm  the same Go slice every time (its pages are mapped)
//	pageable-fresh a slice of fresh anonymous memory every time (mmap, off the clock): its
//	               first touch happens inside the copy (C: the same with mmap)
//	pinned         a HostBuffer (Copy)
func BenchmarkCopyBW(b *testing.B) {
	ctx, s := memSetup(b)
	for _, dir := range []string{"h2d", "d2h"} {
		for _, kind := range []string{"pageable-warm", "pageable-fresh", "pinned"} {
			for _, sz := range copySizes {
				b.Run(dir+"/"+kind+"/"+sz.name, func(b *testing.B) {
					d, err := ctx.Alloc(s, sz.n)
					require.NoError(b, err)
					defer d.Close()
					require.NoError(b, d.Memset8(1))
					benchCopy(b, ctx, d, dir == "h2d", kind, sz.n)
				})
			}
		}
	}
}

// benchCopy runs b.N synchronous copies of n bytes of the kind between d and the host.
func benchCopy(b *testing.B, ctx *cuda.Context, d *cuda.DeviceBuffer, toDevice bool, kind string, n int) {
	b.SetBytes(int64(n))
	switch kind {
	case "pageable-warm":
		h := make([]byte, n)
		for i := range h {
			h[i] = byte(i)
		}
		b.ResetTimer()
		for range b.N {
			if toDevice {
				err := cuda.CopyToDevice(d, h)
				if err != nil {
					b.Fatal(err)
				}
			} else if err := cuda.CopyFromDevice(h, d); err != nil {
				b.Fatal(err)
			}
		}
	case "pageable-fresh":
		// Only the copies on the clock, timed here: b.StopTimer and b.StartTimer read
		// the memory statistics (stopping the world) at every call, which would weigh
		// on the small copies.
		b.ResetTimer()
		var total time.Duration
		for range b.N {
			h, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
			if err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			if toDevice {
				err = cuda.CopyToDevice(d, h)
			} else {
				err = cuda.CopyFromDevice(h, d)
			}
			total += time.Since(t0)
			if err != nil {
				b.Fatal(err)
			}
			if err := syscall.Munmap(h); err != nil {
				b.Fatal(err)
			}
		}
		ns := float64(total.Nanoseconds()) / float64(b.N)
		b.ReportMetric(ns, "ns/op")
		b.ReportMetric(float64(n)/ns*1e3, "MB/s")
	case "pinned":
		h, err := ctx.AllocHost(n)
		require.NoError(b, err)
		defer h.Close()
		clear(h.Bytes())
		b.ResetTimer()
		for range b.N {
			if err := copyPinned(d, h, toDevice); err != nil {
				b.Fatal(err)
			}
		}
	default:
		panic(fmt.Sprintf("kind %q", kind))
	}
	b.StopTimer()
}
