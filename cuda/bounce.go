package cuda

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gocuda/gocuda/internal/rescore"
)

// Device-to-host copies of up to bounceMax bytes into pageable memory (an ordinary Go
// slice) go through a page-locked bounce buffer of the context: the DMA into it,
// waited for on a flag (copyflag.go), then a copy into the slice. The driver's own
// pageable path stages the copy too, but waits as the context's scheduling flag
// says (the primary context blocks). BenchmarkCopyBounce, alternated with
// cuMemcpyDtoH from C in one process, finds bouncing faster than the driver's path
// from 4 KiB to 1 MiB and slower at 4 MiB, where the DMA and the copy into the slice,
// one after the other, lose to the driver's pipeline. Larger copies take the driver's
// path, and from stageThreshold the staging ring. Each
// context keeps one bounce buffer of bounceMax bytes, until resource.Reclaim;
// concurrent copies allocate their own from the pinned pool's cache.

// bounceMax is the largest copy that bounces (0: none).
var bounceMax = 1 << 20

// bounceBuf is a context's bounce buffer.
type bounceBuf struct {
	hb *HostBuffer
	p  unsafe.Pointer
}

// bouncedCopies counts the copies that bounced (tests).
var bouncedCopies atomic.Int64

// lostBounces keeps the bounce buffers of copies whose DMA may still be running
// when they failed (a sticky error): never reused, never freed.
var lostBounces struct {
	mu   sync.Mutex
	bufs []*bounceBuf
}

// takeBounce returns the context's idle bounce buffer, or a new one, of at least n
// bytes; nil if none can be had. A new one has bounceMax bytes to be kept, or, while
// another copy holds the kept one, n.
func (ms *memState) takeBounce(c *Context, n int) *bounceBuf {
	if b := ms.bounce.Swap(nil); b != nil {
		if b.hb.Size() >= n {
			return b
		}
		_ = b.hb.Close() // smaller than the knob now asks (tests)
	}
	size := n
	if !ms.bounceHeld.Load() {
		size = max(n, bounceMax)
	}
	hb, err := c.AllocHost(size)
	if err != nil {
		return nil
	}
	return &bounceBuf{hb: hb, p: hostPointer(hb.m.ptr)}
}

// putBounce gives b back: kept if it has bounceMax bytes and the context keeps
// none, else freed (to the pinned pool's cache).
func (ms *memState) putBounce(b *bounceBuf) {
	if b.hb.Size() >= bounceMax && ms.bounce.CompareAndSwap(nil, b) {
		ms.bounceHeld.Store(true)
		return
	}
	_ = b.hb.Close()
}

// The kept bounce buffers go back in resource.Reclaim, as the staging rings do.
func init() { rescore.OnReclaim(dropBounces) }

// dropBounces frees each context's idle bounce buffer (to the pinned pool's cache),
// so that page-locked memory a program no longer copies through is not kept for
// good. A copy that finds none idle later allocates a new one and keeps it again.
// Only an idle buffer is freed: a copy using one holds it (Swap took it), and its
// DMA has finished when it is given back.
func dropBounces() {
	contexts.Range(func(_, v any) bool {
		if ms := v.(*ctxState).mem.Load(); ms != nil {
			if b := ms.bounce.Swap(nil); b != nil {
				_ = b.hb.Close()
			}
			ms.bounceHeld.Store(false)
		}
		return true
	})
}

// copyBounced copies n bytes from the start of m into pageable memory at p through
// the context's bounce buffer; on s, or without s as the synchronous forms do.
// Either way it returns once the bytes are at p. The caller checked m and s.
func copyBounced(s *Stream, m *memBase, p unsafe.Pointer, n int) error {
	c, err := m.enterAcquire()
	if err != nil {
		return err
	}
	defer c.exit()
	ms := m.ms
	b := ms.takeBounce(m.ctx, n)
	if b == nil {
		m.leave()
		return copyDirect(s, m, p, n, false)
	}
	ctx, src, dst := c.h, m.ptr, b.p
	ran := false
	err = runRecorded(s, func(t *stream, w *waiter) error {
		err := copyRecord(ctx, copyDtoH, src, dst, 0, uint64(n), t.h, w)
		ran = err == nil || queued(err)
		return err
	}, m, false, nil, n, evAlways|evFlag)
	if err != nil {
		if ran { // the DMA may still write b
			lostBounces.mu.Lock()
			lostBounces.bufs = append(lostBounces.bufs, b)
			lostBounces.mu.Unlock()
		} else {
			ms.putBounce(b)
		}
		return err
	}
	bouncedCopies.Add(1)
	copy(unsafe.Slice((*byte)(p), n), unsafe.Slice((*byte)(b.p), n))
	ms.putBounce(b)
	return nil
}
