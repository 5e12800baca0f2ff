package cuda_test

import (
	"testing"
	"unsafe"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Allocations a library makes inside a captured call (stream-ordered, on the capture
// stream) become the graph's own memory nodes, which the executable owns: freed in
// the capture, or left for the next replay to free (Instantiate's auto-free-on-launch),
// so that the executable replays any number of times.
func TestCaptureLibraryAllocations(t *testing.T) {
	_, _, s := loadKernels(t, cudatest.Kernels)
	ctx := s.Context()
	const n = 1 << 16
	out, err := cuda.AllocFor[uint32](s, n)
	require.NoError(t, err)
	defer out.Close()
	po, err := cuda.DevicePtr[uint32](out)
	require.NoError(t, err)
	dst := cudaraw.CUdeviceptr(uintptr(unsafe.Pointer(po)))
	for _, free := range []bool{true, false} {
		name := map[bool]string{true: "freed in the capture", false: "left to the replay"}[free]
		g, err := ctx.Capture(func(cs *cuda.Stream) error {
			// What a library does inside one call: scratch memory from the
			// stream-ordered allocator, used, and (maybe) freed.
			return cuda.Enqueue(cs, func(_ cudaraw.CUcontext, h cudaraw.CUstream) error {
				return ctx.Locked(func() error {
					var p cudaraw.CUdeviceptr
					if err := cudaraw.MemAllocAsync(&p, 4*n, h); err != nil {
						return err
					}
					if err := cudaraw.MemsetD32Async(p, 7, n, h); err != nil {
						return err
					}
					if err := cudaraw.MemcpyDtoDAsync(dst, p, 4*n, h); err != nil {
						return err
					}
					if free {
						return cudaraw.MemFreeAsync(p, h)
					}
					return nil
				})
			}, cuda.Writes(out))
		})
		require.NoError(t, err, name)
		x, err := g.Instantiate()
		require.NoError(t, err, name)
		require.NoError(t, g.Close())
		got := make([]uint32, n)
		for i := range 3 {
			require.NoError(t, out.Memset32Async(s, 0))
			require.NoError(t, x.Launch(s), "%s: replay %d", name, i)
			require.NoError(t, cuda.CopyFromDevice(got, out))
			assert.Equal(t, uint32(7), got[0], name)
			assert.Equal(t, uint32(7), got[n-1], name)
		}
		require.NoError(t, x.Close())
	}
}

// Loading a module while another goroutine captures neither invalidates the capture
// nor waits for it; the new module's kernels run at once.
func TestCaptureWhileLoadingModule(t *testing.T) {
	_, m, s := loadKernels(t, cudatest.Kernels)
	ctx := s.Context()
	fill := function(t, m, "fill_u32")
	const n = 1 << 16
	a, err := cuda.AllocFor[uint32](s, n)
	require.NoError(t, err)
	defer a.Close()
	b, err := cuda.AllocFor[uint32](s, n)
	require.NoError(t, err)
	defer b.Close()
	started, loaded := make(chan struct{}), make(chan error, 1)
	go func() {
		<-started
		loaded <- func() error {
			m2, err := ctx.LoadModule(kernelsPTX)
			if err != nil {
				return err
			}
			defer m2.Close()
			f2, err := m2.Function("fill_u32")
			if err != nil {
				return err
			}
			if err := f2.Launch(s, cuda.D1(64), cuda.D1(256), 0, b, uint32(5), uint64(n)); err != nil {
				return err
			}
			return s.Synchronize()
		}()
	}()
	g, err := ctx.Capture(func(cs *cuda.Stream) error {
		if err := fill.Launch(cs, cuda.D1(64), cuda.D1(256), 0, a, uint32(3), uint64(n)); err != nil {
			return err
		}
		close(started)
		if err := <-loaded; err != nil { // the load, launch and sync, done while capturing
			return err
		}
		return fill.Launch(cs, cuda.D1(64), cuda.D1(256), 0, a, uint32(4), uint64(n))
	})
	require.NoError(t, err)
	defer g.Close()
	got := make([]uint32, n)
	require.NoError(t, cuda.CopyFromDevice(got, b))
	assert.Equal(t, uint32(5), got[n-1], "the other goroutine's kernel ran")
	x, err := g.Instantiate()
	require.NoError(t, err)
	defer x.Close()
	require.NoError(t, x.Launch(s))
	require.NoError(t, cuda.CopyFromDevice(got, a))
	assert.Equal(t, uint32(4), got[n-1])
}
