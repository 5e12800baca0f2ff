package cuda_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/resource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// poolContext returns a context of its own, so that pool counts are the test's.
func poolContext(t *testing.T) *cuda.Context {
	t.Helper()
	cudatest.Require(t)
	ctx, err := cuda.NewContext(0, 0)
	require.NoError(t, err)
	t.Cleanup(func() { ctx.Close() })
	return ctx
}

// Goroutines holding pooled streams at the same time never share one; released
// streams are reused, at most 32 stay idle, and the rest are destroyed.
func TestStreamPoolDistinctAndBounded(t *testing.T) {
	ctx := poolContext(t)
	require.NoError(t, ctx.SetStreamLimit(128))
	const n = 100
	held := make([]*cuda.Stream, n)
	var wg sync.WaitGroup
	var all sync.WaitGroup
	all.Add(n)
	for i := range held {
		wg.Go(func() {
			s, err := ctx.AcquireStream(context.Background())
			if !assert.NoError(t, err) {
				all.Done()
				return
			}
			held[i] = s
			all.Done()
			all.Wait() // every goroutine holds its stream at once
		})
	}
	wg.Wait()
	seen := map[cudaraw.CUstream]bool{}
	for _, s := range held {
		require.NotNil(t, s)
		assert.False(t, seen[s.Handle()], "a stream lent twice at once")
		seen[s.Handle()] = true
	}
	idle, lent, created, _, _ := cuda.PoolStatsForTest(ctx)
	assert.Equal(t, n, lent)
	assert.Zero(t, idle)
	assert.EqualValues(t, n, created)
	for _, s := range held {
		require.NoError(t, s.Close())
	}
	idle, lent, created, destroyed, _ := cuda.PoolStatsForTest(ctx)
	assert.Zero(t, lent)
	assert.Equal(t, 32, idle, "at most 32 idle streams")
	assert.EqualValues(t, n-32, destroyed)

	// Reuse: a second round makes no new stream.
	for range 10 {
		s, err := ctx.AcquireStream(context.Background())
		require.NoError(t, err)
		require.NoError(t, s.Close())
	}
	_, _, again, _, _ := cuda.PoolStatsForTest(ctx)
	assert.Equal(t, created, again)
}

// Streams dropped without Close come back to an acquirer waiting at the limit, with
// nothing else in the program starting a collection: the wait runs the collector.
func TestStreamPoolDroppedStreamsReachWaiter(t *testing.T) {
	ctx := poolContext(t)
	require.NoError(t, ctx.SetStreamLimit(2))
	defer ctx.SetStreamLimit(0)
	func() {
		for range 2 {
			_, err := ctx.AcquireStream(context.Background())
			require.NoError(t, err)
		}
	}()
	wait, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard
	defer cancel()
	for range 2 {
		s, err := ctx.AcquireStream(wait)
		require.NoError(t, err, "the dropped streams went back to the pool")
		defer s.Close()
	}
}

// A released Stream is closed for good, even once its stream is lent again; the new
// holder's generation is fresh.
func TestStreamPoolLease(t *testing.T) {
	ctx := poolContext(t)
	s, err := ctx.AcquireStream(context.Background())
	require.NoError(t, err)
	h := s.Handle()
	b, err := cuda.AllocFor[uint32](s, 16)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.ErrorIs(t, s.Close(), cuda.ErrClosed)
	require.ErrorIs(t, s.Close(), resource.ErrReleased)

	s2, err := ctx.AcquireStream(context.Background())
	require.NoError(t, err)
	defer s2.Close()
	assert.Equal(t, h, s2.Handle(), "the idle stream is reused")
	assert.Zero(t, s.Handle(), "the released Stream hands out no handle: it is s2's now")
	for name, op := range map[string]func() error{
		"memset":      func() error { return b.Memset32Async(s, 1) },
		"alloc":       func() error { _, err := ctx.Alloc(s, 64); return err },
		"query":       func() error { _, err := s.Query(); return err },
		"copy":        func() error { return cuda.CopyToDeviceAsync(s, b, []uint32{1}) },
		"record":      func() error { e, _ := ctx.NewEvent(false); defer e.Close(); return e.Record(s) },
		"enqueue":     func() error { return cuda.Enqueue(s, noRawWork, cuda.Reads(b)) },
		"wait":        func() error { e, _ := ctx.NewEvent(false); defer e.Close(); return s.WaitEvent(e) },
		"synchronize": s.Synchronize,
	} {
		require.ErrorIs(t, op(), cuda.ErrClosed, name)
	}
	// The buffer's use in the released generation is complete: the new holder
	// writes it without waiting for anything.
	before := cuda.HandOffsForTest(s2)
	require.NoError(t, b.Memset32Async(s2, 2))
	assert.Zero(t, cuda.HandOffsForTest(s2)-before)
	require.NoError(t, b.Close())
	require.NoError(t, s2.Synchronize())
}

// A pooled Stream dropped without Close goes back to the pool once unreachable.
func TestStreamPoolDropped(t *testing.T) {
	ctx := poolContext(t)
	func() {
		s, err := ctx.AcquireStream(context.Background())
		require.NoError(t, err)
		require.NoError(t, s.Synchronize())
	}()
	require.Eventually(t, func() bool {
		runtime.GC()
		resource.Drain()
		idle, lent, _, _, _ := cuda.PoolStatsForTest(ctx)
		return lent == 0 && idle == 1
	}, 5*time.Second, 10*time.Millisecond)
}

