package cuda_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/resource"
)

// Small staging knobs, so that the tests cut copies of a few hundred KiB into many
// pieces (and their host copies across goroutines).
const (
	tThreshold = 64 << 10
	tChunk     = 16 << 10
)

func smallStaging(t testing.TB) {
	old := cuda.SetStagingForTest(cuda.Staging{Threshold: tThreshold, Chunk: tChunk, MinPiece: 4 << 10, Pieces: 8,
		Depth: 3, Keep: 4, Workers: 4, WorkerMin: 1 << 10})
	t.Cleanup(func() { cuda.SetStagingForTest(old); cuda.DropStagesForTest() })
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// deviceBytes reads the first n bytes of d through a pinned buffer (Copy: the
// driver's copy, never staged).
func deviceBytes(t testing.TB, ctx *cuda.Context, d *cuda.DeviceBuffer, n int) []byte {
	t.Helper()
	h, err := ctx.AllocHost(d.Size())
	require.NoError(t, err)
	defer h.Close()
	require.NoError(t, cuda.Copy(h, d))
	return append([]byte(nil), h.Bytes()[:n]...)
}

// setDevice writes b into the start of d through a pinned buffer.
func setDevice(t testing.TB, ctx *cuda.Context, d *cuda.DeviceBuffer, b []byte) {
	t.Helper()
	h, err := ctx.AllocHost(d.Size())
	require.NoError(t, err)
	defer h.Close()
	hb := h.Bytes()
	clear(hb)
	copy(hb, b)
	require.NoError(t, cuda.Copy(d, h))
}

func TestStagePiece(t *testing.T) {
	smallStaging(t)
	assert.Equal(t, 8<<10, cuda.StagePieceForTest(tThreshold), "8 pieces")
	assert.Equal(t, 4<<10, cuda.StagePieceForTest(tThreshold/4), "no smaller than MinPiece")
	assert.Equal(t, tChunk, cuda.StagePieceForTest(1<<20), "no larger than a chunk")
	assert.Equal(t, 12<<10, cuda.StagePieceForTest(12*8<<10-5), "whole pages")
}

// TestStagedRoundTrips copies every size around the threshold and the pieces, both
// ways, synchronously and on a stream, into fresh and reused slices, and checks each
// byte against the driver's own copy of pinned memory; past the end of the copy
// neither the device buffer nor the Go memory changes.
func TestStagedRoundTrips(t *testing.T) {
	ctx, s := memSetup(t)
	smallStaging(t)
	r := rand.New(rand.NewPCG(3, 4))
	sizes := []int{0, 1, 4 << 10, tThreshold - 1, tThreshold, tThreshold + 1, 5*tChunk + 777, 40*tChunk + 4095}
	const slack = 4096
	for _, n := range sizes {
		d, err := ctx.Alloc(s, n+slack)
		require.NoError(t, err)
		reused := make([]byte, n+slack)
		for _, async := range []bool{false, true} {
			for _, fresh := range []bool{false, true} {
				name := fmt.Sprintf("%d/async=%v/fresh=%v", n, async, fresh)
				staged := n >= tThreshold
				// Host → device. The device's tail holds a pattern that must survive.
				pattern := randBytes(r, n+slack)
				setDevice(t, ctx, d, pattern)
				src := reused[:n]
				if fresh {
					src = make([]byte, n)
				}
				want := randBytes(r, n)
				copy(src, want)
				before := cuda.StagedCopiesForTest()
				if async {
					require.NoError(t, cuda.CopyToDeviceAsync(s, d, src), name)
					// src may be reused as soon as the call returns.
					for i := range src {
						src[i] ^= 0xff
					}
					require.NoError(t, s.Synchronize())
				} else {
					require.NoError(t, cuda.CopyToDevice(d, src), name)
				}
				if staged {
					assert.Equal(t, before+1, cuda.StagedCopiesForTest(), "%s: staged", name)
				} else {
					assert.Equal(t, before, cuda.StagedCopiesForTest(), "%s: direct", name)
				}
				got := deviceBytes(t, ctx, d, n+slack)
				require.Equal(t, want, got[:n], "%s: host → device", name)
				require.Equal(t, pattern[n:], got[n:], "%s: device bytes past the copy", name)

				// Device → host, into a slice whose memory goes on past its length.
				setDevice(t, ctx, d, pattern)
				var mem []byte
				if fresh {
					mem = make([]byte, n+slack)
				} else {
					mem = reused
				}
				guard := randBytes(r, slack)
				copy(mem[n:], guard)
				dst := mem[:n:n]
				if async {
					require.NoError(t, cuda.CopyFromDeviceAsync(s, dst, d), name)
				} else {
					require.NoError(t, cuda.CopyFromDevice(dst, d), name)
				}
				// dst is written when the call returns, async or not.
				require.Equal(t, pattern[:n], []byte(dst), "%s: device → host", name)
				require.Equal(t, guard, mem[n:], "%s: Go memory past the slice", name)
			}
		}
		require.NoError(t, d.Close())
	}
}

// TestStagedTypes copies element types other than bytes, whose elements pieces cut
// through.
func TestStagedTypes(t *testing.T) {
	_, s := memSetup(t)
	smallStaging(t)
	type rec struct {
		A int32
		B float32
		C uint16
	}
	const n = 30001 // 12-byte elements: pieces of 8 KiB split elements
	src := make([]rec, n)
	for i := range src {
		src[i] = rec{int32(i), float32(i) / 3, uint16(i * 7)}
	}
	d, err := cuda.AllocFor[rec](s, n)
	require.NoError(t, err)
	defer d.Close()
	before := cuda.StagedCopiesForTest()
	require.NoError(t, cuda.CopyToDeviceAsync(s, d, src))
	got := make([]rec, n)
	require.NoError(t, cuda.CopyFromDeviceAsync(s, got, d))
	assert.Equal(t, before+2, cuda.StagedCopiesForTest())
	require.Equal(t, src, got)

	f := make([]float64, 20000)
	for i := range f {
		f[i] = float64(i) * 1.5
	}
	df, err := cuda.AllocFor[float64](s, len(f))
	require.NoError(t, err)
	defer df.Close()
	require.NoError(t, cuda.CopyToDevice(df, f))
	gf := make([]float64, len(f))
	require.NoError(t, cuda.CopyFromDevice(gf, df))
	require.Equal(t, f, gf)
	// The element type is checked before anything is staged.
	assert.ErrorIs(t, cuda.CopyToDevice(df, make([]float32, 40000)), cuda.ErrInvalidArgument)
	assert.ErrorIs(t, cuda.CopyFromDevice(make([]byte, 8*len(f)+1), df), cuda.ErrInvalidArgument)
}

// TestStagedHandOff: a staged copy is one use of the device buffer, ordered after
// the writes on other streams (a memset delayed on another stream) and before the
// later uses there.
func TestStagedHandOff(t *testing.T) {
	ctx, s := memSetup(t)
	smallStaging(t)
	other, err := ctx.NewStream()
	require.NoError(t, err)
	defer other.Close()
	const n = 300 << 10
	d, err := ctx.Alloc(other, n)
	require.NoError(t, err)
	defer d.Close()
	for round := range 3 {
		v := byte(round + 1)
		if cudatest.FakeLoaded() {
			require.NoError(t, cudatest.Delay(uintptr(other.Handle()), 2*time.Millisecond))
		}
		require.NoError(t, d.Memset8Async(other, v))
		got := make([]byte, n)
		require.NoError(t, cuda.CopyFromDeviceAsync(s, got, d))
		for i, b := range got {
			require.Equal(t, v, b, "round %d byte %d", round, i)
		}
		// A staged write on s, then a read on other: other waits for every piece.
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i) + v
		}
		require.NoError(t, cuda.CopyToDeviceAsync(s, d, src))
		h, err := ctx.AllocHost(n)
		require.NoError(t, err)
		require.NoError(t, cuda.CopyAsync(other, h, d))
		require.NoError(t, other.Synchronize())
		require.Equal(t, src, h.Bytes())
		require.NoError(t, h.Close())
	}
}

