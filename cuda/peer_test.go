package cuda_test

import (
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Copies between contexts and the hand-off across them. TestPeer needs two devices
// (on the fake: FAKECUDA_DEVICES=2, in a subprocess); TestPeerOneDevice runs the same
// copies between two contexts of device 0, which any machine has.

// twoDevices returns the primary contexts of devices 0 and 1; it skips where there
// are fewer than two devices.
func twoDevices(t *testing.T) (*cuda.Context, *cuda.Context) {
	t.Helper()
	cudatest.Require(t)
	n, err := cuda.DeviceCount()
	require.NoError(t, err)
	if n < 2 {
		t.Skipf("needs two devices, found %d: runs on a multi-GPU machine (and on the fake with FAKECUDA_DEVICES=2)", n)
	}
	c0, err := cuda.Device(0).Context()
	require.NoError(t, err)
	c1, err := cuda.Device(1).Context()
	require.NoError(t, err)
	return c0, c1
}

// peerContext returns a context of its own on device 0, closed when the test ends.
func peerContext(t *testing.T) *cuda.Context {
	t.Helper()
	c, err := cuda.NewContext(0, 0)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, c.Close()) })
	return c
}

func TestPeer(t *testing.T) {
	if cudatest.Active() {
		cudatest.Subprocess(t, map[string]string{"FAKECUDA_DEVICES": "2"})
		return
	}
	c0, c1 := twoDevices(t)
	if cudatest.Strict() {
		cudatest.Check(t)
	}
	t.Run("CanAccessPeer", func(t *testing.T) {
		ok, err := c0.CanAccessPeer(c1)
		require.NoError(t, err)
		t.Logf("device 0 can access device 1: %v", ok)
		if cudatest.Strict() {
			assert.True(t, ok)
		}
		ok, err = c0.CanAccessPeer(c0)
		require.NoError(t, err)
		assert.False(t, ok, "a device is not its own peer")
		ok, err = c0.CanAccessPeer(peerContext(t))
		require.NoError(t, err)
		assert.False(t, ok, "nor are two contexts of one device")
		_, err = c0.CanAccessPeer(nil)
		assert.ErrorIs(t, err, cuda.ErrInvalidArgument)
	})
	t.Run("EnablePeerAccess", func(t *testing.T) {
		if ok, err := c0.CanAccessPeer(c1); err != nil || !ok {
			t.Skipf("device 0 cannot access device 1 (%v)", err)
		}
		require.NoError(t, c0.EnablePeerAccess(c1))
		pairs := cuda.PeerPairsForTest()
		require.NoError(t, c0.EnablePeerAccess(c1), "enabled once per pair")
		assert.Equal(t, pairs, cuda.PeerPairsForTest())
		require.NoError(t, c0.Locked(func() error {
			assert.ErrorIs(t, cudaraw.CtxEnablePeerAccess(c1.Handle(), 0), cudaraw.ErrPeerAccessAlreadyEnabled, "the driver has it")
			return nil
		}))
		// The device pool of device 1 gives device 0 access.
		var dev1 cudaraw.CUdevice
		require.NoError(t, cudaraw.DeviceGet(&dev1, 1))
		var pool cudaraw.CUmemoryPool
		require.NoError(t, cudaraw.DeviceGetDefaultMemPool(&pool, dev1))
		var flags cudaraw.CUmemAccess_flags
		loc := cudaraw.CUmemLocation{Type: cudaraw.CU_MEM_LOCATION_TYPE_DEVICE, Id: 0}
		require.NoError(t, cudaraw.MemPoolGetAccess(&flags, pool, &loc))
		assert.Equal(t, cudaraw.CU_MEM_ACCESS_FLAGS_PROT_READWRITE, flags)

		// Enabled through the raw layer first: the driver's "already enabled" is
		// success.
		own1, err := cuda.NewContext(1, 0)
		require.NoError(t, err)
		defer own1.Close()
		own0 := peerContext(t)
		require.NoError(t, own1.Locked(func() error { return cudaraw.CtxEnablePeerAccess(own0.Handle(), 0) }))
		require.NoError(t, own1.EnablePeerAccess(own0))

		err = c0.EnablePeerAccess(own0)
		assert.ErrorIs(t, err, cudaraw.ErrPeerAccessUnsupported, "one device")
		require.NoError(t, own1.Close())
		assert.ErrorIs(t, c0.EnablePeerAccess(own1), cuda.ErrClosed)
	})
	t.Run("Unsupported", func(t *testing.T) {
		if !cudatest.Strict() {
			t.Skip("cuts device 1 off its peers with the fake's peer control")
		}
		require.NoError(t, cudatest.Control("peer", 1, 0))
		defer func() { require.NoError(t, cudatest.Control("peer", 1, 1)) }()
		ok, err := c1.CanAccessPeer(c0)
		require.NoError(t, err)
		assert.False(t, ok)
		err = c1.EnablePeerAccess(c0)
		require.ErrorIs(t, err, cudaraw.ErrPeerAccessUnsupported)
		assert.Contains(t, err.Error(), "from device 1 to device 0")
		// Copies need no peer access.
		testCopiesBetween(t, c1, c0)
	})
	t.Run("Copies", func(t *testing.T) { testCopiesBetween(t, c0, c1) })
	t.Run("CopiesBack", func(t *testing.T) { testCopiesBetween(t, c1, c0) })
	t.Run("HandOff", func(t *testing.T) { testHandOffBetween(t, c0, c1) })
	t.Run("MemoryStatus", func(t *testing.T) {
		s0, s1 := streams(t, c0, 1)[0], streams(t, c1, 1)[0]
		b0, err := cuda.AllocFor[uint32](s0, 1<<10)
		require.NoError(t, err)
		defer b0.Close()
		b1, err := cuda.AllocFor[uint32](s1, 1<<12)
		require.NoError(t, err)
		defer b1.Close()
		st, err := cuda.MemoryStatus()
		require.NoError(t, err)
		seen := map[cuda.Device]bool{}
		for _, c := range st.Contexts {
			if !c.Primary {
				continue
			}
			seen[c.Device] = true
			p := c.Kinds[cuda.KindDevice]
			assert.True(t, p.Pool, "device %d", c.Device)
			assert.GreaterOrEqual(t, p.Buffers, int64(1), "device %d", c.Device)
			assert.NotZero(t, c.Total, "device %d", c.Device)
		}
		assert.True(t, seen[0] && seen[1], "both devices reported:\n%v", st)
		assert.Contains(t, st.String(), "device 1 (primary context)")
	})
	t.Run("CloseRace", func(t *testing.T) { testPeerCloseRaces(t, c0, c1) })
}

