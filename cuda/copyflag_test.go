package cuda_test

import (
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
)

// behind queues unfinished work on s: the fake's executor paused, or on a GPU a
// kernel that spins for d. It returns the function that lets the work finish
// (a no-op on a GPU).
func behind(t *testing.T, m *cuda.Module, s *cuda.Stream, d time.Duration) func() {
	t.Helper()
	if !cudatest.FakeLoaded() {
		spin := function(t, m, "spin")
		require.NoError(t, spin.Launch(s, cuda.D1(1), cuda.D1(1), 0, uint64(d)))
		return func() {}
	}
	require.NoError(t, cudatest.Pause())
	var once sync.Once
	resume := func() { once.Do(func() { require.NoError(t, cudatest.Resume()) }) }
	t.Cleanup(resume)
	return resume
}

// filled returns a page-locked buffer of n bytes holding a pattern of seed.
func filled(t *testing.T, ctx *cuda.Context, n int, seed byte) *cuda.HostBuffer {
	t.Helper()
	h, err := ctx.AllocHost(n)
	require.NoError(t, err)
	t.Cleanup(func() { h.Close() })
	for i := range h.Bytes() {
		h.Bytes()[i] = byte(i*7) + seed
	}
	return h
}

// pinnedRoundTrip copies n bytes of a page-locked buffer to the device and back into
// another with Copy, checks them, and returns the buffers and the device memory.
func pinnedRoundTrip(t *testing.T, ctx *cuda.Context, s *cuda.Stream, n int, seed byte) (src, dst *cuda.HostBuffer, d *cuda.DeviceBuffer) {
	t.Helper()
	src, dst = filled(t, ctx, n, seed), filled(t, ctx, n, seed+1)
	d, err := cuda.AllocFor[byte](s, n)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	require.NoError(t, cuda.Copy(d, src))
	require.NoError(t, cuda.Copy(dst, d))
	assert.Equal(t, src.Bytes(), dst.Bytes(), "%d bytes through Copy", n)
	return src, dst, d
}

// Synchronous copies of page-locked memory wait on a word the stream sets after the
// copy, and give it back: every direction and form, sizes that are not a multiple
// of the word.
func TestCopyWaitsOnFlag(t *testing.T) {
	ctx, s := memSetup(t)
	for _, n := range []int{1, 4 << 10, 4<<10 + 3, 1 << 20} {
		before := cuda.FlagWaitsForTest()
		src, dst, d := pinnedRoundTrip(t, ctx, s, n, 1)
		clear(dst.Bytes())
		// Slices of page-locked memory are waited for in every form.
		require.NoError(t, d.Memset8Async(s, 0))
		require.NoError(t, cuda.CopyToDeviceAsync(s, d, src.Bytes()))
		require.NoError(t, cuda.CopyFromDevice(dst.Bytes(), d))
		assert.Equal(t, src.Bytes(), dst.Bytes(), "%d bytes through the slice forms", n)
		assert.Equal(t, int64(4), cuda.FlagWaitsForTest().Waited-before.Waited, "%d bytes: four waits on flags", n)
	}
	assert.Equal(t, cuda.FlagSlots, cuda.FlagSlotsForTest(ctx), "every slot given back")
}

// A new context's first synchronous copy is of wrapped Go memory: the flag page is
// made (with the host stream it is checked on), and is freed with the context.
func TestCopyFlagNewContext(t *testing.T) {
	ctx, s, d := ownContext(t)
	defer ctx.Close()
	defer s.Close()
	defer d.Close()
	src := make([]byte, d.Size())
	for i := range src {
		src[i] = byte(i * 5)
	}
	w, err := cuda.Wrap(ctx, src)
	require.NoError(t, err)
	defer w.Close()
	before := cuda.FlagWaitsForTest()
	require.NoError(t, cuda.Copy(d, w))
	assert.Equal(t, int64(1), cuda.FlagWaitsForTest().Waited-before.Waited)
	got := make([]byte, d.Size())
	require.NoError(t, cuda.CopyFromDevice(got, d))
	assert.Equal(t, src, got)
	assert.Equal(t, cuda.FlagSlots, cuda.FlagSlotsForTest(ctx))
}