// TestStagedConcurrent: goroutines copy their own buffers both ways at once, sizes
// staged and not; every byte comes back.
func TestStagedConcurrent(t *testing.T) {
	ctx, _ := memSetup(t)
	smallStaging(t)
	const workers, rounds = 16, 6
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := func() error {
				r := rand.New(rand.NewPCG(uint64(w), 9))
				s, err := ctx.NewStream()
				if err != nil {
					return err
				}
				defer s.Close()
				for i := range rounds {
					n := 1 + r.IntN(6*tThreshold)
					d, err := ctx.Alloc(s, n)
					if err != nil {
						return err
					}
					src := randBytes(r, n)
					want := append([]byte(nil), src...)
					var cerr error
					if i%2 == 0 {
						cerr = cuda.CopyToDevice(d, src)
					} else {
						cerr = cuda.CopyToDeviceAsync(s, d, src)
						clear(src) // the device has its copy already
					}
					if cerr != nil {
						return cerr
					}
					got := make([]byte, n)
					if i%3 == 0 {
						cerr = cuda.CopyFromDevice(got, d)
					} else {
						cerr = cuda.CopyFromDeviceAsync(s, got, d)
					}
					if cerr != nil {
						return cerr
					}
					for j := range got {
						if got[j] != want[j] {
							return fmt.Errorf("worker %d round %d: byte %d of %d is %d, want %d", w, i, j, n, got[j], want[j])
						}
					}
					if err := d.Close(); err != nil {
						return err
					}
				}
				return nil
			}()
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestStagedCloseRace closes the buffer, and in other rounds the stream, while
// staged copies run on them: each copy succeeds or fails with ErrClosed, and the
// strict fake sees no use of freed memory or a destroyed stream.
func TestStagedCloseRace(t *testing.T) {
	ctx, _ := memSetup(t)
	smallStaging(t)
	const n = 40 * tChunk
	src := make([]byte, n)
	for i := range src {
		src[i] = byte(i * 31)
	}
	var ok, closed int
	for round := range 40 {
		s, err := ctx.NewStream()
		require.NoError(t, err)
		d, err := ctx.Alloc(s, n)
		require.NoError(t, err)
		var wg sync.WaitGroup
		results := make(chan error, 4)
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				switch g {
				case 0:
					err = cuda.CopyToDeviceAsync(s, d, src)
				case 1:
					err = cuda.CopyFromDeviceAsync(s, make([]byte, n), d)
				case 2:
					err = cuda.CopyToDevice(d, src)
				default:
					err = cuda.CopyFromDevice(make([]byte, n), d)
				}
				results <- err
			}()
		}
		time.Sleep(time.Duration(round%8) * 50 * time.Microsecond)
		if round%2 == 0 {
			require.NoError(t, d.Close())
		} else {
			require.NoError(t, s.Close())
		}
		wg.Wait()
		close(results)
		for err := range results {
			if err == nil {
				ok++
				continue
			}
			require.ErrorIs(t, err, cuda.ErrClosed)
			closed++
		}
		if round%2 == 0 {
			require.NoError(t, s.Close())
		} else {
			require.NoError(t, d.Close())
		}
	}
	t.Logf("%d copies done, %d refused as closed", ok, closed)
	assert.Positive(t, ok+closed)
}

