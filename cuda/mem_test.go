package cuda_test

import (
	"bytes"
	_ "embed"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/resource"
)

// memSetup returns device 0's primary context and a stream closed at the end.
func memSetup(t testing.TB, needs ...cudatest.Need) (*cuda.Context, *cuda.Stream) {
	t.Helper()
	return cudatest.Stream(t, needs...)
}

func randFloat32s(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = r.Float32()
	}
	return v
}

func TestMemCopies(t *testing.T) {
	ctx, s := memSetup(t)
	r := rand.New(rand.NewPCG(1, 2))

	// Host → device → device → host on a stream, typed.
	const n = 1<<20 + 3
	src := randFloat32s(r, n)
	d, err := cuda.AllocFor[float32](s, n)
	require.NoError(t, err)
	defer d.Close()
	assert.Equal(t, n, d.Len())
	assert.Equal(t, 4*n, d.Size())
	assert.NotZero(t, d.Ptr())
	assert.Same(t, ctx, d.Context())
	require.NoError(t, cuda.CopyToDeviceAsync(s, d, src))
	d2, err := ctx.Alloc(s, 4*n)
	require.NoError(t, err)
	defer d2.Close()
	require.NoError(t, cuda.CopyAsync(s, d2, d))
	got := make([]float32, n)
	require.NoError(t, cuda.CopyFromDeviceAsync(s, got, d2))
	require.NoError(t, s.Synchronize())
	require.Equal(t, src, got)

	// The waiting forms, with another element type (untyped buffers take any).
	ints := make([]int64, 1000)
	for i := range ints {
		ints[i] = r.Int64()
	}
	b, err := ctx.Alloc(s, 8*len(ints))
	require.NoError(t, err)
	defer b.Close()
	b2, err := ctx.Alloc(s, 8*len(ints))
	require.NoError(t, err)
	defer b2.Close()
	require.NoError(t, cuda.CopyToDevice(b, ints))
	require.NoError(t, cuda.Copy(b2, b))
	gotInts := make([]int64, len(ints))
	require.NoError(t, cuda.CopyFromDevice(gotInts, b2))
	require.Equal(t, ints, gotInts)

	// A struct view of the same bytes, and a prefix.
	type pair struct {
		A int32
		B float32
	}
	pairs := make([]pair, 500)
	require.NoError(t, cuda.CopyFromDevice(pairs, b))
	for i, p := range pairs[:4] {
		raw := uint64(ints[i])
		assert.Equal(t, int32(uint32(raw)), p.A)
	}
	prefix := make([]int64, 10)
	require.NoError(t, cuda.CopyFromDevice(prefix, b2))
	require.Equal(t, ints[:10], prefix)

	// A buffer used on a caller's stream, then with a waiting copy: it runs there.
	require.NoError(t, cuda.CopyToDeviceAsync(s, b, ints[:1]))
	require.NoError(t, cuda.CopyFromDevice(prefix[:1], b))
	assert.Equal(t, ints[0], prefix[0])

	// Bad input after the fact: typed errors, nothing queued.
	require.ErrorIs(t, cuda.CopyToDevice(b, make([]int64, 1001)), cuda.ErrInvalidArgument)
	require.ErrorIs(t, cuda.CopyFromDevice(make([]int64, 1001), b), cuda.ErrInvalidArgument)
	big, err := ctx.Alloc(s, 8*len(ints)+8)
	require.NoError(t, err)
	require.ErrorIs(t, cuda.Copy(b, big), cuda.ErrInvalidArgument)
	require.NoError(t, big.Close())
	require.ErrorIs(t, big.Close(), cuda.ErrClosed)
	require.ErrorIs(t, cuda.CopyToDevice(big, ints), cuda.ErrClosed)
	require.ErrorIs(t, cuda.Copy(big, b), cuda.ErrClosed)
	require.ErrorIs(t, big.Memset8(0), cuda.ErrClosed)
}

