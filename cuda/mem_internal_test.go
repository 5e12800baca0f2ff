package cuda

import (
	"bytes"
	"math"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/resource"
)

// fakeContext returns a context that was never near a driver: enough for the
// argument checks, which come before any driver call.
func fakeContext() *Context {
	return &Context{ctxState: newCtxState(0xc0ffee, 0, false)}
}

// destroyFake marks a fake context destroyed, as Close does before cuCtxDestroy.
func destroyFake(c *Context) {
	c.hold.close()
	c.dead.Store(true)
}

// fakeStream returns a stream of c that was never near a driver.
func fakeStream(c *Context) *Stream {
	s := &stream{cs: c.ctxState}
	s.gen.Store(1)
	return &Stream{stream: s, ctx: c}
}

// fakeMem returns a context, a stream of it and a buffer of it that were never near
// a driver.
func fakeMem(size int) (*Context, *Stream, *DeviceBuffer) {
	c := fakeContext()
	s := fakeStream(c)
	b := &DeviceBuffer{m: memBase{ctx: c, size: size, elem: 1, kind: KindDevice}}
	return c, s, b
}

func TestMemBadSizesCPU(t *testing.T) {
	for _, n := range []int{0, -1, math.MinInt} {
		c, s, _ := fakeMem(0)
		_, err := c.Alloc(s, n)
		require.ErrorIs(t, err, ErrInvalidArgument, n)
		_, err = c.AllocHost(n)
		require.ErrorIs(t, err, ErrInvalidArgument, n)
		_, err = c.AllocManaged(n)
		require.ErrorIs(t, err, ErrInvalidArgument, n)
		_, err = AllocFor[float32](s, n)
		require.ErrorIs(t, err, ErrInvalidArgument, n)
	}
	_, s, _ := fakeMem(0)
	_, err := AllocFor[float64](s, math.MaxInt/4)
	require.ErrorIs(t, err, ErrInvalidArgument, "size overflows")
	_, err = AllocFor[*int](s, 4)
	require.ErrorIs(t, err, ErrInvalidArgument, "pointers")
	_, err = AllocFor[struct{}](s, 4)
	require.ErrorIs(t, err, ErrInvalidArgument, "zero size")
	_, err = AllocFor[int32](nil, 4)
	require.ErrorIs(t, err, ErrInvalidArgument, "nil stream")

	_, err = Wrap(fakeContext(), []byte{})
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = Wrap(fakeContext(), []string{"x"})
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = Wrap(nil, []byte{1})
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = Wrap[int](fakeContext(), nil)
	require.ErrorIs(t, err, ErrInvalidArgument)
}

func TestMemStreamAndContextChecksCPU(t *testing.T) {
	c, s, _ := fakeMem(0)
	_, err := c.Alloc(nil, 16)
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = (*Context)(nil).Alloc(s, 16)
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = (*Context)(nil).AllocHost(16)
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = (*Context)(nil).AllocManaged(16)
	require.ErrorIs(t, err, ErrInvalidArgument)

	other, os, _ := fakeMem(0)
	_, err = c.Alloc(os, 16)
	require.ErrorIs(t, err, ErrWrongContext)

	closed := fakeStream(c)
	closed.closed.Store(true)
	_, err = c.Alloc(closed, 16)
	require.ErrorIs(t, err, ErrClosed)

	destroyFake(other)
	_, err = other.Alloc(os, 16)
	require.ErrorIs(t, err, ErrClosed)
	_, err = other.AllocHost(16)
	require.ErrorIs(t, err, ErrClosed)
	_, err = Wrap(other, []byte{1})
	require.ErrorIs(t, err, ErrClosed)
}

