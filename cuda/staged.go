package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/internal/rescore"
)

// Staged copies. The driver copies pageable memory (an ordinary Go slice) through
// small pinned buffers of its own, one at a time and on one thread: on an H200 that
// reaches 8–15 GB/s of a link that carries 55. Copies of at least stageThreshold
// bytes between a Go slice and the device go through a ring of pinned buffers of the
// context instead: the host copies piece k+1 into the ring (on several goroutines
// for large pieces) while the DMA engine moves piece k, and device → host the other
// way round. A destination slice that was never touched takes its first-touch page
// faults in that parallel host copy, not inside the DMA wait.
//
// The staging buffers are HostBuffers of the context (AllocHost), kept per context
// between copies (stageKeep of them; resource.Reclaim empties the cache): they count
// among the context's pinned buffers in MemoryStatus.
//
// The whole staged copy is one use of the device buffer, ordered and recorded as the
// direct copy is (queue): the buffer and the stream stay held until its last piece
// is queued (host to device) or copied out (device to host).

// Tuning knobs, measured by BenchmarkStaged (staged_bench_test.go) on the GPU; tests
// change them through SetStagingForTest. The driver's direct path is as fast as
// staging up to a few MiB and slower from 16 MiB; 16 MiB pieces three deep move
// the most both ways, with 16 host workers rather than 8 (BENCHMARKS.md has the
// copy rows). A context keeps one ring: 48 MiB of pinned memory once it has staged
// a copy.
var (
	// stageThreshold is the smallest copy between a Go slice and the device that is
	// staged; smaller ones take the driver's direct path. 0 turns staging off.
	stageThreshold = 16 << 20
	// stageChunk is the size of one staging buffer, the largest piece.
	stageChunk = 16 << 20
	// stageMinPiece is the smallest piece a copy is cut into: a copy is cut into
	// stagePieces pieces where pieces can stay this large, so that short copies
	// still overlap host and DMA work.
	stageMinPiece = 512 << 10
	stagePieces   = 8
	// stageDepth is the number of staging buffers a copy cycles through.
	stageDepth = 3
	// stageKeep is the number of staging buffers a context keeps between copies
	// (emptied by resource.Reclaim); more are taken from AllocHost's cache while
	// copies run concurrently and given back afterwards.
	stageKeep = 3
	// stageWorkers is the number of goroutines one piece's host copy uses at most;
	// 0: GOMAXPROCS, at most 16 (on the H200 machine's 16 cores, 16 workers moved
	// 23–27 GB/s where 8 moved 21–26 and 4 moved 12–19). stageWorkerMin is the
	// least each copies.
	stageWorkers   = 0
	stageWorkerMin = 256 << 10
)

// Waiting for a synchronous copy: once the thread sleeps (the primary context is
// CU_CTX_SCHED_BLOCKING_SYNC), its wake-up costs tens of microseconds. A copy's
// duration is about known from its size, so the wait polls and yields until the
// copy should have finished at copyWaitRate bytes per second (plus yieldFor, at most
// copyWaitMax), and only then blocks.
var (
	copyWaitSpin = true
	copyWaitRate = 20e9
	copyWaitMax  = 50 * time.Millisecond
	// copySpinC is how long the wait queries the event (or reads the flag,
	// copyflag.go) from C before it goes on in Go (polling, yielding, then
	// blocking).
	copySpinC = 50 * time.Microsecond
	// copyTyped makes Copy between pinned or wrapped host memory and device memory
	// call cuMemcpyHtoDAsync / cuMemcpyDtoHAsync instead of cuMemcpyAsync: never
	// slower on the H200, and faster for small copies.
	copyTyped = true
)

// stagedCopies counts the copies that went through the staging ring (tests).
var stagedCopies atomic.Int64

// waitCopy waits on the host for ev, which ends a copy of about n bytes: polling and
// yielding for as long as the copy should take, then as waitEvent does.
func (ms *memState) waitCopy(ev cudaraw.CUevent, n int) error {
	if !copyWaitSpin || n <= 0 {
		return ms.waitEvent(ev)
	}
	h := ms.cs.h
	done, err := pollCopy(n, func(d time.Duration) (bool, error) { return spinEvent(h, ev, d) },
		func() (bool, error) { return ready(cudaraw.EventQueryIn(h, ev)) })
	if err != nil || done {
		return err
	}
	return ms.waitEvent(ev)
}