func TestMemMemset(t *testing.T) {
	ctx, s := memSetup(t)
	b, err := ctx.Alloc(s, 4096)
	require.NoError(t, err)
	defer b.Close()
	out := make([]byte, 4096)

	require.NoError(t, b.Memset8(0xab))
	require.NoError(t, cuda.CopyFromDevice(out, b))
	require.Equal(t, bytes.Repeat([]byte{0xab}, 4096), out)

	require.NoError(t, b.Memset16Async(s, 0x1234))
	require.NoError(t, cuda.CopyFromDeviceAsync(s, out, b))
	require.NoError(t, s.Synchronize())
	for i := 0; i < len(out); i += 2 {
		require.Equal(t, uint16(0x1234), binary.NativeEndian.Uint16(out[i:]), i)
	}

	require.NoError(t, b.Memset32(0xdeadbeef))
	words := make([]uint32, 1024)
	require.NoError(t, cuda.CopyFromDevice(words, b))
	for i, w := range words {
		require.Equal(t, uint32(0xdeadbeef), w, i)
	}
	require.NoError(t, b.Memset32Async(s, 7))
	require.NoError(t, b.Memset8Async(s, 1))
	require.NoError(t, s.Synchronize())
}

func TestHostBuffer(t *testing.T) {
	ctx, s := memSetup(t)
	r := rand.New(rand.NewPCG(3, 4))
	const size = 1 << 20
	h, err := ctx.AllocHost(size)
	require.NoError(t, err)
	f := cuda.HostSlice[float32](h)
	require.Len(t, f, size/4)
	copy(f, randFloat32s(r, size/4))
	d, err := ctx.Alloc(s, size)
	require.NoError(t, err)
	defer d.Close()
	h2, err := ctx.AllocHost(size)
	require.NoError(t, err)
	require.NoError(t, cuda.CopyAsync(s, d, h))
	require.NoError(t, cuda.CopyAsync(s, h2, d))
	require.NoError(t, s.Synchronize())
	require.Equal(t, f, cuda.HostSlice[float32](h2))
	require.Equal(t, h.Bytes(), h2.Bytes())
	require.NoError(t, h.Close())
	require.ErrorIs(t, h.Close(), cuda.ErrClosed)
	assert.Nil(t, h.Bytes())
	require.ErrorIs(t, cuda.Copy(d, h), cuda.ErrClosed)
	require.NoError(t, h2.Close())

	// A block no GPU work used is reused at once (cache, same size class).
	small, err := ctx.AllocHost(4096)
	require.NoError(t, err)
	p := small.Ptr()
	require.NoError(t, small.Close())
	again, err := ctx.AllocHost(4000)
	require.NoError(t, err)
	assert.Equal(t, p, again.Ptr())
	require.NoError(t, again.Close())

	// A block a pending copy uses is not handed out until the copy is done. The
	// GPU is kept busy with large memsets; the fake driver is paused.
	if cudatest.FakeLoaded() {
		require.NoError(t, cudatest.Pause())
		defer cudatest.Resume()
	} else {
		busy, err := ctx.Alloc(s, 1<<30)
		require.NoError(t, err)
		defer busy.Close()
		for i := range 16 {
			require.NoError(t, busy.Memset32Async(s, uint32(i)))
		}
	}
	d4, err := ctx.Alloc(s, 4096)
	require.NoError(t, err)
	defer d4.Close()
	used, err := ctx.AllocHost(4096)
	require.NoError(t, err)
	usedPtr := used.Ptr()
	require.NoError(t, cuda.CopyAsync(s, d4, used))
	require.NoError(t, used.Close())
	other, err := ctx.AllocHost(4096)
	require.NoError(t, err)
	done, err := s.Query()
	require.NoError(t, err)
	if cudatest.FakeLoaded() {
		require.False(t, done, "paused")
		require.NoError(t, cudatest.Resume())
	}
	require.NoError(t, s.Synchronize())
	if done {
		t.Log("the copy finished before the check: nothing to compare")
	} else {
		assert.NotEqual(t, usedPtr, other.Ptr(), "block reused while a copy from it was pending")
		after, err := ctx.AllocHost(4096)
		require.NoError(t, err)
		assert.Equal(t, usedPtr, after.Ptr(), "block reused once the copy finished")
		require.NoError(t, after.Close())
	}
	require.NoError(t, other.Close())
}