// TestPeerOneDevice copies between two contexts of device 0: cuMemcpyPeerAsync is
// legal there too, and the hand-off is the same.
func TestPeerOneDevice(t *testing.T) {
	cudatest.Require(t)
	c0, err := cuda.Device(0).Context()
	require.NoError(t, err)
	own := peerContext(t)
	if cudatest.Strict() {
		cudatest.Check(t)
	}
	err = c0.EnablePeerAccess(own)
	require.ErrorIs(t, err, cudaraw.ErrPeerAccessUnsupported)
	assert.Contains(t, err.Error(), "from device 0 to device 0")
	t.Run("Copies", func(t *testing.T) { testCopiesBetween(t, c0, own) })
	t.Run("CopiesBack", func(t *testing.T) { testCopiesBetween(t, own, c0) })
	t.Run("HandOff", func(t *testing.T) { testHandOffBetween(t, c0, own) })
	t.Run("CloseRace", func(t *testing.T) { testPeerCloseRaces(t, c0, own) })
}

func pattern(n int, seed uint32) []uint32 {
	v := make([]uint32, n)
	for i := range v {
		v[i] = seed*0x9e3779b9 + uint32(i)
	}
	return v
}

func deviceU32(t *testing.T, b *cuda.DeviceBuffer) []uint32 {
	t.Helper()
	out := make([]uint32, b.Len())
	require.NoError(t, cuda.CopyFromDevice(out, b))
	return out
}

