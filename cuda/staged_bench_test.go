package cuda_test

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/tools/bench/callbench"
)

// BenchmarkStaged sweeps the staged copies' tuning on the GPU, to pick the defaults
// of staged.go (threshold, chunk, depth, workers): synchronous pageable copies of
// warm Go slices, per direction and size, through the driver's direct path (direct)
// and staged with each setting (chunk=…/depth=…/workers=…; workers=0 is
// GOMAXPROCS, at most 8). MB/s shows; the threshold is the smallest size where
// staged beats direct.
//
//	go test ./cuda -run '^$' -bench '^BenchmarkStaged$' -benchtime 0.2s
func BenchmarkStaged(b *testing.B) {
	ctx, s := memSetup(b)
	type setting struct{ chunk, depth, workers int }
	settings := []setting{
		{1 << 20, 2, 0}, {1 << 20, 4, 0},
		{4 << 20, 2, 0}, {4 << 20, 3, 0}, {4 << 20, 4, 0},
		{16 << 20, 2, 0}, {16 << 20, 3, 0},
		{4 << 20, 3, 1}, {4 << 20, 3, 2}, {4 << 20, 3, 4},
		{16 << 20, 3, 4}, {16 << 20, 3, 8}, {16 << 20, 3, 12}, {16 << 20, 3, 16}, {16 << 20, 4, 16},
		{32 << 20, 3, 8}, {32 << 20, 3, 16},
	}
	sizes := []int{256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20}
	def := cuda.StagingForTest()
	for _, dir := range []string{"h2d", "d2h"} {
		for _, n := range sizes {
			d, err := ctx.Alloc(s, n)
			require.NoError(b, err)
			b.Run(fmt.Sprintf("%s/%s/direct", dir, sizeName(n)), func(b *testing.B) {
				st := def
				st.Threshold = 0
				defer cuda.SetStagingForTest(cuda.SetStagingForTest(st))
				benchCopy(b, ctx, d, dir == "h2d", "pageable-warm", n)
			})
			for _, set := range settings {
				name := fmt.Sprintf("%s/%s/chunk=%s/depth=%d/workers=%d", dir, sizeName(n), sizeName(set.chunk), set.depth, set.workers)
				b.Run(name, func(b *testing.B) {
					st := def
					st.Threshold, st.Chunk, st.Depth, st.Workers = 1, set.chunk, set.depth, set.workers
					defer cuda.SetStagingForTest(cuda.SetStagingForTest(st))
					benchCopy(b, ctx, d, dir == "h2d", "pageable-warm", n)
				})
			}
			require.NoError(b, d.Close())
		}
	}
	cuda.DropStagesForTest()
}

func sizeName(n int) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

