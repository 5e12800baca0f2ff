package cuda_test

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/resource"
	"github.com/gocuda/gocuda/tools/bench/callbench"
)

// Copies into Go slices bounce through page-locked memory, byte for byte right, at
// sizes around the limit (set to 64 KiB here; no bounce past it), into fresh and
// reused slices, in the synchronous and stream forms.
func TestCopyBounced(t *testing.T) {
	ctx, s := memSetup(t)
	limit := cuda.SetBounceMaxForTest(64 << 10)
	defer cuda.SetBounceMaxForTest(limit)
	src := make([]byte, 64<<10+1)
	for i := range src {
		src[i] = byte(i*13 + 1)
	}
	d, err := ctx.Alloc(s, len(src))
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, cuda.CopyToDevice(d, src))
	for _, n := range []int{1, 4 << 10, 4<<10 + 3, 64 << 10, 64<<10 + 1} {
		v, err := d.Slice(0, n)
		require.NoError(t, err)
		before := cuda.BouncedCopiesForTest()
		got := make([]byte, n) // fresh
		require.NoError(t, cuda.CopyFromDevice(got, v))
		assert.Equal(t, src[:n], got, "%d bytes, fresh slice", n)
		clear(got)
		require.NoError(t, cuda.CopyFromDeviceAsync(s, got, v))
		assert.Equal(t, src[:n], got, "%d bytes, reused slice, on a stream", n)
		bounced := int64(2)
		if n > 64<<10 {
			bounced = 0
		}
		assert.Equal(t, bounced, cuda.BouncedCopiesForTest()-before, "%d bytes", n)
	}

	// Closed memory: the error, and the bounce buffer is kept for the next copy.
	w, err := ctx.Alloc(s, 16)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.ErrorIs(t, cuda.CopyFromDevice(make([]byte, 16), w), cuda.ErrClosed)
}

// resource.Reclaim frees the context's idle bounce buffer; the next bounced copy
// makes and keeps another.
func TestReclaimDropsBounceBuffer(t *testing.T) {
	ctx, s := memSetup(t)
	d, err := ctx.Alloc(s, 4<<10)
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, d.Memset8(7))
	_, err = resource.Reclaim() // a buffer other tests left, of another size
	require.NoError(t, err)
	got := make([]byte, 4<<10)
	require.NoError(t, cuda.CopyFromDevice(got, d))
	require.True(t, cuda.BounceKeptForTest(ctx), "a bounced copy keeps its buffer")
	_, err = resource.Reclaim()
	require.NoError(t, err)
	assert.False(t, cuda.BounceKeptForTest(ctx), "Reclaim frees it")
	clear(got)
	require.NoError(t, cuda.CopyFromDevice(got, d))
	assert.Equal(t, bytes.Repeat([]byte{7}, 4<<10), got)
	assert.True(t, cuda.BounceKeptForTest(ctx), "kept again")
}

// Many goroutines copy into their own slices at once: one bounce buffer is kept,
// the others allocate their own; every copy is right.
func TestCopyBouncedConcurrent(t *testing.T) {
	ctx, s := memSetup(t)
	const n = 4<<10 + 5
	src := make([]byte, n)
	for i := range src {
		src[i] = byte(i * 3)
	}
	d, err := ctx.Alloc(s, n)
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, cuda.CopyToDevice(d, src))
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			got := make([]byte, n)
			for range 20 {
				clear(got)
				if !assert.NoError(t, cuda.CopyFromDevice(got, d)) || !assert.Equal(t, src, got) {
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkCopyBounce picks bounceMax: device-to-host copies into a warm Go slice,
// per size, from C (cuMemcpyDtoH, the driver's pageable path), through the
// package's direct path (the same driver call) and bounced, alternating in one
// process. bounceMax is the largest size where bounce beats direct.
//
//	go test ./cuda -run '^$' -bench '^BenchmarkCopyBounce$'
func BenchmarkCopyBounce(b *testing.B) {
	ctx, s := memSetup(b)
	dtoh, err := cudaraw.Library().NewProc("cuMemcpyDtoH_v2").Addr()
	require.NoError(b, err)
	for _, n := range []int{4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20} {
		b.Run(fmt.Sprintf("%dKiB", n>>10), func(b *testing.B) {
			d, err := ctx.Alloc(s, n)
			require.NoError(b, err)
			defer d.Close()
			require.NoError(b, d.Memset8Async(s, 1))
			dst := make([]byte, n)
			lockContext(b, ctx.Handle())
			limit := cuda.SetBounceMaxForTest(0)
			defer cuda.SetBounceMaxForTest(limit)
			via := func(max int) func() error {
				return func() error {
					cuda.SetBounceMaxForTest(max)
					return cuda.CopyFromDevice(dst, d)
				}
			}
			callbench.Alternate(b, 32, s.Synchronize,
				callbench.Side{Name: "c-sync", Run: func(k int) (time.Duration, error) {
					t, err := callbench.LoopCopy(false, callbench.CopySync, dtoh, 0, 0, uintptr(d.Ptr()), unsafe.Pointer(&dst[0]), n, 0, 0, k)
					runtime.KeepAlive(dst)
					return t, err
				}},
				callbench.Loop("direct", via(0)),
				callbench.Loop("bounce", via(n)))
			b.SetBytes(int64(n))
		})
	}
}