func TestManagedBuffer(t *testing.T) {
	ctx, s := memSetup(t)
	const n = 1 << 18
	m, err := ctx.AllocManaged(4 * n)
	require.NoError(t, err)
	v := cuda.HostSlice[int32](m)
	require.Len(t, v, n)
	for i := range v {
		v[i] = int32(i * 3)
	}
	d, err := ctx.Alloc(s, 4*n)
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, cuda.CopyAsync(s, d, m))
	m2, err := ctx.AllocManaged(4 * n)
	require.NoError(t, err)
	require.NoError(t, cuda.CopyAsync(s, m2, d))
	require.NoError(t, s.Synchronize())
	require.Equal(t, v, cuda.HostSlice[int32](m2))
	require.Equal(t, m.Bytes(), m2.Bytes())
	require.NoError(t, m.Close())
	require.ErrorIs(t, m.Close(), cuda.ErrClosed)
	assert.Nil(t, cuda.HostSlice[int32](m))

	// A waiting copy straight between unified buffers.
	m3, err := ctx.AllocManaged(4 * n)
	require.NoError(t, err)
	require.NoError(t, cuda.Copy(m3, m2))
	require.Equal(t, cuda.HostSlice[int32](m2), cuda.HostSlice[int32](m3))
	require.NoError(t, m2.Close())
	require.NoError(t, m3.Close())
}