// A copy behind slow work stops polling its flag and blocks on an event recorded
// then; if its stream is closed by then, it polls the flag until the copy is done.
func TestCopyFlagLongWait(t *testing.T) {
	for _, closing := range []bool{false, true} {
		name := "stream-open"
		if closing {
			name = "stream-closed"
		}
		t.Run(name, func(t *testing.T) {
			_, m, _ := loadKernels(t)
			ctx := m.Context()
			s, err := ctx.NewStream()
			require.NoError(t, err)
			defer s.Close()
			const n = 4 << 10
			d, err := cuda.AllocFor[byte](s, n)
			require.NoError(t, err)
			defer d.Close()
			src, dst := filled(t, ctx, n, 3), filled(t, ctx, n, 4)
			require.NoError(t, d.Memset8Async(s, 0)) // the copy goes to s
			resume := behind(t, m, s, 200*time.Millisecond)
			if closing {
				var once sync.Once
				defer cuda.SetFlagLongHookForTest(cuda.SetFlagLongHookForTest(func() {
					once.Do(func() { assert.NoError(t, s.Close()) })
				}))
			}
			before := cuda.FlagWaitsForTest()
			copied := make(chan error, 1)
			go func() { copied <- cuda.Copy(d, src) }()
			time.Sleep(20 * time.Millisecond)
			select {
			case err := <-copied:
				t.Fatalf("the copy returned before the work it waits for: %v", err)
			default:
			}
			resume()
			require.NoError(t, <-copied)
			got := cuda.FlagWaitsForTest() // before the check's copy, which may be slow too
			require.NoError(t, cuda.Copy(dst, d))
			assert.Equal(t, src.Bytes(), dst.Bytes())
			assert.Equal(t, int64(1), got.Blocked-before.Blocked, "the first copy gave up polling")
			polled := int64(0)
			if closing {
				polled = 1
			}
			assert.Equal(t, polled, got.Polled-before.Polled)
			assert.Equal(t, cuda.FlagSlots, cuda.FlagSlotsForTest(ctx))
		})
	}
}

// More synchronous copies than flag words wait at once: the others wait on events,
// and every copy is right.
func TestCopyFlagsRunOut(t *testing.T) {
	_, m, s := loadKernels(t)
	ctx := m.Context()
	const copies, n = cuda.FlagSlots + 16, 4 << 10
	src := make([]*cuda.HostBuffer, copies)
	dev := make([]*cuda.DeviceBuffer, copies)
	for i := range src {
		src[i] = filled(t, ctx, n, byte(i))
		var err error
		dev[i], err = cuda.AllocFor[byte](s, n)
		require.NoError(t, err)
		defer dev[i].Close()
		require.NoError(t, dev[i].Memset8Async(s, 0))
	}
	resume := behind(t, m, s, 300*time.Millisecond)
	before := cuda.FlagWaitsForTest()
	var wg sync.WaitGroup
	for i := range copies {
		wg.Go(func() { assert.NoError(t, cuda.Copy(dev[i], src[i])) })
	}
	// Every word in use at once (a copy that starts late may find one free again:
	// the count below is a floor, not an equality).
	require.Eventually(t, func() bool { return cuda.FlagSlotsForTest(ctx) == 0 }, 10*time.Second, time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	resume()
	wg.Wait()
	assert.GreaterOrEqual(t, cuda.FlagWaitsForTest().Waited-before.Waited, int64(cuda.FlagSlots), "every word served a copy")
	assert.Equal(t, cuda.FlagSlots, cuda.FlagSlotsForTest(ctx))
	got := make([]byte, n)
	for i := range dev {
		require.NoError(t, cuda.CopyFromDevice(got, dev[i]))
		require.Equal(t, src[i].Bytes(), got, "copy %d", i)
	}
}

// Without cuStreamWriteValue32_v2 in the driver, copies wait on events.
func TestCopyWithoutWriteValue(t *testing.T) {
	const omit = "cuStreamWriteValue32_v2"
	if cudatest.Active() {
		cudatest.Subprocess(t, map[string]string{"FAKECUDA_OMIT": omit})
		return
	}
	if os.Getenv(cudatest.EnvChild) == "" || os.Getenv("FAKECUDA_OMIT") != omit {
		t.Skip("runs on the strict fake driver without " + omit + " (CI, where cudatest.Main installs the fake)")
	}
	ctx, s := memSetup(t)
	before := cuda.FlagWaitsForTest()
	pinnedRoundTrip(t, ctx, s, 4<<10+1, 5)
	assert.Zero(t, cuda.FlagWaitsForTest().Waited-before.Waited)
	assert.Equal(t, -1, cuda.FlagSlotsForTest(ctx), "no flag page")
	cudatest.Check(t)
}