// TestStagedCache: staging buffers are kept for the next copies, at most Keep of
// them once the copies are done, and resource.Reclaim gives them back.
func TestStagedCache(t *testing.T) {
	ctx, s := memSetup(t)
	smallStaging(t)
	d, err := ctx.Alloc(s, 10*tChunk)
	require.NoError(t, err)
	defer d.Close()
	src := make([]byte, 10*tChunk)
	for range 3 {
		require.NoError(t, cuda.CopyToDevice(d, src))
		require.NoError(t, cuda.CopyFromDevice(src, d))
	}
	assert.Equal(t, 3, cuda.StageCachedForTest(ctx), "one ring, reused")
	_, err = resource.Reclaim()
	require.NoError(t, err)
	assert.Zero(t, cuda.StageCachedForTest(ctx))
	require.NoError(t, cuda.CopyToDevice(d, src))
	assert.Equal(t, 3, cuda.StageCachedForTest(ctx))
}

// TestStagedFallbackAllocator stages through cuMemAllocHost memory where the driver
// has no host pools, in a context of NewContext that is closed with staging buffers
// cached.
func TestStagedFallbackAllocator(t *testing.T) {
	memSetup(t)
	smallStaging(t)
	cuda.SetNoHostPoolsForTest(true)
	defer cuda.SetNoHostPoolsForTest(false)
	own, err := cuda.NewContext(cuda.Device(0), 0)
	require.NoError(t, err)
	s, err := own.NewStream()
	require.NoError(t, err)
	const n = 7*tChunk + 5
	d, err := own.Alloc(s, n)
	require.NoError(t, err)
	src := randBytes(rand.New(rand.NewPCG(5, 6)), n)
	before := cuda.StagedCopiesForTest()
	require.NoError(t, cuda.CopyToDeviceAsync(s, d, src))
	got := make([]byte, n)
	require.NoError(t, cuda.CopyFromDeviceAsync(s, got, d))
	assert.Equal(t, before+2, cuda.StagedCopiesForTest())
	require.Equal(t, src, got)
	assert.Positive(t, cuda.StageCachedForTest(own))
	require.NoError(t, d.Close())
	require.NoError(t, s.Close())
	require.NoError(t, own.Close())
	// The context went with its staging buffers; dropping them calls no driver.
	cuda.DropStagesForTest()
	assert.Zero(t, cuda.StageCachedForTest(own))
	err = cuda.CopyToDevice(d, src)
	assert.True(t, errors.Is(err, cuda.ErrClosed) || errors.Is(err, cuda.ErrInvalidArgument), "%v", err)
}

