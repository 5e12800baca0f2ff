package cuda_test

import (
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/stretchr/testify/require"
)

// Copies between contexts on a GPU, after kernels: a kernel on one context writes a
// buffer behind a gate kernel (so that an unordered copy would read stale data), a
// copy from a stream of the other context moves it, and the host checks it.

// gpuPeerHandOff runs the gate and fill on a's stream, copies into b's memory from
// b's stream, and checks the data; then the same after a kernel add on b's side, the
// copy back queued on a's stream.
func gpuPeerHandOff(t *testing.T, a, b *cuda.Context) {
	cudatest.Require(t, cudatest.Kernels)
	mod, err := a.LoadModule(kernelsPTX)
	require.NoError(t, err)
	defer mod.Close()
	spin, fill := function(t, mod, "spin"), function(t, mod, "fill_u32")
	modB, err := b.LoadModule(kernelsPTX)
	require.NoError(t, err)
	defer modB.Close()
	add := function(t, modB, "add_u32")
	sa, sb := streams(t, a, 1)[0], streams(t, b, 1)[0]
	const n = 1 << 22
	src, err := cuda.AllocFor[uint32](sa, n)
	require.NoError(t, err)
	defer src.Close()
	dst, err := cuda.AllocFor[uint32](sb, n)
	require.NoError(t, err)
	defer dst.Close()
	require.NoError(t, dst.Memset32(0))
	check := func(b *cuda.DeviceBuffer, want uint32, what string) {
		t.Helper()
		out := make([]uint32, n)
		require.NoError(t, cuda.CopyFromDevice(out, b))
		for i, v := range out {
			if v != want {
				t.Fatalf("%s: element %d is %d, want %d", what, i, v, want)
			}
		}
	}
	for round := range 3 {
		v := uint32(round*10 + 1)
		require.NoError(t, spin.Launch(sa, cuda.D1(1), cuda.D1(1), 0, uint64(gateNs/10)))
		require.NoError(t, fill.Launch(sa, cuda.D1(cuda.Blocks(n, 256)), cuda.D1(256), 0, src, v, uint64(n)))
		require.NoError(t, cuda.CopyAsync(sb, dst, src)) // waits for the fill on the device
		require.NoError(t, add.Launch(sb, cuda.D1(cuda.Blocks(n, 256)), cuda.D1(256), 0, dst, uint32(1), uint64(n)))
		require.NoError(t, cuda.CopyAsync(sa, src, dst)) // on a's stream: waits for the add on b's
		check(src, v+1, "round trip")
		check(dst, v+1, "copy")
	}
}

// TestGPUPeerHandOff runs between two devices, first without peer access (the
// driver stages the copies), then with it both ways where the devices support it.
func TestGPUPeerHandOff(t *testing.T) {
	c0, c1 := twoDevices(t)
	gpuPeerHandOff(t, c0, c1)
	ok, err := c0.CanAccessPeer(c1)
	require.NoError(t, err)
	if !ok {
		t.Skip("device 0 cannot access device 1: the copies without peer access passed")
	}
	require.NoError(t, c0.EnablePeerAccess(c1))
	require.NoError(t, c1.EnablePeerAccess(c0))
	gpuPeerHandOff(t, c0, c1)
	gpuPeerHandOff(t, c1, c0)
}

// TestGPUPeerOneDevice is TestGPUPeerHandOff between two contexts of device 0.
func TestGPUPeerOneDevice(t *testing.T) {
	cudatest.Require(t, cudatest.Kernels)
	c0, err := cuda.Device(0).Context()
	require.NoError(t, err)
	own := peerContext(t)
	gpuPeerHandOff(t, c0, own)
	gpuPeerHandOff(t, own, c0)
}

// BenchmarkCopyPeer copies device 0's memory into device 1's (CopyAsync on device
// 1's stream, peer access enabled both ways where supported), for the bandwidth beside
// the C floor's cuMemcpyPeerAsync; one-device copies the same between two contexts
// of device 0 (skipped where there are two devices).
func BenchmarkCopyPeer(b *testing.B) {
	cudatest.Require(b)
	n, err := cuda.DeviceCount()
	require.NoError(b, err)
	c0, err := cuda.Device(0).Context()
	require.NoError(b, err)
	var c1 *cuda.Context
	if n >= 2 {
		c1, err = cuda.Device(1).Context()
		require.NoError(b, err)
		if ok, err := c0.CanAccessPeer(c1); err == nil && ok {
			require.NoError(b, c0.EnablePeerAccess(c1))
			require.NoError(b, c1.EnablePeerAccess(c0))
		}
	} else {
		b.Logf("one device: copies between two contexts of device 0")
		c1, err = cuda.NewContext(0, 0)
		require.NoError(b, err)
		defer c1.Close()
	}
	s0, err := c0.NewStream()
	require.NoError(b, err)
	defer s0.Close()
	s1, err := c1.NewStream()
	require.NoError(b, err)
	defer s1.Close()
	for _, sz := range []struct {
		name string
		n    int
	}{{"4KiB", 4 << 10}, {"1MiB", 1 << 20}, {"64MiB", 64 << 20}, {"256MiB", 256 << 20}} {
		b.Run(sz.name, func(b *testing.B) {
			src, err := c0.Alloc(s0, sz.n)
			require.NoError(b, err)
			defer src.Close()
			dst, err := c1.Alloc(s1, sz.n)
			require.NoError(b, err)
			defer dst.Close()
			require.NoError(b, src.Memset8Async(s0, 1))
			require.NoError(b, cuda.CopyAsync(s1, dst, src)) // warm: the first copy waits for the memset
			require.NoError(b, s1.Synchronize())
			b.SetBytes(int64(sz.n))
			b.ResetTimer()
			for range b.N {
				if err := cuda.CopyAsync(s1, dst, src); err != nil {
					b.Fatal(err)
				}
			}
			require.NoError(b, s1.Synchronize())
		})
	}
}
