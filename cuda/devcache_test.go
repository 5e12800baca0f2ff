package cuda_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/resource"
)

// crossSetup returns a producer and a consumer stream, a pinned buffer of 256 uint32
// and the kernels' module, with earlier tests' dropped buffers released.
func crossSetup(t *testing.T) (ctx *cuda.Context, m *cuda.Module, prod, cons *cuda.Stream, host *cuda.HostBuffer) {
	t.Helper()
	_, m, _ = loadKernels(t)
	ctx = m.Context()
	var err error
	prod, err = ctx.NewStream()
	require.NoError(t, err)
	t.Cleanup(func() { prod.Close() })
	cons, err = ctx.NewStream()
	require.NoError(t, err)
	t.Cleanup(func() { cons.Close() })
	host, err = ctx.AllocHost(1024)
	require.NoError(t, err)
	t.Cleanup(func() { host.Close() })
	_, err = resource.Reclaim()
	require.NoError(t, err)
	require.NoError(t, ctx.Synchronize())
	return ctx, m, prod, cons, host
}

// produced allocates 256 uint32 on prod and fills them with v there.
func produced(t *testing.T, prod *cuda.Stream, v uint32) *cuda.DeviceBuffer {
	t.Helper()
	p, err := cuda.AllocFor[uint32](prod, 256)
	require.NoError(t, err)
	require.NoError(t, p.Memset32Async(prod, v))
	return p
}

func assertAll(t *testing.T, host *cuda.HostBuffer, want uint32) {
	t.Helper()
	for i, v := range cuda.HostSlice[uint32](host) {
		require.Equal(t, want, v, "element %d", i)
	}
}

// A buffer allocated on a producer's stream and closed after its use on a
// consumer's stream goes back to the producer's cache: once the consumer's work is
// done, the producer's next allocation takes it, with no driver call.
func TestMemDeviceCacheAcrossStreams(t *testing.T) {
	ctx, _, prod, cons, host := crossSetup(t)
	for i := range 3 {
		p := produced(t, prod, uint32(i))
		pa := p.Ptr()
		require.NoError(t, cuda.CopyAsync(cons, host, p)) // after the fill (hand-off)
		require.NoError(t, cons.Synchronize())
		assertAll(t, host, uint32(i))
		before := primaryStats(t).Kinds[cuda.KindDevice]
		require.NoError(t, p.Close())
		mid := primaryStats(t).Kinds[cuda.KindDevice]
		assert.Equal(t, before.CachedBlocks+1, mid.CachedBlocks, "the block is cached")

		q, err := cuda.AllocFor[uint32](prod, 256)
		require.NoError(t, err)
		assert.Equal(t, pa, q.Ptr(), "the producer's next allocation reuses the consumer's block")
		assert.Equal(t, before.CachedBlocks, primaryStats(t).Kinds[cuda.KindDevice].CachedBlocks)
		require.NoError(t, q.Close())
	}
	require.NoError(t, ctx.Synchronize())
}

// A block whose use on the consumer's stream is still running is not reused before
// it ends: the producer's allocation meanwhile gets another block, and the
// consumer reads what the producer wrote.
func TestMemDeviceCacheFenced(t *testing.T) {
	ctx, m, prod, cons, host := crossSetup(t)
	p := produced(t, prod, 7)
	pa := p.Ptr()
	resume := behind(t, m, cons, time.Second)
	require.NoError(t, cuda.CopyAsync(cons, host, p))
	require.NoError(t, p.Close())

	q := produced(t, prod, 9) // while the copy of p waits on cons
	qa := q.Ptr()
	assert.NotEqual(t, pa, qa, "a block still in use on another stream")
	resume()
	require.NoError(t, cons.Synchronize())
	assertAll(t, host, 7)
	require.NoError(t, q.Close())

	// Both blocks are the producer's now: q's (its own, the newest) and p's (its
	// fence done).
	got := map[uint64]bool{}
	for range 2 {
		r, err := cuda.AllocFor[uint32](prod, 256)
		require.NoError(t, err)
		got[uint64(r.Ptr())] = true
		defer r.Close()
	}
	assert.Equal(t, map[uint64]bool{uint64(pa): true, uint64(qa): true}, got)
	require.NoError(t, ctx.Synchronize())
}

// Emptying the caches frees a fenced block only after the use it is fenced on: the
// consumer's copy, still queued, reads memory not yet freed.
func TestMemDeviceCacheFencedFlush(t *testing.T) {
	ctx, m, prod, cons, host := crossSetup(t)
	p := produced(t, prod, 5)
	resume := behind(t, m, cons, time.Second)
	require.NoError(t, cuda.CopyAsync(cons, host, p))
	require.NoError(t, p.Close())
	cuda.FlushCachesForTest(ctx)
	assert.Zero(t, primaryStats(t).Kinds[cuda.KindDevice].CachedBlocks)
	resume()
	require.NoError(t, ctx.Synchronize())
	assertAll(t, host, 5)
}

// A block whose home stream was closed, or that was used on two other streams not
// known to have finished, goes back to the pool, not to a cache.
func TestMemDeviceCacheNotKept(t *testing.T) {
	ctx, _, prod, cons, host := crossSetup(t)
	third, err := ctx.NewStream()
	require.NoError(t, err)
	defer third.Close()
	host2, err := ctx.AllocHost(1024)
	require.NoError(t, err)
	defer host2.Close()

	p := produced(t, prod, 3)
	require.NoError(t, cuda.CopyAsync(cons, host, p))
	require.NoError(t, cuda.CopyAsync(third, host2, p))
	before := primaryStats(t).Kinds[cuda.KindDevice]
	require.NoError(t, p.Close())
	assert.Equal(t, before.CachedBlocks, primaryStats(t).Kinds[cuda.KindDevice].CachedBlocks, "two other streams: to the pool")
	require.NoError(t, ctx.Synchronize())
	assertAll(t, host, 3)
	assertAll(t, host2, 3)

	home, err := ctx.NewStream()
	require.NoError(t, err)
	p = produced(t, home, 4)
	require.NoError(t, cuda.CopyAsync(cons, host, p))
	require.NoError(t, home.Close())
	before = primaryStats(t).Kinds[cuda.KindDevice]
	require.NoError(t, p.Close())
	assert.Equal(t, before.CachedBlocks, primaryStats(t).Kinds[cuda.KindDevice].CachedBlocks, "home closed: to the pool")
	require.NoError(t, ctx.Synchronize())
	assertAll(t, host, 4)
}