// BenchmarkCopyPinned looks for the gap between gocuda's pinned copies and C's
// (synchronous Copy between a HostBuffer and device memory), one variant per
// suspect, each in GB/s (MB/s):
//
//	go             Copy as shipped (spin-then-block wait, cuMemcpyAsync)
//	block-wait     the wait before this change: poll 20 µs, yield to 500 µs, then sleep on
//	               the blocking-sync event
//	typed          cuMemcpyHtoDAsync/cuMemcpyDtoHAsync instead of cuMemcpyAsync
//	raw-pool       the raw layer on the same AllocHost memory (the host pool): async copy,
//	               then cuStreamQuery polled, on a locked thread, nothing of the package in between
//	raw-hostalloc  the same raw loop on cuMemHostAlloc memory (what C uses): if it beats
//	               raw-pool, pool-allocated pinned memory DMAs slower
func BenchmarkCopyPinned(b *testing.B) {
	ctx, s := memSetup(b)
	for _, dir := range []string{"h2d", "d2h"} {
		for _, n := range []int{4 << 10, 1 << 20, 64 << 20} {
			d, err := ctx.Alloc(s, n)
			require.NoError(b, err)
			require.NoError(b, d.Memset8(1))
			h, err := ctx.AllocHost(n)
			require.NoError(b, err)
			clear(h.Bytes())
			toDevice := dir == "h2d"
			prefix := dir + "/" + sizeName(n) + "/"
			goCopy := func(b *testing.B) {
				b.SetBytes(int64(n))
				for range b.N {
					if err := copyPinned(d, h, toDevice); err != nil {
						b.Fatal(err)
					}
				}
			}
			for range 100 { // warm-up: the first copies between new buffers are slower
				require.NoError(b, copyPinned(d, h, toDevice))
			}
			def := cuda.SetCopyWaitForTest(cuda.CopyWait{})
			cuda.SetCopyWaitForTest(def)
			b.Run(prefix+"go", goCopy)
			b.Run(prefix+"block-wait", func(b *testing.B) {
				w := def
				w.Spin = false
				defer cuda.SetCopyWaitForTest(cuda.SetCopyWaitForTest(w))
				goCopy(b)
			})
			b.Run(prefix+"untyped", func(b *testing.B) {
				w := def
				w.Typed = false
				defer cuda.SetCopyWaitForTest(cuda.SetCopyWaitForTest(w))
				goCopy(b)
			})
			b.Run(prefix+"raw-pool", func(b *testing.B) {
				lockContext(b, ctx.Handle())
				rawCopies(b, s, d, unsafe.Pointer(&h.Bytes()[0]), n, toDevice)
			})
			b.Run(prefix+"raw-hostalloc", func(b *testing.B) {
				lockContext(b, ctx.Handle())
				var p unsafe.Pointer
				require.NoError(b, cudaraw.MemHostAlloc(&p, uint64(n), 0))
				defer func() { require.NoError(b, cudaraw.MemFreeHost(p)) }()
				clear(unsafe.Slice((*byte)(p), n))
				rawCopies(b, s, d, p, n, toDevice)
			})
			runtime.KeepAlive(h)
			require.NoError(b, h.Close())
			require.NoError(b, d.Close())
		}
	}
}