// testCopiesBetween copies from a's memory into b's and back, with and without a
// stream (of either context), and checks the bytes and the refusals.
func testCopiesBetween(t *testing.T, a, b *cuda.Context) {
	sa, sb := streams(t, a, 1)[0], streams(t, b, 1)[0]
	const n = 1<<16 + 3
	want := pattern(n, 1)
	src, err := cuda.AllocFor[uint32](sa, n)
	require.NoError(t, err)
	defer src.Close()
	require.NoError(t, cuda.CopyToDeviceAsync(sa, src, want))
	dst, err := cuda.AllocFor[uint32](sb, n+5)
	require.NoError(t, err)
	defer dst.Close()

	// On the destination's stream.
	require.NoError(t, cuda.CopyAsync(sb, dst, src))
	require.NoError(t, sb.Synchronize())
	assert.Equal(t, want, deviceU32(t, dst)[:n])

	// Back, on the source's stream (the destination's context is the other), into
	// a view.
	back, err := cuda.AllocFor[uint32](sa, n+10)
	require.NoError(t, err)
	defer back.Close()
	require.NoError(t, back.Memset32(7))
	view, err := back.Slice(10, n)
	require.NoError(t, err)
	require.NoError(t, dst.Memset32Async(sb, 0))
	require.NoError(t, cuda.CopyToDeviceAsync(sb, dst, pattern(n+5, 2)))
	head, err := dst.Slice(0, n)
	require.NoError(t, err)
	require.NoError(t, cuda.CopyAsync(sb, view, head))
	got := deviceU32(t, back)
	assert.Equal(t, []uint32{7, 7, 7, 7, 7, 7, 7, 7, 7, 7}, got[:10])
	assert.Equal(t, pattern(n+5, 2)[:n], got[10:])

	// Waiting, without a stream.
	small, err := cuda.AllocFor[uint32](sa, 100)
	require.NoError(t, err)
	defer small.Close()
	require.NoError(t, cuda.CopyToDevice(small, pattern(100, 3)))
	require.NoError(t, cuda.Copy(dst, small))
	assert.Equal(t, pattern(100, 3), deviceU32(t, dst)[:100])
	assert.Equal(t, pattern(n+5, 2)[100:], deviceU32(t, dst)[100:])

	// Refusals, before any driver call.
	third := peerContext(t)
	s3 := streams(t, third, 1)[0]
	assert.ErrorIs(t, cuda.CopyAsync(s3, dst, src), cuda.ErrWrongContext, "a stream of a third context")
	host, err := a.AllocHost(64)
	require.NoError(t, err)
	defer host.Close()
	assert.ErrorIs(t, cuda.Copy(dst, host), cuda.ErrWrongContext, "host memory of another context")
	assert.ErrorIs(t, cuda.Copy(small, dst), cuda.ErrInvalidArgument, "too small")
	require.NoError(t, sa.Synchronize())
	require.NoError(t, sb.Synchronize())
}