// TestStagedDriver118 stages on the fake posing as the CUDA 11.8 driver (no host
// pools: cuMemAllocHost memory).
func TestStagedDriver118(t *testing.T) {
	if !driver118(t) {
		return
	}
	smallStaging(t)
	ctx, err := cuda.Device(0).Context()
	require.NoError(t, err)
	s, err := ctx.NewStream()
	require.NoError(t, err)
	defer s.Close()
	for _, n := range []int{tThreshold - 1, tThreshold, 9*tChunk + 3} {
		d, err := ctx.Alloc(s, n)
		require.NoError(t, err)
		src := randBytes(rand.New(rand.NewPCG(uint64(n), 1)), n)
		require.NoError(t, cuda.CopyToDevice(d, src))
		got := make([]byte, n)
		require.NoError(t, cuda.CopyFromDeviceAsync(s, got, d))
		require.Equal(t, src, got, "%d bytes", n)
		require.NoError(t, d.Close())
	}
	assert.Positive(t, cuda.StagedCopiesForTest())
}

// TestCopyPageLockedSlice: a slice of page-locked memory (a HostBuffer's bytes, a
// wrapped slice) passed where a Go slice goes is read or written by the DMA engine
// after the copy is queued, not by the driver before it returns (as a pageable slice
// is). Every form still returns only once the slice is read (to the device) or
// written (from it): the slice may then be changed or read, and its memory freed.
// On the fake driver the copies wait behind a delay on their stream.
func TestCopyPageLockedSlice(t *testing.T) {
	ctx, s := memSetup(t)
	const n = 64 << 10
	d, err := ctx.Alloc(s, n)
	require.NoError(t, err)
	defer d.Close()
	kinds := []struct {
		name string
		make func(t *testing.T) ([]byte, func() error)
	}{
		{"host-buffer", func(t *testing.T) ([]byte, func() error) {
			h, err := ctx.AllocHost(n)
			require.NoError(t, err)
			return h.Bytes(), h.Close
		}},
		{"wrapped", func(t *testing.T) ([]byte, func() error) {
			buf := make([]byte, n)
			w, err := cuda.Wrap(ctx, buf)
			require.NoError(t, err)
			return buf, w.Close
		}},
	}
	plain := make([]byte, n)
	require.False(t, cuda.PageLockedForTest(unsafe.Pointer(&plain[0]), n), "a Go slice is pageable")
	delay := func(t *testing.T) {
		if cudatest.Strict() {
			require.NoError(t, cudatest.Delay(uintptr(s.Handle()), 5*time.Millisecond))
		}
	}
	for _, k := range kinds {
		for _, async := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/async=%v", k.name, async), func(t *testing.T) {
				p, closeP := k.make(t)
				require.True(t, cuda.PageLockedForTest(unsafe.Pointer(&p[0]), n), "the copies know the slice as page-locked")
				require.True(t, cuda.PageLockedForTest(unsafe.Pointer(&p[n-1]), 1), "its last byte too")
				v := byte(len(k.name)) + byte(b2i(async))
				for i := range p {
					p[i] = byte(i) ^ v
				}
				want := append([]byte(nil), p...)
				delay(t)
				if async {
					require.NoError(t, cuda.CopyToDeviceAsync(s, d, p))
				} else {
					require.NoError(t, cuda.CopyToDevice(d, p))
				}
				for i := range p {
					p[i] = 0xEE // the copy has read p: this must not reach d
				}
				got := make([]byte, n)
				require.NoError(t, cuda.CopyFromDevice(got, d))
				require.Equal(t, want, got, "device bytes after the copy to the device")

				clear(p)
				delay(t)
				if async {
					require.NoError(t, cuda.CopyFromDeviceAsync(s, p, d))
				} else {
					require.NoError(t, cuda.CopyFromDevice(p, d))
				}
				require.Equal(t, want, p, "the slice when the copy from the device returns")
				require.NoError(t, closeP())
				require.NoError(t, s.Synchronize())
				resource.Reclaim() // a wrapped slice is unregistered here
				if k.name == "wrapped" {
					require.False(t, cuda.PageLockedForTest(unsafe.Pointer(&p[0]), n), "unregistered: pageable again")
				}
			})
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A synchronous copy waits for its copy holding neither the stream nor the memory:
// queued behind unfinished work, it does not keep closing the stream from returning
// at once; the copy then ends with the right bytes. (Spinning on the copy's event in
// the call into C that queues it, holding both for up to 20 µs, saves a call into C
// but was slower on the H200: 4 KiB pinned copies +0.43 to +0.70 µs over C against
// +0.31 to +0.49 µs, alternated in one run; the Go side's bookkeeping after the call
// no longer overlapped the DMA.)
func TestSmallCopyLetsGoWhileWaiting(t *testing.T) {
	_, m, _ := loadKernels(t)
	ctx := m.Context()
	s, err := ctx.NewStream()
	require.NoError(t, err)
	const n = 4 << 10
	d, err := cuda.AllocFor[byte](s, n)
	require.NoError(t, err)
	defer d.Close()
	h, err := ctx.AllocHost(n)
	require.NoError(t, err)
	defer h.Close()
	for i := range h.Bytes() {
		h.Bytes()[i] = byte(i * 7)
	}
	// Unfinished work on s, where d was last used: the synchronous copy goes there.
	paused := cudatest.FakeLoaded()
	if paused {
		require.NoError(t, cudatest.Pause())
	} else {
		spin := function(t, m, "spin")
		require.NoError(t, spin.Launch(s, cuda.D1(1), cuda.D1(1), 0, uint64(300*time.Millisecond)))
	}
	resume := func() {
		if paused {
			require.NoError(t, cudatest.Resume())
			paused = false
		}
	}
	defer resume()
	require.NoError(t, d.Memset8Async(s, 0))
	copied := make(chan error, 1)
	go func() { copied <- cuda.Copy(d, h) }()
	time.Sleep(20 * time.Millisecond) // queued, and waiting
	select {
	case err := <-copied:
		t.Fatalf("the copy returned before the work it waits for: %v", err)
	default:
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	// The executor stays paused until resume: a Close that waited for the copy's GPU
	// work would not return before the guard below.
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		resume()
		t.Fatal("Close waits for the copy's GPU work")
	}
	resume()
	require.NoError(t, <-copied)
	got := make([]byte, n)
	require.NoError(t, cuda.CopyFromDevice(got, d))
	assert.Equal(t, h.Bytes(), got)
}