func TestWrappedBuffer(t *testing.T) {
	ctx, s := memSetup(t)
	r := rand.New(rand.NewPCG(5, 6))
	const n = 1 << 17 // 1 MiB of float64
	data := make([]float64, n)
	for i := range data {
		data[i] = r.Float64()
	}
	out := make([]float64, n)
	w, err := cuda.Wrap(ctx, data)
	require.NoError(t, err)
	assert.Equal(t, 8*n, w.Size())
	assert.NotZero(t, w.Ptr())
	wo, err := cuda.Wrap(ctx, out)
	require.NoError(t, err)
	d, err := ctx.Alloc(s, 8*n)
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, cuda.CopyAsync(s, d, w))
	require.NoError(t, cuda.CopyAsync(s, wo, d))
	require.NoError(t, wo.Close()) // waits for the copy into out
	require.Equal(t, data, out)
	require.NoError(t, w.Close())
	require.ErrorIs(t, w.Close(), cuda.ErrClosed)
	require.ErrorIs(t, cuda.Copy(d, w), cuda.ErrClosed)

	// Unregistered: the same memory registers again. Dropped without Close, it is
	// unregistered by a background Reclaim once the bytes awaiting exceed the limit.
	prev := ctx.SetWrapLimit(0)
	defer ctx.SetWrapLimit(prev)
	reclaims := cuda.WrapReclaimsForTest()
	live := primaryStats(t).Kinds[cuda.KindWrapped].Buffers
	func() {
		w2, err := cuda.Wrap(ctx, data)
		require.NoError(t, err)
		require.NoError(t, cuda.CopyAsync(s, d, w2))
	}()
	// Until w2 itself is unregistered (a background reclaim started for earlier
	// tests' garbage does not count).
	require.Eventually(t, func() bool {
		runtime.GC()
		st, err := cuda.MemoryStatus()
		if err != nil {
			return false
		}
		for _, c := range st.Contexts {
			if c.Primary && c.Device == 0 {
				return c.Kinds[cuda.KindWrapped].Buffers == live && c.WrappedAwaiting == 0 &&
					cuda.WrapReclaimsForTest() > reclaims
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond)
	w3, err := cuda.Wrap(ctx, data)
	require.NoError(t, err, "registering again after the background unregistration")
	require.NoError(t, w3.Close())
	runtime.KeepAlive(data)
}

// Wrapping a slice again after a WrappedBuffer of it was dropped without Close: the
// dropped one's registration awaits Reclaim, which Wrap runs when the driver reports
// the pages registered, so the new wrap succeeds with no collection by the caller.
func TestWrapAfterDroppedWrap(t *testing.T) {
	ctx, _ := memSetup(t)
	buf := make([]byte, 1<<16)
	for i := range 20 {
		func() {
			_, err := cuda.Wrap(ctx, buf)
			require.NoError(t, err, "round %d", i)
		}()
	}
	w, err := cuda.Wrap(ctx, buf)
	require.NoError(t, err)
	require.NoError(t, w.Close())

	// Overlapping pages that stay registered are an error that says so.
	w, err = cuda.Wrap(ctx, buf)
	require.NoError(t, err)
	defer w.Close()
	_, err = cuda.Wrap(ctx, buf[100:200])
	require.ErrorIs(t, err, cudaraw.ErrHostMemoryAlreadyRegistered)
	assert.Contains(t, err.Error(), "shares pages")
}

// A buffer whose stream was closed is freed on the context's disposal stream after
// the stream's last work; a waiting copy of it sees that work.
func TestMemFreeAfterStreamClose(t *testing.T) {
	ctx, _ := memSetup(t)
	failed := resource.Status().Failed
	s2, err := ctx.NewStream()
	require.NoError(t, err)
	b, err := ctx.Alloc(s2, 1<<20)
	require.NoError(t, err)
	require.NoError(t, b.Memset8Async(s2, 7))
	func() {
		dropped, err := ctx.Alloc(s2, 1<<20)
		require.NoError(t, err)
		require.NoError(t, dropped.Memset8Async(s2, 1))
	}()
	require.NoError(t, s2.Close())
	got := make([]byte, 1<<20)
	require.NoError(t, cuda.CopyFromDevice(got, b))
	require.Equal(t, bytes.Repeat([]byte{7}, 1<<20), got)
	require.NoError(t, b.Close())
	_, err = resource.Reclaim()
	require.NoError(t, err)
	require.NoError(t, ctx.Synchronize())
	assert.Equal(t, failed, resource.Status().Failed)
}

func primaryStats(t *testing.T) cuda.ContextMemoryStats {
	t.Helper()
	st, err := cuda.MemoryStatus()
	require.NoError(t, err)
	for _, c := range st.Contexts {
		if c.Primary && c.Device == 0 {
			return c
		}
	}
	t.Fatalf("no primary context in\n%v", st)
	return cuda.ContextMemoryStats{}
}

// Dropped buffers come back to the pools with resource.Reclaim.
func TestMemPoolUsageAfterReclaim(t *testing.T) {
	ctx, s := memSetup(t)
	prev := ctx.SetGCThreshold(0) // no pressure collection in the middle
	defer ctx.SetGCThreshold(prev)
	// Start from a clean state: earlier garbage freed.
	_, _ = resource.Reclaim()
	require.NoError(t, ctx.Synchronize())
	// Make sure every kind is set up before the baseline.
	h, err := ctx.AllocHost(1)
	require.NoError(t, err)
	require.NoError(t, h.Close())
	m, err := ctx.AllocManaged(1)
	require.NoError(t, err)
	require.NoError(t, m.Close())
	start := primaryStats(t)
	t.Logf("start:\n%v", start)

	keep := make([]*cuda.DeviceBuffer, 0, 64)
	func() {
		for i := range 64 {
			b, err := ctx.Alloc(s, (i+1)<<20)
			require.NoError(t, err)
			require.NoError(t, b.Memset8Async(s, 1))
			keep = append(keep, b)
			h, err := ctx.AllocHost((i + 1) << 12)
			require.NoError(t, err)
			h.Bytes()[0] = 1
			m, err := ctx.AllocManaged((i + 1) << 12)
			require.NoError(t, err)
			m.Bytes()[0] = 1
		}
	}()
	mid := primaryStats(t)
	assert.Greater(t, mid.Kinds[cuda.KindDevice].Used, start.Kinds[cuda.KindDevice].Used)
	assert.Equal(t, start.Kinds[cuda.KindDevice].Buffers+64, mid.Kinds[cuda.KindDevice].Buffers)
	runtime.KeepAlive(keep) // dropped from here on

	_, err = resource.Reclaim()
	require.NoError(t, err)
	require.NoError(t, ctx.Synchronize())
	end := primaryStats(t)
	t.Logf("end:\n%v", end)
	for _, k := range []cuda.MemoryKind{cuda.KindDevice, cuda.KindPinned, cuda.KindUnified} {
		assert.Equal(t, start.Kinds[k].Buffers, end.Kinds[k].Buffers, k)
		assert.Equal(t, start.Kinds[k].Bytes, end.Kinds[k].Bytes, k)
	}
	dev := func(p cuda.PoolStats) int64 { return int64(p.Used) - p.Cached }
	assert.Equal(t, dev(start.Kinds[cuda.KindDevice]), dev(end.Kinds[cuda.KindDevice]), "device pool in use, less the cache")
	assert.True(t, end.Kinds[cuda.KindDevice].Pool)
	assert.GreaterOrEqual(t, end.Kinds[cuda.KindDevice].Reserved, end.Kinds[cuda.KindDevice].Used)
	st, err := cuda.MemoryStatus()
	require.NoError(t, err)
	t.Logf("MemoryStatus:\n%v", st)
	assert.Contains(t, st.String(), "device 0 (primary context)")
}

// An allocation that runs out of memory while garbage buffers hold it reclaims them
// and succeeds on its retry; one that cannot fit fails with ErrOutOfMemory and the
// size.
func TestMemOOMReclaimRetry(t *testing.T) {
	ctx, s := memSetup(t)
	prev := ctx.SetGCThreshold(0) // no pressure collections: only OOM reclaims
	defer ctx.SetGCThreshold(prev)
	defer func() {
		_, _ = resource.Reclaim()
		_ = ctx.Synchronize()
		cuda.TrimPoolsForTest(ctx)
	}()
	total, err := ctx.Device().TotalMemory()
	require.NoError(t, err)
	chunk := min(8<<30, int(total/8)) // 8 GiB on a GPU; the fake driver's device is small
	n := int(total)/chunk + 2
	before := cuda.OOMReclaimsForTest()
	start := time.Now()
	for i := range n {
		b, err := ctx.Alloc(s, chunk)
		require.NoError(t, err, "allocation %d of %d × %d MiB (device has %d GiB)", i+1, n, chunk>>20, total>>30)
		// Used (one byte: the fake driver's device memory is host memory), then
		// dropped: garbage.
		require.NoError(t, cuda.CopyToDeviceAsync(s, b, []byte{1}))
	}
	t.Logf("%d × %d MiB on a %.1f GiB device in %v, %d reclaims", n, chunk>>20, float64(total)/(1<<30), time.Since(start), cuda.OOMReclaimsForTest()-before)
	assert.Greater(t, cuda.OOMReclaimsForTest(), before)

	// Live buffers cannot be reclaimed: the allocation that does not fit fails.
	var keep []*cuda.DeviceBuffer
	defer func() {
		for _, b := range keep {
			require.NoError(t, b.Close())
		}
	}()
	for {
		b, err := ctx.Alloc(s, chunk)
		if err != nil {
			require.ErrorIs(t, err, cudaraw.ErrOutOfMemory)
			assert.Contains(t, err.Error(), fmt.Sprintf("allocating %d bytes", chunk))
			break
		}
		keep = append(keep, b)
		require.Less(t, len(keep), n, "more buffers than the device holds")
	}
}

// Allocating past the threshold starts a collection that frees dropped buffers
// without any call from the program.
func TestMemPressure(t *testing.T) {
	ctx, s := memSetup(t)
	total, err := ctx.Device().TotalMemory()
	require.NoError(t, err)
	prev := ctx.SetGCThreshold(float64(4<<20) / float64(total)) // every 4 MiB
	defer ctx.SetGCThreshold(prev)
	collections := cuda.PressureCollectionsForTest()
	released := resource.Status().ReleasedNonBlocking
	for range 64 {
		_, err := ctx.Alloc(s, 1<<20)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		_, _ = ctx.Alloc(s, 1<<20) // allocations drain what the collection found
		return cuda.PressureCollectionsForTest() > collections && resource.Status().ReleasedNonBlocking > released
	}, 5*time.Second, 10*time.Millisecond)
}

func TestMemoryProfile(t *testing.T) {
	ctx, s := memSetup(t)
	p := pprof.Lookup(cuda.MemoryProfileName)
	require.NotNil(t, p)
	prev := cuda.EnableMemoryProfile(true)
	defer cuda.EnableMemoryProfile(prev)
	before := p.Count()
	b, err := ctx.Alloc(s, 4096)
	require.NoError(t, err)
	h, err := ctx.AllocHost(4096)
	require.NoError(t, err)
	assert.Equal(t, before+2, p.Count())
	var buf bytes.Buffer
	require.NoError(t, p.WriteTo(&buf, 1))
	out := buf.String()
	assert.Contains(t, out, "cuda.(*Context).Alloc")
	assert.Contains(t, out, "cuda.(*Context).AllocHost")
	for _, rec := range strings.Split(out, "\n\n") {
		if i := strings.Index(rec, "#\t"); i >= 0 && rec[i:] != "" {
			assert.Contains(t, strings.SplitN(rec[i:], "\n", 2)[0], "cuda.(*Context).Alloc", "each trace starts at the allocating function")
		}
	}
	assert.Contains(t, out, "TestMemoryProfile")
	require.NoError(t, b.Close())
	require.NoError(t, h.Close())
	assert.Equal(t, before, p.Count())
}

// Without pools (older drivers), pinned and unified memory come from cuMemAllocHost
// and cuMemAllocManaged through the same cache. Buffers of two contexts do not mix.
func TestMemFallbackAndContexts(t *testing.T) {
	ctx, s := memSetup(t)
	cuda.SetNoHostPoolsForTest(true) // for contexts set up from now on
	defer cuda.SetNoHostPoolsForTest(false)
	other, err := cuda.NewContext(0, 0)
	require.NoError(t, err)
	defer other.Close()
	os2, err := other.NewStream()
	require.NoError(t, err)
	defer os2.Close()

	h, err := other.AllocHost(4096)
	require.NoError(t, err)
	copy(h.Bytes(), bytes.Repeat([]byte{5}, 4096))
	d, err := other.Alloc(os2, 4096)
	require.NoError(t, err)
	require.NoError(t, cuda.CopyAsync(os2, d, h))
	m, err := other.AllocManaged(4096)
	require.NoError(t, err)
	require.NoError(t, cuda.CopyAsync(os2, m, d))
	require.NoError(t, os2.Synchronize())
	require.Equal(t, h.Bytes(), m.Bytes())
	p := h.Ptr()
	require.NoError(t, h.Close())
	// The block is reused once its last use (the copy on os2) is known to be done:
	// the fence recorded at Close.
	require.NoError(t, os2.Synchronize())
	h2, err := other.AllocHost(4096)
	require.NoError(t, err)
	assert.Equal(t, p, h2.Ptr(), "fallback blocks are cached too")

	st, err := cuda.MemoryStatus()
	require.NoError(t, err)
	var found bool
	for _, c := range st.Contexts {
		if !c.Primary {
			found = true
			assert.False(t, c.Kinds[cuda.KindPinned].Pool)
			assert.Error(t, c.Kinds[cuda.KindPinned].PoolError)
			assert.False(t, c.Kinds[cuda.KindUnified].Pool)
		}
	}
	assert.True(t, found, "%v", st)
	t.Logf("%v", st)

	// Mixing contexts.
	mine, err := ctx.Alloc(s, 4096)
	require.NoError(t, err)
	defer mine.Close()
	require.NoError(t, cuda.Copy(mine, d), "a copy between contexts (peer.go)")
	require.ErrorIs(t, cuda.CopyAsync(s, d, d), cuda.ErrWrongContext)
	_, err = ctx.Alloc(os2, 16)
	require.ErrorIs(t, err, cuda.ErrWrongContext)
	require.ErrorIs(t, cuda.CopyToDeviceAsync(s, d, []byte{1}), cuda.ErrWrongContext)

	require.NoError(t, h2.Close())
	require.NoError(t, m.Close())
	require.NoError(t, d.Close())
}

//go:embed testdata/kernels.ptx
var memKernels []byte

// Kernels write unified and pinned memory through their device addresses; the host
// reads the result through the slices.
func TestMemKernelArgs(t *testing.T) {
	ctx, s := memSetup(t, cudatest.Kernels)
	mod, err := ctx.LoadModule(memKernels)
	require.NoError(t, err)
	defer mod.Close()
	fill, err := mod.Function("fill_u32")
	require.NoError(t, err)
	const n = 1 << 16
	m, err := ctx.AllocManaged(4 * n)
	require.NoError(t, err)
	h, err := ctx.AllocHost(4 * n)
	require.NoError(t, err)
	d, err := cuda.AllocFor[uint32](s, n)
	require.NoError(t, err)
	grid, block := cuda.D1(cuda.Blocks(n, 256)), cuda.D1(256)
	require.NoError(t, fill.Launch(s, grid, block, 0, m, uint32(9), uint64(n)))
	require.NoError(t, fill.Launch(s, grid, block, 0, h, uint32(8), uint64(n)))
	require.NoError(t, fill.Launch(s, grid, block, 0, d, uint32(7), uint64(n)))
	require.NoError(t, s.Synchronize())
	for i, v := range cuda.HostSlice[uint32](m) {
		require.Equal(t, uint32(9), v, i)
	}
	for i, v := range cuda.HostSlice[uint32](h) {
		require.Equal(t, uint32(8), v, i)
	}
	got := make([]uint32, n)
	require.NoError(t, cuda.CopyFromDevice(got, d)) // on s, where the kernel ran
	for i, v := range got {
		require.Equal(t, uint32(7), v, i)
	}
	require.NoError(t, m.Close())
	require.NoError(t, h.Close())
	require.NoError(t, d.Close())
	err = fill.Launch(s, grid, block, 0, m, uint32(9), uint64(n))
	require.ErrorIs(t, err, cuda.ErrClosed)
}

// A device buffer closed on its stream leaves its block in the stream's cache: the
// next allocation of its size class on that stream reuses it without the driver,
// other streams do not, and closing the stream gives the blocks back to the pool.
func TestMemDeviceCache(t *testing.T) {
	ctx, _ := memSetup(t)
	s, err := ctx.NewStream()
	require.NoError(t, err)
	other, err := ctx.NewStream()
	require.NoError(t, err)
	defer other.Close()
	warm, err := ctx.Alloc(other, 2<<20) // sets up the context's memory; not cached
	require.NoError(t, err)
	require.NoError(t, warm.Close())
	// Buffers that earlier tests dropped are released now, not into the caches
	// while this test counts them.
	_, err = resource.Reclaim()
	require.NoError(t, err)
	require.NoError(t, s.Synchronize())
	start := primaryStats(t).Kinds[cuda.KindDevice]

	a, err := ctx.Alloc(s, 4096)
	require.NoError(t, err)
	pa := a.Ptr()
	require.NoError(t, a.Memset32Async(s, 7))
	require.NoError(t, a.Close())
	mid := primaryStats(t).Kinds[cuda.KindDevice]
	assert.Equal(t, start.Cached+4096, mid.Cached, "the closed block is cached")
	assert.Equal(t, start.CachedBlocks+1, mid.CachedBlocks)

	// Another stream may not take it (s's memset may still be running).
	c, err := ctx.Alloc(other, 4096)
	require.NoError(t, err)
	assert.NotEqual(t, pa, c.Ptr(), "another stream's cached block")
	require.NoError(t, c.Close())

	// The same stream, a size of the same class (4000 rounds to 4096): reused, and
	// ordered after the memset on s.
	b, err := ctx.Alloc(s, 4000)
	require.NoError(t, err)
	assert.Equal(t, pa, b.Ptr(), "the cached block is reused")
	assert.Equal(t, 4000, b.Size())
	got := make([]uint32, 1000)
	require.NoError(t, cuda.CopyFromDeviceAsync(s, got, b))
	require.NoError(t, s.Synchronize())
	for i, v := range got {
		require.Equal(t, uint32(7), v, "element %d", i)
	}
	require.NoError(t, b.Close())

	// With caching off, a closed block goes straight back to the pool.
	prev := ctx.SetCacheLimit(0)
	d, err := ctx.Alloc(s, 1<<16)
	require.NoError(t, err)
	before := primaryStats(t).Kinds[cuda.KindDevice].Cached
	require.NoError(t, d.Close())
	assert.Equal(t, before, primaryStats(t).Kinds[cuda.KindDevice].Cached, "nothing cached at limit 0")
	ctx.SetCacheLimit(prev)

	// Closing the stream frees its cached blocks.
	require.NoError(t, s.Close())
	require.NoError(t, ctx.Synchronize())
	end := primaryStats(t).Kinds[cuda.KindDevice]
	assert.Equal(t, start.Cached+4096, end.Cached, "other's block stays cached")
	require.NoError(t, other.Close())
	require.NoError(t, ctx.Synchronize())
	end = primaryStats(t).Kinds[cuda.KindDevice]
	assert.Equal(t, start.Cached, end.Cached, "closed streams hold no cache")
	assert.Equal(t, start.CachedBlocks, end.CachedBlocks)
	assert.Equal(t, int64(start.Used)-start.Cached, int64(end.Used)-end.Cached, "pool in use, less the cache")
}

// Running out of memory empties the device caches before reclaiming, so memory
// cached on one stream serves an allocation on another.
func TestMemDeviceCacheFlushedForOOM(t *testing.T) {
	ctx, s := memSetup(t)
	var keep []*cuda.DeviceBuffer
	for range 8 {
		b, err := ctx.Alloc(s, 1<<20)
		require.NoError(t, err)
		keep = append(keep, b)
	}
	for _, b := range keep {
		require.NoError(t, b.Close())
	}
	require.GreaterOrEqual(t, primaryStats(t).Kinds[cuda.KindDevice].Cached, int64(8<<20))
	cuda.FlushCachesForTest(ctx)
	assert.Zero(t, primaryStats(t).Kinds[cuda.KindDevice].Cached)
	assert.Zero(t, primaryStats(t).Kinds[cuda.KindDevice].CachedBlocks)
}

// Many goroutines allocating and closing on one stream share its cache safely.
func TestMemDeviceCacheConcurrent(t *testing.T) {
	ctx, s := memSetup(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				b, err := ctx.Alloc(s, 512*(1+(g+i)%8))
				if !assert.NoError(t, err) {
					return
				}
				assert.NoError(t, b.Memset8Async(s, byte(i)))
				assert.NoError(t, b.Close())
			}
		}()
	}
	wg.Wait()
	require.NoError(t, s.Synchronize())
	st := primaryStats(t).Kinds[cuda.KindDevice]
	assert.LessOrEqual(t, st.CachedBlocks, 8*32)
}