func TestMemCopyChecksCPU(t *testing.T) {
	c, s, b := fakeMem(64)
	src := make([]float32, 16)
	big := make([]float32, 17)

	// Too long for the buffer, either way.
	require.ErrorIs(t, CopyToDevice(b, big), ErrInvalidArgument)
	require.ErrorIs(t, CopyFromDevice(big, b), ErrInvalidArgument)
	require.ErrorIs(t, CopyToDeviceAsync(s, b, big), ErrInvalidArgument)
	require.ErrorIs(t, CopyFromDeviceAsync(s, big, b), ErrInvalidArgument)
	// Element types the GPU cannot hold.
	require.ErrorIs(t, CopyToDevice(b, []*int{nil}), ErrInvalidArgument)
	require.ErrorIs(t, CopyFromDevice([]struct{ s []int }{{}}, b), ErrInvalidArgument)
	// Nil streams and buffers.
	require.ErrorIs(t, CopyToDeviceAsync(nil, b, src), ErrInvalidArgument)
	require.ErrorIs(t, CopyFromDeviceAsync(nil, src, b), ErrInvalidArgument)
	require.ErrorIs(t, CopyToDevice(nil, src), ErrInvalidArgument)
	require.ErrorIs(t, CopyFromDevice(src, nil), ErrInvalidArgument)
	require.ErrorIs(t, CopyToDevice(&DeviceBuffer{}, src), ErrInvalidArgument)
	require.ErrorIs(t, Copy(nil, b), ErrInvalidArgument)
	require.ErrorIs(t, Copy(b, (*DeviceBuffer)(nil)), ErrInvalidArgument)
	require.ErrorIs(t, Copy(b, (*HostBuffer)(nil)), ErrInvalidArgument)
	require.ErrorIs(t, CopyAsync(nil, b, b), ErrInvalidArgument)
	require.ErrorIs(t, b.Memset8Async(nil, 1), ErrInvalidArgument)
	require.ErrorIs(t, b.Memset16Async(nil, 1), ErrInvalidArgument)
	require.ErrorIs(t, b.Memset32Async(nil, 1), ErrInvalidArgument)
	require.ErrorIs(t, (*DeviceBuffer)(nil).Memset8(1), ErrInvalidArgument)

	// Memset widths that do not divide the size.
	_, _, odd := fakeMem(6)
	require.ErrorIs(t, odd.Memset32(1), ErrInvalidArgument)
	_, _, odd = fakeMem(5)
	require.ErrorIs(t, odd.Memset16(1), ErrInvalidArgument)

	// Another context: the stream's or the other buffer's.
	oc, os, ob := fakeMem(64)
	require.ErrorIs(t, CopyToDeviceAsync(os, b, src), ErrWrongContext)
	require.ErrorIs(t, CopyFromDeviceAsync(os, src, b), ErrWrongContext)
	require.ErrorIs(t, b.Memset8Async(os, 1), ErrWrongContext)
	require.ErrorIs(t, CopyAsync(s, ob, ob), ErrWrongContext)
	_, _, small := fakeMem(8)
	require.ErrorIs(t, Copy(small, b), ErrInvalidArgument, "source larger than destination")

	// Use after Close.
	b.m.hold.close()
	require.ErrorIs(t, CopyToDevice(b, src), ErrClosed)
	require.ErrorIs(t, CopyFromDevice(src, b), ErrClosed)
	require.ErrorIs(t, CopyToDeviceAsync(s, b, src), ErrClosed)
	require.ErrorIs(t, CopyFromDeviceAsync(s, src, b), ErrClosed)
	require.ErrorIs(t, b.Memset8(0), ErrClosed)
	require.ErrorIs(t, b.Memset32Async(s, 0), ErrClosed)
	live := &DeviceBuffer{m: memBase{ctx: c, size: 64, elem: 1}}
	require.ErrorIs(t, Copy(b, live), ErrClosed)
	require.ErrorIs(t, Copy(live, b), ErrClosed)
	require.ErrorIs(t, Copy(b, b), ErrClosed)
	require.ErrorIs(t, (&opPlan{}).hold(&b.m, true, c.ctxState), ErrClosed)

	// A destroyed context.
	destroyFake(oc)
	require.ErrorIs(t, CopyToDevice(ob, src), ErrClosed)
}