// testHandOffBetween checks, with the fake's executor paused (so that everything is
// queued before anything runs, and then runs in any order the waits allow), that a
// copy between contexts waits for a write on the other context's stream, that a
// later write there waits for the copy, and that a later use of the copy's
// destination in its own context waits for a copy queued on the source's stream.
func testHandOffBetween(t *testing.T, a, b *cuda.Context) {
	requireFake(t)
	sa, sb := streams(t, a, 1)[0], streams(t, b, 2)
	const n = 4096
	hb, err := b.AllocHost(4 * n)
	require.NoError(t, err)
	defer hb.Close()
	for i := range 50 {
		v := uint32(i + 1)
		src, err := cuda.AllocFor[uint32](sa, n)
		require.NoError(t, err)
		dst, err := cuda.AllocFor[uint32](sb[0], n)
		require.NoError(t, err)
		require.NoError(t, sa.Synchronize())
		require.NoError(t, sb[0].Synchronize())

		require.NoError(t, cudatest.Pause())
		require.NoError(t, src.Memset32Async(sa, v)) // a write on a
		before, proxy := cuda.HandOffsForTest(sb[0]), cuda.DefaultStreamWaitsForTest(a)
		require.NoError(t, cuda.CopyAsync(sb[0], dst, src)) // read on b's stream
		assert.EqualValues(t, 1, cuda.HandOffsForTest(sb[0])-before, "the copy waits for the write on the other context")
		assert.EqualValues(t, 1, cuda.DefaultStreamWaitsForTest(a)-proxy, "a's default stream stands for the copy")
		before = cuda.HandOffsForTest(sa)
		require.NoError(t, src.Memset32Async(sa, v+1000)) // a write after the copy's read
		assert.EqualValues(t, 1, cuda.HandOffsForTest(sa)-before, "the write waits for the copy")

		// The copy queued on the source's stream: dst's later use on b waits for it.
		src2, err := cuda.AllocFor[uint32](sa, n)
		require.NoError(t, err)
		require.NoError(t, src2.Memset32Async(sa, v+2000))
		dst2, err := cuda.AllocFor[uint32](sb[1], n)
		require.NoError(t, err)
		require.NoError(t, cuda.CopyAsync(sa, dst2, src2))
		before = cuda.HandOffsForTest(sb[1])
		require.NoError(t, cuda.CopyAsync(sb[1], hb, dst2))
		assert.EqualValues(t, 1, cuda.HandOffsForTest(sb[1])-before, "the read waits for the copy into dst2")
		require.NoError(t, cudatest.Resume())

		require.NoError(t, sb[1].Synchronize())
		assert.Equal(t, v+2000, cuda.HostSlice[uint32](hb)[n-1], "round %d: read after the copy", i)
		got := deviceU32(t, dst)
		assert.Equal(t, v, got[0], "round %d: the copy saw the first write, not the second", i)
		assert.Equal(t, v, got[n-1], "round %d", i)
		assert.Equal(t, v+1000, deviceU32(t, src)[0], "round %d", i)
		// Freed while the other context's streams may still hold work: the frees
		// wait for it (the strict fake reports a use after free otherwise).
		require.NoError(t, src.Close())
		require.NoError(t, dst2.Close())
		require.NoError(t, dst.Close())
		require.NoError(t, src2.Close())
	}
	require.NoError(t, sa.Synchronize())
}

// peerObjs are the objects of a Close race of a copy between contexts.
type peerObjs struct {
	src, dst *cuda.DeviceBuffer
	s        *cuda.Stream
}

// testPeerCloseRaces races Close of either buffer against a copy between a and b:
// the copy runs or fails with ErrClosed, and the strict fake sees no freed memory.
func testPeerCloseRaces(t *testing.T, a, b *cuda.Context) {
	sa, sb := streams(t, a, 1)[0], streams(t, b, 1)[0]
	n := races(t) / 10
	setup := func(t *testing.T) peerObjs {
		src, err := cuda.AllocFor[uint32](sa, 1024)
		require.NoError(t, err)
		dst, err := cuda.AllocFor[uint32](sb, 1024)
		require.NoError(t, err)
		return peerObjs{src, dst, sb}
	}
	done := func(o peerObjs) {
		o.src.Close()
		o.dst.Close()
	}
	copyAsync := func(o peerObjs) error { return cuda.CopyAsync(o.s, o.dst, o.src) }
	runRaces(t, n, raceKind[peerObjs]{name: "source", setup: setup, op: copyAsync,
		close: func(o peerObjs) error { return o.src.Close() }, done: done})
	runRaces(t, n, raceKind[peerObjs]{name: "destination", setup: setup, op: copyAsync,
		close: func(o peerObjs) error { return o.dst.Close() }, done: done})
	runRaces(t, n, raceKind[peerObjs]{name: "waiting", setup: setup,
		op:    func(o peerObjs) error { return cuda.Copy(o.dst, o.src) },
		close: func(o peerObjs) error { return o.src.Close() }, done: done})
}