// A stream dropped without Close gives its cached blocks back when it is collected.
func TestMemDeviceCacheDroppedStream(t *testing.T) {
	ctx, ws := memSetup(t)
	warm, err := ctx.Alloc(ws, 2<<20) // sets up device 0's memory; not cached
	require.NoError(t, err)
	require.NoError(t, warm.Close())
	_, err = resource.Reclaim()
	require.NoError(t, err)
	require.NoError(t, ctx.Synchronize())
	start := primaryStats(t).Kinds[cuda.KindDevice]

	func() {
		s, err := ctx.NewStream()
		require.NoError(t, err)
		for i := range 8 {
			b, err := ctx.Alloc(s, 4096*(i+1))
			require.NoError(t, err)
			require.NoError(t, b.Memset8Async(s, 1))
			require.NoError(t, b.Close())
		}
		mid := primaryStats(t).Kinds[cuda.KindDevice]
		require.Equal(t, start.CachedBlocks+8, mid.CachedBlocks, "the closed blocks are cached")
	}() // s is dropped here

	_, err = resource.Reclaim()
	require.NoError(t, err)
	require.NoError(t, ctx.Synchronize())
	end := primaryStats(t).Kinds[cuda.KindDevice]
	assert.Equal(t, start.Cached, end.Cached, "the dropped stream's cache was emptied")
	assert.Equal(t, start.CachedBlocks, end.CachedBlocks)
	assert.Equal(t, int64(start.Used)-start.Cached, int64(end.Used)-end.Cached, "pool in use, less the cache")
}
