package cuda_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/tools/bench/callbench"
)

// BenchmarkAlloc mirrors the alloc/touch/free loops of ../shared/anchors/floors.cu:
// device memory is touched with a memset on the stream and the stream is synchronized
// once at the end (timed); pinned and unified memory are touched from Go with clear,
// Go's memset, as the C loops touch them with memset(p, 0, n). The
// "pool" variants bypass the package's caches of freed blocks (Context.SetCacheLimit(0)), to
// compare with the C loops over the same pools (floors on an H200: device 4 KiB
// 2.27 µs, 64 MiB 22.5 µs; pinned pool 7.6 µs, 3260 µs; unified pool 3.4 µs, 3238 µs;
// CuPy's cached pinned pool 2.8 µs).
func BenchmarkAlloc(b *testing.B) {
	ctx, s := memSetup(b)
	sizes := []struct {
		name string
		n    int
	}{{"4KiB", 4 << 10}, {"64MiB", 64 << 20}}
	for _, sz := range sizes {
		for _, cached := range []bool{true, false} {
			name := "device/"
			if !cached {
				name = "device-pool/"
			}
			b.Run(name+sz.name, func(b *testing.B) {
				if !cached {
					defer ctx.SetCacheLimit(ctx.SetCacheLimit(0))
				}
				benchDevice(b, ctx, s, sz.n)
			})
		}
		for _, cached := range []bool{true, false} {
			suffix := ""
			if !cached {
				suffix = "-pool"
			}
			b.Run("pinned"+suffix+"/"+sz.name, func(b *testing.B) {
				if !cached {
					defer ctx.SetCacheLimit(ctx.SetCacheLimit(0))
				}
				b.SetBytes(int64(sz.n))
				b.ResetTimer()
				for range b.N {
					h, err := ctx.AllocHost(sz.n)
					if err != nil {
						b.Fatal(err)
					}
					clear(h.Bytes())
					if err := h.Close(); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("unified"+suffix+"/"+sz.name, func(b *testing.B) {
				if !cached {
					defer ctx.SetCacheLimit(ctx.SetCacheLimit(0))
				}
				b.SetBytes(int64(sz.n))
				b.ResetTimer()
				for range b.N {
					m, err := ctx.AllocManaged(sz.n)
					if err != nil {
						b.Fatal(err)
					}
					clear(m.Bytes())
					if err := m.Close(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// benchDevice allocates n bytes of device memory on s, sets them and closes the
// buffer, b.N times, and waits for s at the end (timed).
func benchDevice(b *testing.B, ctx *cuda.Context, s *cuda.Stream, n int) {
	b.SetBytes(int64(n))
	b.ResetTimer()
	for range b.N {
		d, err := ctx.Alloc(s, n)
		if err != nil {
			b.Fatal(err)
		}
		if err := d.Memset8Async(s, 1); err != nil {
			b.Fatal(err)
		}
		if err := d.Close(); err != nil {
			b.Fatal(err)
		}
	}
	require.NoError(b, s.Synchronize())
}

// BenchmarkAllocPair puts the device 4 KiB alloc/touch/free loop beside the same loop
// in C (callbench.LoopAlloc), alternating chunks as BenchmarkLaunch's pairs do:
//
//	go    Context.Alloc, Memset8Async, Close
//	raw   the three generated calls (cgo's share: three crossings)
//	once  the three driver calls in one cgo call (one crossing)
func BenchmarkAllocPair(b *testing.B) {
	ctx, s := memSetup(b)
	const size = 4 << 10
	lib := cudaraw.Library()
	addr := func(name string) uintptr {
		p, err := lib.NewProc(name).Addr()
		require.NoError(b, err)
		return p
	}
	fa, fm, ff := addr("cuMemAllocAsync"), addr("cuMemsetD8Async"), addr("cuMemFreeAsync")
	sh := s.Handle()
	c := func(k int) time.Duration {
		d, err := callbench.LoopAlloc(fa, fm, ff, uintptr(sh), size, k)
		require.NoError(b, err)
		return d
	}
	settle := func() {
		b.StopTimer()
		require.NoError(b, s.Synchronize())
		b.StartTimer()
	}
	h := ctx.Handle()
	goLoop := goLoopOf(b, func() error {
		d, err := ctx.Alloc(s, size)
		if err != nil {
			return err
		}
		if err := d.Memset8Async(s, 1); err != nil {
			return err
		}
		return d.Close()
	})
	b.Run("go", func(b *testing.B) {
		lockContext(b, h)
		pairLoops(b, settle, goLoop, c)
	})
	// The same without the package's cache: every allocation and free goes to the
	// driver, as in the C loop.
	b.Run("go-pool", func(b *testing.B) {
		defer ctx.SetCacheLimit(ctx.SetCacheLimit(0))
		lockContext(b, h)
		pairLoops(b, settle, goLoop, c)
	})
	b.Run("raw", func(b *testing.B) {
		lockContext(b, h)
		pairLoops(b, settle, goLoopOf(b, func() error {
			var p cudaraw.CUdeviceptr
			if err := cudaraw.MemAllocAsync(&p, size, sh); err != nil {
				return err
			}
			if err := cudaraw.MemsetD8Async(p, 1, size, sh); err != nil {
				return err
			}
			return cudaraw.MemFreeAsync(p, sh)
		}), c)
	})
	b.Run("once", func(b *testing.B) {
		lockContext(b, h)
		pairLoops(b, settle, goLoopOf(b, func() error {
			return callbench.AllocOnce(fa, fm, ff, uintptr(sh), size)
		}), c)
	})
}