// At the limit, acquirers wait for a release or until their context is done.
func TestStreamPoolLimit(t *testing.T) {
	ctx := poolContext(t)
	require.NoError(t, ctx.SetStreamLimit(1))
	assert.Equal(t, 1, ctx.StreamLimit())
	s, err := ctx.AcquireStream(context.Background())
	require.NoError(t, err)
	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = ctx.AcquireStream(short)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	got := make(chan *cuda.Stream)
	go func() {
		s2, err := ctx.AcquireStream(context.Background())
		assert.NoError(t, err)
		got <- s2
	}()
	time.Sleep(10 * time.Millisecond)
	require.NoError(t, s.Close())
	s2 := <-got
	require.NoError(t, s2.Close())

	// Raising the limit admits waiters.
	s, err = ctx.AcquireStream(context.Background())
	require.NoError(t, err)
	go func() {
		s3, err := ctx.AcquireStream(context.Background())
		assert.NoError(t, err)
		got <- s3
	}()
	time.Sleep(10 * time.Millisecond)
	require.NoError(t, ctx.SetStreamLimit(0))
	assert.Equal(t, cuda.DefaultStreamLimit*runtime.GOMAXPROCS(0), ctx.StreamLimit())
	require.NoError(t, (<-got).Close())
	require.NoError(t, s.Close())
}

// WithStream carries its stream in the context: nested calls share it, a priority
// switch gets a stream of that priority and returns to the caller's, and a failing
// or panicking function gives its stream back and reports its own error.
func TestWithStream(t *testing.T) {
	ctx := poolContext(t)
	bg := context.Background()
	assert.Nil(t, cuda.StreamFromContext(bg))
	least, greatest, err := ctx.StreamPriorityRange()
	require.NoError(t, err)

	err = ctx.WithStream(bg, func(c context.Context, s *cuda.Stream) error {
		assert.Same(t, s, cuda.StreamFromContext(c))
		require.NoError(t, ctx.WithStream(c, func(c2 context.Context, s2 *cuda.Stream) error {
			assert.Same(t, s, s2, "nested: the caller's stream")
			return nil
		}))
		require.NoError(t, ctx.WithStream(c, func(c2 context.Context, hi *cuda.Stream) error {
			assert.NotSame(t, s, hi)
			assert.Same(t, hi, cuda.StreamFromContext(c2))
			// Switching back (Normal inside High) reuses the caller's stream.
			return ctx.WithStream(c2, func(c3 context.Context, lo *cuda.Stream) error {
				assert.Same(t, s, lo)
				assert.Same(t, s, cuda.StreamFromContext(c3))
				return nil
			}, cuda.WithPriority(cuda.Normal))
		}, cuda.WithPriority(cuda.High)))
		assert.Same(t, s, cuda.StreamFromContext(c), "the caller's stream is back")
		return nil
	})
	require.NoError(t, err)
	_, lent, _, _, _ := cuda.PoolStatsForTest(ctx)
	assert.Zero(t, lent)
	_, lent, _, _, _ = cuda.PoolStatsForTest(ctx, cuda.WithPriority(cuda.Priority(greatest)))
	assert.Zero(t, lent)
	if least != greatest {
		idle, _, _, _, _ := cuda.PoolStatsForTest(ctx, cuda.WithPriority(cuda.High))
		assert.Equal(t, 1, idle, "High is the greatest priority's pool")
	}

	boom := errors.New("boom")
	var failed *cuda.Stream
	err = ctx.WithStream(bg, func(_ context.Context, s *cuda.Stream) error { failed = s; return boom })
	require.ErrorIs(t, err, boom)
	require.ErrorIs(t, failed.Synchronize(), cuda.ErrClosed, "given back")
	assert.PanicsWithValue(t, "kernel exploded", func() {
		_ = ctx.WithStream(bg, func(context.Context, *cuda.Stream) error { panic("kernel exploded") })
	})
	_, lent, _, _, _ = cuda.PoolStatsForTest(ctx)
	assert.Zero(t, lent, "a panicking function's stream is given back")

	// A switch inside a caller's stream that fails: the caller's stream is not
	// ordered after the failed work, and the error is the function's.
	err = ctx.WithStream(bg, func(c context.Context, s *cuda.Stream) error {
		err := ctx.WithStream(c, func(context.Context, *cuda.Stream) error { return boom }, cuda.WithPriority(cuda.High))
		require.ErrorIs(t, err, boom)
		return s.Synchronize()
	})
	require.NoError(t, err)
}

// Many goroutines each run a small task on a pooled stream: the streams made stay
// within the pool's limit, and at most 32 are idle afterwards.
func TestStreamPoolManyGoroutines(t *testing.T) {
	ctx := poolContext(t)
	s0, err := ctx.NewStream()
	require.NoError(t, err)
	defer s0.Close()
	const n = 1024
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			err := ctx.WithStream(context.Background(), func(c context.Context, s *cuda.Stream) error {
				b, err := cuda.AllocFor[uint32](s, 64)
				if err != nil {
					return err
				}
				defer b.Close()
				if err := b.Memset32Async(s, uint32(i)); err != nil {
					return err
				}
				out := make([]uint32, 64)
				if err := cuda.CopyFromDevice(out, b); err != nil {
					return err
				}
				if out[63] != uint32(i) {
					return errors.New("wrong data")
				}
				return nil
			})
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	idle, lent, created, destroyed, peak := cuda.PoolStatsForTest(ctx)
	assert.Zero(t, lent)
	assert.LessOrEqual(t, idle, 32)
	assert.LessOrEqual(t, int(peak), ctx.StreamLimit()+32, "never more streams than the limit lent and 32 idle")
	t.Logf("%d goroutines: %d streams made, %d destroyed, at most %d alive, %d idle (limit %d)", n, created, destroyed, peak, idle, ctx.StreamLimit())
}