// pollCopy polls for the end of a copy of about n bytes for as long as the copy
// should take: first with spin, a loop in C (which sees the end of a short copy
// sooner than a loop of calls into C does), then with poll from Go, yielding. It
// reports whether the copy ended; the caller then blocks.
func pollCopy(n int, spin func(time.Duration) (bool, error), poll func() (bool, error)) (bool, error) {
	limit := min(yieldFor+time.Duration(float64(n)/copyWaitRate*float64(time.Second)), copyWaitMax)
	if done, err := spin(min(limit, copySpinC)); err != nil || done {
		return done, err
	}
	start := time.Now()
	for {
		done, err := poll()
		if err != nil || done {
			return done, err
		}
		el := time.Since(start)
		if el >= limit {
			return false, nil
		}
		if el >= pollFor {
			runtime.Gosched()
		}
	}
}

// stagePiece returns the piece size for a staged copy of n bytes.
func stagePiece(n int) int {
	piece := (n + stagePieces - 1) / max(stagePieces, 1)
	piece = (piece + 4095) &^ 4095
	return max(1, min(stageChunk, max(piece, stageMinPiece)))
}

// stageBuf is one pinned staging buffer: a HostBuffer of the context, held (acquired)
// while a copy uses it, and the fence of the last DMA that used it, which the next
// user waits for on the host (the buffers' uses are not recorded on the streams).
type stageBuf struct {
	hb  *HostBuffer
	p   unsafe.Pointer
	f   fence
	bad bool // a DMA may be in flight without a fence: never reused
}

// stageCache is a context's idle staging buffers.
type stageCache struct {
	mu   sync.Mutex
	free []*stageBuf
}

// stageCaches maps each *ctxState that staged a copy to its *stageCache.
var stageCaches sync.Map

func init() { rescore.OnReclaim(dropStages) }

// takeStage returns k staging buffers of at least size bytes for c: idle ones, or
// new ones from AllocHost. Each is held (acquired) until giveStage.
func takeStage(c *Context, k, size int) ([]*stageBuf, error) {
	v, ok := stageCaches.Load(c.ctxState)
	if !ok {
		v, _ = stageCaches.LoadOrStore(c.ctxState, new(stageCache))
	}
	sc := v.(*stageCache)
	ring := make([]*stageBuf, 0, k)
	var stale []*stageBuf
	sc.mu.Lock()
	for len(ring) < k && len(sc.free) > 0 {
		b := sc.free[len(sc.free)-1]
		sc.free[len(sc.free)-1] = nil
		sc.free = sc.free[:len(sc.free)-1]
		if b.hb.Size() < size {
			stale = append(stale, b) // the knobs changed (tests)
			continue
		}
		ring = append(ring, b)
	}
	sc.mu.Unlock()
	for _, b := range stale {
		_ = b.release()
	}
	var err error
	for len(ring) < k && err == nil {
		var hb *HostBuffer
		if hb, err = c.AllocHost(max(size, stageChunk)); err == nil {
			ring = append(ring, &stageBuf{hb: hb, p: hostPointer(hb.m.ptr), f: fence{done: true}})
		}
	}
	for i, b := range ring {
		if err == nil {
			err = b.hb.m.acquire()
			if err != nil {
				ring = ring[:i] // the ones held so far
				break
			}
		}
	}
	if err != nil {
		for _, b := range ring {
			b.hb.m.leave()
		}
		for _, b := range ring {
			_ = b.release()
		}
		return nil, err
	}
	return ring, nil
}