func TestMemCloseCPU(t *testing.T) {
	// Nil and zero buffers: the one error of a second Close, no panic.
	for _, c := range []interface{ Close() error }{(*DeviceBuffer)(nil), (*HostBuffer)(nil),
		(*ManagedBuffer)(nil), (*WrappedBuffer)(nil), &WrappedBuffer{}, &DeviceBuffer{}} {
		err := c.Close()
		require.ErrorIs(t, err, ErrClosed, "%T", c)
		require.ErrorIs(t, err, resource.ErrReleased, "%T", c)
	}
	assert.Zero(t, (*DeviceBuffer)(nil).Ptr())
	assert.Zero(t, (*DeviceBuffer)(nil).Size())
	assert.Zero(t, (*DeviceBuffer)(nil).Len())
	assert.Nil(t, (*DeviceBuffer)(nil).Context())
	assert.Zero(t, (*WrappedBuffer)(nil).Size())
	assert.Nil(t, (*HostBuffer)(nil).Bytes())
	assert.Nil(t, HostSlice[float64]((*HostBuffer)(nil)))
	assert.Nil(t, HostSlice[int32]((*ManagedBuffer)(nil)))

	// Double Close, through a registration whose release touches no driver.
	_, _, b := fakeMem(16)
	released := 0
	b.m.reg = resource.ResourceFinalizer(func(b *DeviceBuffer) error {
		released++
		b.m.hold.close()
		return nil
	}, b, false)
	require.NoError(t, b.Close())
	err := b.Close()
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, err, resource.ErrReleased)
	assert.Equal(t, 1, released)

	// Host views of a closed buffer are nil.
	h := &HostBuffer{hostMem{m: memBase{ctx: fakeContext(), size: 16, elem: 1, kind: KindPinned}}}
	h.m.hold.close()
	assert.Nil(t, h.Bytes())
	assert.Nil(t, HostSlice[uint32](h))
}

func TestMemHostClassCPU(t *testing.T) {
	for _, tc := range []struct {
		n, class int
		cached   bool
	}{
		{1, 512, true}, {512, 512, true}, {513, 1024, true}, {4096, 4096, true},
		{4097, 8192, true}, {1 << 20, 1 << 20, true}, {1<<20 + 1, 2 << 20, true},
		{64 << 20, 64 << 20, true}, {64<<20 + 1, 64<<20 + 1, false},
	} {
		class, cached := hostClass(tc.n)
		assert.Equal(t, tc.class, class, tc.n)
		assert.Equal(t, tc.cached, cached, tc.n)
		if cached {
			c2, _ := hostClass(class)
			assert.Equal(t, class, c2, "a class is its own class")
		}
	}
}

func TestMemDeviceClassCPU(t *testing.T) {
	for _, tc := range []struct{ n, size int }{
		{1, 512}, {512, 512}, {513, 1024}, {2048, 2048}, {2049, 2560}, {4096, 4096},
		{4097, 5120}, {5121, 6144}, {7169, 8192}, {8193, 10240}, {1 << 20, 1 << 20},
	} {
		size, class := devClass(tc.n)
		assert.Equal(t, tc.size, size, tc.n)
		require.GreaterOrEqual(t, class, 0, tc.n)
		assert.Equal(t, size, devClassSize(class), "class %d of %d bytes", class, tc.n)
	}
	size, class := devClass(1<<20 + 1)
	assert.Equal(t, 1<<20+1, size, "larger blocks keep their size")
	assert.Equal(t, -1, class)

	// Every size up to the largest cached one: classes are in range, grow with the
	// size, waste at most a quarter (beyond the 512-byte minimum), and a class's
	// size is its own class.
	// (Plain comparisons: a million assertions through testify take seconds.)
	prevSize, prevClass := 0, -1
	for n := 1; n <= devCacheMaxBlock; n++ {
		size, class := devClass(n)
		if class != prevClass {
			if class != prevClass+1 || size <= prevSize {
				t.Fatalf("%d bytes: class %d of %d bytes after class %d of %d bytes", n, class, size, prevClass, prevSize)
			}
			prevClass, prevSize = class, size
		}
		if size != prevSize || size < n || size > max(n+n/4, 512*((n+511)/512)) {
			t.Fatalf("%d bytes: class %d of %d bytes", n, class, size)
		}
	}
	assert.Equal(t, numDevClasses-1, prevClass, "numDevClasses")
}