// rawCopies runs b.N copies of n bytes between host memory at p and d through the
// raw layer on s, each waited for by polling cuStreamQuery (as C's default
// scheduling spins), on the caller's locked thread with the context current.
func rawCopies(b *testing.B, s *cuda.Stream, d *cuda.DeviceBuffer, p unsafe.Pointer, n int, toDevice bool) {
	require.NoError(b, s.Synchronize())
	dp, h := d.Ptr(), s.Handle()
	b.SetBytes(int64(n))
	b.ResetTimer()
	for range b.N {
		var err error
		if toDevice {
			err = cudaraw.MemcpyHtoDAsync(dp, p, uint64(n), h)
		} else {
			err = cudaraw.MemcpyDtoHAsync(p, dp, uint64(n), h)
		}
		for err == nil {
			if err = cudaraw.StreamQuery(h); err == nil {
				break
			}
			if errors.Is(err, cudaraw.ErrNotReady) {
				err = nil
			}
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCopySmall splits the cost of a small synchronous copy (4 KiB, the copy
// rows' goal: within 0.3 µs of C) in one process, alternating chunks of 64 copies
// of each way (callbench.Alternate) between a warm Go slice (pageable) or a
// HostBuffer (pinned) and device memory:
//
//	c-sync    cuMemcpyHtoD / cuMemcpyDtoH from C (what floor.cu times)
//	c-event   the async copy, cuEventRecord and a cuEventQuery spin, from C
//	c-squery  the async copy and a cuStreamQuery spin, from C
//	c-nowait  the async copy alone (h2d pageable: the driver has read the slice on return)
//	go        CopyToDevice / CopyFromDevice (pageable), Copy (pinned)
//	go-async  CopyToDeviceAsync (h2d pageable)
func BenchmarkCopySmall(b *testing.B) {
	ctx, s := memSetup(b)
	proc := func(name string) uintptr {
		p, err := cudaraw.Library().NewProc(name).Addr()
		require.NoError(b, err)
		return p
	}
	record, equery, squery := proc("cuEventRecord"), proc("cuEventQuery"), proc("cuStreamQuery")
	const n = 4 << 10
	d, err := ctx.Alloc(s, n)
	require.NoError(b, err)
	defer d.Close()
	h, err := ctx.AllocHost(n)
	require.NoError(b, err)
	defer h.Close()
	page := make([]byte, n)
	for i := range page {
		page[i] = byte(i)
	}
	clear(h.Bytes())
	require.NoError(b, s.Synchronize())
	for _, dir := range []string{"h2d", "d2h"} {
		for _, kind := range []string{"pageable", "pinned"} {
			b.Run(dir+"/"+kind, func(b *testing.B) {
				lockContext(b, ctx.Handle())
				var ev cudaraw.CUevent
				require.NoError(b, cudaraw.EventCreate(&ev, uint32(cudaraw.CU_EVENT_DISABLE_TIMING)))
				defer cudaraw.EventDestroy(ev)
				h2d := dir == "h2d"
				host := unsafe.Pointer(&page[0])
				if kind == "pinned" {
					host = unsafe.Pointer(&h.Bytes()[0])
				}
				syncFn, asyncFn := proc("cuMemcpyDtoH_v2"), proc("cuMemcpyDtoHAsync_v2")
				if h2d {
					syncFn, asyncFn = proc("cuMemcpyHtoD_v2"), proc("cuMemcpyHtoDAsync_v2")
				}
				st := uintptr(s.Handle())
				c := func(name string, way callbench.CopyWay, fn, query uintptr) callbench.Side {
					return callbench.Side{Name: name, Run: func(k int) (time.Duration, error) {
						t, err := callbench.LoopCopy(h2d, way, fn, record, query, uintptr(d.Ptr()), host, n, st, uintptr(ev), k)
						runtime.KeepAlive(page)
						return t, err
					}}
				}
				sides := []callbench.Side{
					c("c-sync", callbench.CopySync, syncFn, 0),
					c("c-event", callbench.CopyEvent, asyncFn, equery),
					c("c-squery", callbench.CopyStreamQuery, asyncFn, squery),
				}
				if write, err := cudaraw.Library().NewProc("cuStreamWriteValue32_v2").Addr(); err == nil {
					// The word c-flag waits on: cuMemHostAlloc memory, which unified
					// addressing maps at the same address on the device.
					var fp unsafe.Pointer
					require.NoError(b, cudaraw.MemHostAlloc(&fp, 64, 0))
					defer func() { require.NoError(b, cudaraw.MemFreeHost(fp)) }()
					flag := (*uint32)(fp)
					*flag = 0
					sides = append(sides, callbench.Side{Name: "c-flag", Run: func(k int) (time.Duration, error) {
						t, err := callbench.LoopCopyFlag(h2d, asyncFn, write, uintptr(d.Ptr()), host, n, st, uintptr(fp), flag, k)
						runtime.KeepAlive(page)
						return t, err
					}})
				}
				goCopy := func() error { return copyPinned(d, h, h2d) }
				if kind == "pageable" && h2d {
					goCopy = func() error { return cuda.CopyToDevice(d, page) }
					sides = append(sides, c("c-nowait", callbench.CopyNoWait, asyncFn, 0),
						callbench.Loop("go-async", func() error { return cuda.CopyToDeviceAsync(s, d, page) }))
				} else if kind == "pageable" {
					goCopy = func() error { return cuda.CopyFromDevice(page, d) }
				}
				sides = append(sides, callbench.Loop("go", goCopy))
				callbench.Alternate(b, 64, ctx.Synchronize, sides...)
			})
		}
	}
}

// copyPinned copies between d and h (Copy), to d when toDevice.
func copyPinned(d *cuda.DeviceBuffer, h *cuda.HostBuffer, toDevice bool) error {
	if toDevice {
		return cuda.Copy(d, h)
	}
	return cuda.Copy(h, d)
}