// giveStage lets go of the ring: into the context's cache. The cache keeps
// stageKeep buffers; beyond that it gives back, to AllocHost's cache, those whose
// last DMA has finished (checked without waiting), so that giving back never waits
// for the GPU: while copies run concurrently it holds more for a while.
func giveStage(c *Context, ring []*stageBuf) {
	v, _ := stageCaches.Load(c.ctxState)
	sc, _ := v.(*stageCache)
	if c.enter() != nil {
		sc = nil // the context is gone: nothing to keep
	} else {
		defer c.exit()
	}
	var out []*stageBuf
	if sc != nil {
		sc.mu.Lock()
	}
	for _, b := range ring {
		b.hb.m.leave()
		if sc == nil || b.bad || b.hb.Size() < stageChunk {
			out = append(out, b)
			continue
		}
		sc.free = append(sc.free, b)
	}
	if sc != nil {
		kept := sc.free[:0]
		extra := len(sc.free) - stageKeep
		for i, b := range sc.free {
			// The oldest first: the likeliest to be done.
			if extra > 0 && b.f.poll(b.hb.m.ms) {
				out = append(out, b)
				extra--
				continue
			}
			kept = append(kept, sc.free[i])
		}
		clear(sc.free[len(kept):])
		sc.free = kept
		sc.mu.Unlock()
	}
	for _, b := range out {
		_ = b.release()
	}
}

// release gives the buffer back for good, to AllocHost's cache, once the DMA that
// last used it has finished: at once where that is known, else after a host wait
// (resource.Reclaim's hook). A buffer whose DMA has no fence (bad) had its use
// recorded instead, which orders the reuse of the memory.
func (b *stageBuf) release() error {
	ms := b.hb.m.ms
	if ms.cs.enter() != nil { // the context is gone, and the memory with it
		b.f = fence{done: true}
		return b.hb.Close()
	}
	defer ms.cs.exit()
	err := b.f.wait(ms)
	if err != nil {
		b.f.clear(ms)
	}
	return errors.Join(err, b.hb.Close())
}

// mark fences b after the work queued on t so far.
func (b *stageBuf) mark(ms *memState, t *stream) error {
	ev, err := ms.getEvent()
	if err != nil {
		b.bad = true
		return err
	}
	if err := cudaraw.EventRecordIn(ms.cs.h, ev, t.h); err != nil {
		ms.putEvent(ev)
		b.bad = true
		return err
	}
	b.f = fence{ev: ev}
	return nil
}

// dropStages empties every context's staging cache (resource.Reclaim's hook) and
// forgets contexts that are gone.
func dropStages() {
	stageCaches.Range(func(k, v any) bool {
		sc := v.(*stageCache)
		sc.mu.Lock()
		bufs := sc.free
		sc.free = nil
		sc.mu.Unlock()
		for _, b := range bufs {
			_ = b.release()
		}
		cs := k.(*ctxState)
		if cs.enter() != nil {
			stageCaches.Delete(k)
		} else {
			cs.exit()
		}
		return true
	})
}

// copyStaged is copyHost through the staging ring, for n ≥ stageThreshold bytes; the
// caller checked m and s. If no staging memory can be had, the copy takes the direct
// path.
func copyStaged(s *Stream, m *memBase, p unsafe.Pointer, n int, toDevice bool) error {
	piece := stagePiece(n)
	pieces := (n + piece - 1) / piece
	depth := max(1, min(stageDepth, pieces))
	ring, err := takeStage(m.ctx, depth, piece)
	if err != nil {
		return copyDirect(s, m, p, n, toDevice)
	}
	defer giveStage(m.ctx, ring)
	c, err := m.enterAcquire()
	if err != nil {
		return err
	}
	defer c.exit()
	stagedCopies.Add(1)
	st := stagedCopy{ms: m.ms, ring: ring, dev: m.ptr, host: p, n: n, piece: piece}
	var late error
	// Nothing is left to wait for once op returns (no event, evNever): it has read
	// src into the ring, or written dst from it (the ring's fences keep its buffers
	// until their DMA).
	op := func(t *stream, _ *waiter) error {
		var queued int
		var err error
		if toDevice {
			queued, err = st.toDevice(t)
		} else {
			queued, err = st.fromDevice(t)
		}
		if queued == 0 {
			return err
		}
		// Pieces are queued: the copy is a use of m (recorded by queue), whatever
		// happens to the rest. A staging buffer without a fence records the use.
		for _, b := range ring {
			if b.bad {
				b.hb.m.record(t, !toDevice, planned{})
			}
		}
		late = err
		return nil
	}
	err = runRecorded(s, op, m, toDevice, nil, n, evNever)
	if late != nil {
		err = errors.Join(fmt.Errorf("cuda: staged copy: %w", late), err)
	}
	return err
}