func TestMemTunablesCPU(t *testing.T) {
	// Limits belong to a context, each starting from the process default.
	c, other := fakeContext(), fakeContext()
	assert.Equal(t, DefaultGCThreshold, c.SetGCThreshold(0.25))
	assert.Equal(t, 0.25, c.SetGCThreshold(math.NaN()))
	assert.Equal(t, 0.0, c.SetGCThreshold(7))
	assert.Equal(t, 1.0, c.SetGCThreshold(-1))
	assert.Equal(t, 0.0, c.SetGCThreshold(0.125))
	assert.Equal(t, DefaultGCThreshold, other.SetGCThreshold(DefaultGCThreshold), "another context's own")

	assert.Equal(t, int64(DefaultCacheLimit), c.SetCacheLimit(1<<20), "default cache limit")
	assert.Equal(t, int64(1<<20), c.SetCacheLimit(-1))
	assert.Equal(t, int64(0), c.SetCacheLimit(5), "negative is 0: no caching")
	assert.Equal(t, int64(DefaultCacheLimit), other.SetCacheLimit(DefaultCacheLimit))

	def := c.SetWrapLimit(1 << 20)
	assert.Equal(t, DefaultWrapLimit(), def)
	assert.Positive(t, def)
	assert.Equal(t, int64(1<<20), c.SetWrapLimit(-5))
	assert.Equal(t, def, c.SetWrapLimit(def), "negative restores the default")

	var z *Context
	assert.Zero(t, z.SetCacheLimit(1))
	assert.Zero(t, (&Context{}).SetWrapLimit(1))
	if runtime.GOOS == "linux" {
		assert.Positive(t, memTotal())
	}

	assert.Equal(t, "device", KindDevice.String())
	assert.Equal(t, "pinned", KindPinned.String())
	assert.Equal(t, "unified", KindUnified.String())
	assert.Equal(t, "wrapped", KindWrapped.String())
	assert.Equal(t, "MemoryKind(9)", MemoryKind(9).String())
	assert.Equal(t, "512 B", fmtBytes(512))
	assert.Equal(t, "1.5 KiB", fmtBytes(1536))
	assert.Equal(t, "140.0 GiB", fmtBytes(140<<30))

	s := MemoryStats{Contexts: []ContextMemoryStats{{Device: 0, Primary: true, Free: 1 << 30, Total: 2 << 30}}}
	s.Contexts[0].Kinds[KindDevice] = PoolStats{Kind: KindDevice, Pool: true, Used: 4096, Reserved: 1 << 21, Buffers: 1, Bytes: 4096}
	s.Contexts[0].Kinds[KindPinned] = PoolStats{Kind: KindPinned, PoolError: cudaraw.ErrNotSupported, Cached: 8192, CachedBlocks: 2}
	out := s.String()
	assert.Contains(t, out, "device 0 (primary context): 1.0 GiB free of 2.0 GiB")
	assert.Contains(t, out, "pool used 4.0 KiB reserved 2.0 MiB")
	assert.Contains(t, out, "no pool")
	assert.Contains(t, out, "cached 8.0 KiB in 2 blocks")
	assert.Contains(t, out, "resources:")
}

func TestMemProfileCPU(t *testing.T) {
	p := pprof.Lookup(MemoryProfileName)
	require.NotNil(t, p)
	before := p.Count()
	prev := EnableMemoryProfile(true)
	defer EnableMemoryProfile(prev)
	m := &memBase{}
	profileAdd(m, 0)
	assert.NotZero(t, m.prof)
	assert.Equal(t, before+1, p.Count())
	var buf bytes.Buffer
	require.NoError(t, p.WriteTo(&buf, 1))
	assert.True(t, strings.Contains(buf.String(), "TestMemProfileCPU"), buf.String())
	profileRemove(m)
	assert.Equal(t, before, p.Count())
	profileRemove(m) // idempotent

	EnableMemoryProfile(false)
	m2 := &memBase{}
	profileAdd(m2, 0)
	assert.Zero(t, m2.prof, "off: nothing recorded")
}