// stagedCopy is one staged copy between host memory and device memory.
type stagedCopy struct {
	ms    *memState
	ring  []*stageBuf
	dev   cudaraw.CUdeviceptr
	host  unsafe.Pointer
	n     int
	piece int
}

// span returns piece i's offset and length.
func (st *stagedCopy) span(i int) (int, int) {
	off := i * st.piece
	return off, min(st.piece, st.n-off)
}

// toDevice copies each piece into the ring and queues its DMA on t. It returns the
// number of pieces queued.
func (st *stagedCopy) toDevice(t *stream) (int, error) {
	ctx, depth := st.ms.cs.h, len(st.ring)
	pieces := (st.n + st.piece - 1) / st.piece
	for i := range pieces {
		b := st.ring[i%depth]
		if err := b.f.wait(st.ms); err != nil { // the DMA that last read b
			return i, err
		}
		off, ln := st.span(i)
		parallelCopy(b.p, unsafe.Add(st.host, off), ln)
		if err := cudaraw.MemcpyHtoDAsyncIn(ctx, st.dev+cudaraw.CUdeviceptr(off), b.p, uint64(ln), t.h); err != nil {
			return i, err
		}
		if err := b.mark(st.ms, t); err != nil {
			return i + 1, err
		}
	}
	return pieces, nil
}

// fromDevice queues the DMA of the first pieces into the ring, then copies each out
// once it has arrived and queues the next into its buffer. It returns the number of
// pieces queued.
func (st *stagedCopy) fromDevice(t *stream) (int, error) {
	ctx, depth := st.ms.cs.h, len(st.ring)
	pieces := (st.n + st.piece - 1) / st.piece
	queued := 0
	issue := func() error {
		b := st.ring[queued%depth]
		if err := b.f.wait(st.ms); err != nil { // a DMA of an earlier copy
			return err
		}
		off, ln := st.span(queued)
		if err := cudaraw.MemcpyDtoHAsyncIn(ctx, b.p, st.dev+cudaraw.CUdeviceptr(off), uint64(ln), t.h); err != nil {
			return err
		}
		queued++
		return b.mark(st.ms, t)
	}
	for queued < min(depth, pieces) {
		if err := issue(); err != nil {
			return queued, err
		}
	}
	for i := range pieces {
		b := st.ring[i%depth]
		if err := b.f.wait(st.ms); err != nil {
			return queued, err
		}
		off, ln := st.span(i)
		parallelCopy(unsafe.Add(st.host, off), b.p, ln)
		if queued < pieces {
			if err := issue(); err != nil {
				return queued, err
			}
		}
	}
	return queued, nil
}

// copyWorkers returns the number of goroutines that copy n bytes on the host.
func copyWorkers(n int) int {
	w := stageWorkers
	if w <= 0 {
		w = min(runtime.GOMAXPROCS(0), 16)
	}
	return max(1, min(w, n/max(stageWorkerMin, 1)))
}

// parallelCopy copies n bytes from src to dst (not overlapping), split across
// goroutines when that pays.
func parallelCopy(dst, src unsafe.Pointer, n int) {
	w := copyWorkers(n)
	if w == 1 {
		copy(unsafe.Slice((*byte)(dst), n), unsafe.Slice((*byte)(src), n))
		return
	}
	part := ((n+w-1)/w + 4095) &^ 4095 // whole pages: each worker faults its own in
	var wg sync.WaitGroup
	for off := part; off < n; off += part {
		ln := min(part, n-off)
		wg.Add(1)
		go func() {
			defer wg.Done()
			copy(unsafe.Slice((*byte)(unsafe.Add(dst, off)), ln), unsafe.Slice((*byte)(unsafe.Add(src, off)), ln))
		}()
	}
	copy(unsafe.Slice((*byte)(dst), min(part, n)), unsafe.Slice((*byte)(src), min(part, n)))
	wg.Wait()
}
