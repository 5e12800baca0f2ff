package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/internal/calltrace"
)

// Copies and memset. Each has a form that queues the work on a stream and returns
// (…Async, taking the *Stream first) and a form that waits for it. The waiting forms
// run on the stream of the buffer's only use if it is still open in the generation
// of that use, else on the package's stream for the context, and wait only for that
// stream's work up to the copy, holding no lock meanwhile. Every form takes part in
// the hand-off: it waits on the GPU for the buffers' conflicting uses on other
// streams (the source is read, the destination written) and is recorded as their use.
//
// Copies from and to Go slices use pageable memory, which the GPU cannot reach
// directly: it has to go through pinned memory. Small copies (under a few MiB) take
// the driver's path, one call; larger ones are staged by the package (staged.go)
// through a ring of pinned buffers of the context, cut into pieces: the host copies
// piece k+1 into the ring, on several goroutines, while the DMA engine moves piece k
// (the driver's path moves one piece at a time, copied on one thread, well below
// what the link carries). Either way, with the driver's own semantics for pageable
// memory (cuMemcpyHtoD, cuMemcpyDtoH):
//
//   - CopyToDevice and CopyToDeviceAsync return once src has been read (by the
//     driver, or into the staging ring): src may be reused or modified at once. The
//     DMA into dst may still be queued then, from pinned memory, not from src; it is
//     ordered before every later use of dst through this package (a kernel launch,
//     a copy, a library call, Close), as any queued work is; raw work on dst is
//     ordered by Enqueue.
//   - CopyFromDevice and CopyFromDeviceAsync return once dst has been written, which
//     waits for the stream's work queued before the copy: dst may be read at once.
//   - While a staged copy runs, it holds the buffer and the stream as a direct copy
//     does while it is queued: their Close waits for it, and a staged copy that finds
//     them closed fails with ErrClosed.
//
// A slice of the package's page-locked or unified memory (the bytes of a HostBuffer
// or a ManagedBuffer, a wrapped slice) is the GPU's until its DMA ends: the forms
// above then wait for the copy, so that the same promises hold. Memory page-locked
// outside the package (by raw calls or another library) is not known to it and is
// copied as pageable memory, without that wait: copy it with raw calls, or register
// Go memory with Wrap instead. The async forms therefore overlap with the GPU's other
// work only through the stream order, not with the calling goroutine: to overlap
// copies with host work, pass the HostBuffer itself to CopyAsync, which returns once
// the copy is queued.
//
// The files: copy.go holds the API and its checks, copy_run.go how each operation
// is queued, handed off and waited for, copy_c.go the calls into C, copyflag.go the
// flags that synchronous copies wait on, staged.go and bounce.go the copies through
// the context's pinned buffers, peer.go the copies between contexts.

// CopyToDevice copies src into the start of dst. As cuMemcpyHtoD from pageable
// memory, it returns once src has been read: the DMA from pinned staging memory may
// still be queued then, ordered before dst's later uses (see above). src must not be
// longer than dst; T must be free of Go pointers, and be dst's element type if dst
// has one (AllocFor).
func CopyToDevice[T any](dst *DeviceBuffer, src []T) error {
	if err := checkElem[T](dst.base()); err != nil {
		return err
	}
	p, n, err := hostSpan(src)
	if err != nil {
		return err
	}
	err = copyHost(nil, dst.base(), p, n, true)
	runtime.KeepAlive(src)
	return err
}

// CopyToDeviceAsync queues a copy of src into the start of dst on s. It returns once
// src has been read (into the driver's or the package's pinned staging memory): src
// may be reused at once.
func CopyToDeviceAsync[T any](s *Stream, dst *DeviceBuffer, src []T) error {
	if err := checkStream(s); err != nil {
		return err
	}
	if err := checkElem[T](dst.base()); err != nil {
		return err
	}
	p, n, err := hostSpan(src)
	if err != nil {
		return err
	}
	err = copyHost(s, dst.base(), p, n, true)
	runtime.KeepAlive(src)
	return err
}

// CopyFromDevice fills dst from the start of src and waits for the copy. dst must
// not be longer than src. The copy runs after the writes queued to src on any stream:
// on the stream of src's only use when that is the last thing queued there, else on
// the context's default stream, which the hand-off makes wait for src's other uses.
// The wait cannot be abandoned (the copy writes dst until it ends): for a deadline,
// copy into a HostBuffer with CopyAsync and wait with its SynchronizeContext.
func CopyFromDevice[T any](dst []T, src *DeviceBuffer) error {
	if err := checkElem[T](src.base()); err != nil {
		return err
	}
	p, n, err := hostSpan(dst)
	if err != nil {
		return err
	}
	err = copyHost(nil, src.base(), p, n, false)
	runtime.KeepAlive(dst)
	return err
}

// CopyFromDeviceAsync queues a copy from the start of src into dst on s. With a
// pageable dst (any ordinary Go slice) it returns only once the copy is done, after
// the stream's earlier work: dst may be read at once. That wait cannot be abandoned
// (see CopyFromDevice).
func CopyFromDeviceAsync[T any](s *Stream, dst []T, src *DeviceBuffer) error {
	if err := checkStream(s); err != nil {
		return err
	}
	if err := checkElem[T](src.base()); err != nil {
		return err
	}
	p, n, err := hostSpan(dst)
	if err != nil {
		return err
	}
	err = copyHost(s, src.base(), p, n, false)
	runtime.KeepAlive(dst)
	return err
}

// Copy copies all of src into the start of dst (any kinds of memory, through unified
// addressing) and waits for the copy. src must not be larger than dst. Device memory
// of two contexts (two devices) is copied with cuMemcpyPeerAsync on a stream of the
// destination's context (CopyAsync: on s, which must belong to either); peer access
// (Context.EnablePeerAccess) makes it direct, else the driver stages it.
func Copy(dst, src Memory) error { return copyMem(nil, dst, src) }

// CopyAsync queues a copy of all of src into the start of dst on s.
func CopyAsync(s *Stream, dst, src Memory) error {
	if err := checkStream(s); err != nil {
		return err
	}
	return copyMem(s, dst, src)
}

// Memset8 sets every byte of the buffer to v and waits.
func (b *DeviceBuffer) Memset8(v uint8) error { return memset(nil, b.base(), 1, uint32(v)) }

// Memset16 sets every 2-byte word of the buffer to v and waits; the size must be a
// multiple of 2.
func (b *DeviceBuffer) Memset16(v uint16) error { return memset(nil, b.base(), 2, uint32(v)) }

// Memset32 sets every 4-byte word of the buffer to v and waits; the size must be a
// multiple of 4.
func (b *DeviceBuffer) Memset32(v uint32) error { return memset(nil, b.base(), 4, v) }

// Memset8Async queues setting every byte of the buffer to v on s.
func (b *DeviceBuffer) Memset8Async(s *Stream, v uint8) error {
	if err := checkStream(s); err != nil {
		return err
	}
	return memset(s, b.base(), 1, uint32(v))
}

// Memset16Async queues setting every 2-byte word of the buffer to v on s.
func (b *DeviceBuffer) Memset16Async(s *Stream, v uint16) error {
	if err := checkStream(s); err != nil {
		return err
	}
	return memset(s, b.base(), 2, uint32(v))
}

// Memset32Async queues setting every 4-byte word of the buffer to v on s.
func (b *DeviceBuffer) Memset32Async(s *Stream, v uint32) error {
	if err := checkStream(s); err != nil {
		return err
	}
	return memset(s, b.base(), 4, v)
}

// copyHost copies n bytes between host memory at p and the start of m.
func copyHost(s *Stream, m *memBase, p unsafe.Pointer, n int, toDevice bool) error {
	if h := calltrace.Load(); h != nil { // a timeline runs (cupti): it names the Go call behind the work
		defer h.End(h.Begin("Copy"))
	}
	if err := m.check(); err != nil {
		return err
	}
	if n > m.size {
		return fmt.Errorf("%w: copying %d bytes with a %d-byte buffer", ErrInvalidArgument, n, m.size)
	}
	if s != nil && s.cs != m.ctx.ctxState {
		return fmt.Errorf("cuda: copying on a stream of another context: %w", ErrWrongContext)
	}
	if s != nil && s.capture.Load() != nil && n > 0 {
		return copyHostCaptured(s, m, p, n, toDevice)
	}
	if n == 0 {
		return copyDirect(s, m, p, 0, toDevice)
	}
	if stageThreshold > 0 && n >= stageThreshold {
		return copyStaged(s, m, p, n, toDevice)
	}
	if !toDevice && n <= bounceMax && !inHostRanges(uintptr(p), n) {
		return copyBounced(s, m, p, n)
	}
	return copyDirect(s, m, p, n, toDevice)
}

// copyDirect is copyHost through the driver's own path for pageable memory: one
// cuMemcpyHtoDAsync or cuMemcpyDtoHAsync.
func copyDirect(s *Stream, m *memBase, p unsafe.Pointer, n int, toDevice bool) error {
	c, err := m.enterAcquire()
	if err != nil {
		return err
	}
	defer c.exit()
	if n == 0 {
		m.leave()
		return nil
	}
	ctx, dir := c.h, copyDtoH
	if toDevice {
		dir = copyHtoD
	}
	// Pageable memory (any Go slice outside the package's page-locked blocks) is read
	// or written by the driver before the copy call returns (cuMemcpyHtoDAsync stages
	// it, cuMemcpyDtoHAsync waits for the DMA): nothing to wait for. A page-locked
	// slice is the GPU's until the copy ends: every form waits for it, the async ones
	// included, since they return once the slice is read or written.
	evs := evNever
	if inHostRanges(uintptr(p), n) {
		evs = evAlways
	}
	return runRecorded(s, func(t *stream, w *waiter) error {
		return copyRecord(ctx, dir, m.ptr, p, 0, uint64(n), t.h, w)
	}, m, toDevice, nil, n, evs|evFlag)
}

// copyHostCaptured is copyHost on a capturing stream. A replay must not read Go
// memory, which may have moved, been reused or been freed by then: a copy to the
// device copies src now into pinned memory of the graph's (a snapshot, which every
// replay copies again), and a copy into Go memory is refused.
func copyHostCaptured(s *Stream, m *memBase, p unsafe.Pointer, n int, toDevice bool) error {
	if !toDevice {
		return s.capture.Load().refuse("copying into Go memory (copy into a HostBuffer)")
	}
	stage, err := m.ctx.AllocHost(n)
	if err != nil {
		return fmt.Errorf("cuda: staging a copy in a capture: %w", err)
	}
	copy(unsafe.Slice((*byte)(hostPointer(stage.m.ptr)), n), unsafe.Slice((*byte)(p), n))
	c := m.ctx.ctxState
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	src := stage.base()
	if err := acquirePair(m, src); err != nil {
		return err
	}
	ctx, dst, sp := c.h, m.ptr, src.ptr
	err = runOn(s, func(t *stream) error { return cudaraw.MemcpyAsyncIn(ctx, dst, sp, uint64(n), t.h) }, m, true, src, n)
	// Leased by the capture: freed when the graph and its executables no longer
	// hold it.
	return errors.Join(err, stage.Close())
}

// copyMem brackets copyMemOn for a timeline outside it: a second defer there would
// cost every copy the open-coded defer of its context's exit.
func copyMem(s *Stream, dst, src Memory) error {
	if h := calltrace.Load(); h != nil { // a timeline runs (cupti): it names the Go call behind the work
		defer h.End(h.Begin("Copy"))
	}
	return copyMemOn(s, dst, src)
}

func copyMemOn(s *Stream, dst, src Memory) error {
	if dst == nil || src == nil {
		return fmt.Errorf("%w: nil memory", ErrInvalidArgument)
	}
	d, o := dst.base(), src.base()
	if err := d.check(); err != nil {
		return err
	}
	if err := o.check(); err != nil {
		return err
	}
	if o.size > d.size {
		return fmt.Errorf("%w: copying %d bytes into a %d-byte buffer", ErrInvalidArgument, o.size, d.size)
	}
	if d.ctx.ctxState != o.ctx.ctxState || (s != nil && s.cs != d.ctx.ctxState) {
		return copyPeer(s, d, o) // between contexts (peer.go)
	}
	c := d.ctx.ctxState
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	ctx := c.h
	dp, sp, n, sk := d.ptr, o.ptr, uint64(o.size), o.kind
	if d == o {
		if err := d.acquire(); err != nil {
			return err
		}
		o = nil
	} else if err := acquirePair(d, o); err != nil {
		return err
	}
	var op func(t *stream, w *waiter) error
	switch {
	case copyTyped && isHostKind(d.kind) && sk == KindDevice:
		op = func(t *stream, w *waiter) error {
			return copyRecord(ctx, copyDtoH, sp, hostPointer(dp), 0, n, t.h, w)
		}
	case copyTyped && d.kind == KindDevice && isHostKind(sk):
		op = func(t *stream, w *waiter) error {
			return copyRecord(ctx, copyHtoD, dp, hostPointer(sp), 0, n, t.h, w)
		}
	default:
		op = func(t *stream, w *waiter) error { return copyRecord(ctx, copyAny, dp, nil, sp, n, t.h, w) }
	}
	return runRecorded(s, op, d, true, o, int(n), evSync|evFlag)
}

// isHostKind reports whether memory of kind k is page-locked host memory.
func isHostKind(k MemoryKind) bool { return k == KindPinned || k == KindWrapped }

// acquirePair acquires two distinct buffers in address order.
func acquirePair(a, b *memBase) error {
	if uintptr(unsafe.Pointer(a)) > uintptr(unsafe.Pointer(b)) {
		a, b = b, a
	}
	if err := a.acquire(); err != nil {
		return err
	}
	if err := b.acquire(); err != nil {
		a.leave()
		return err
	}
	return nil
}

func memset(s *Stream, m *memBase, width int, v uint32) error {
	if h := calltrace.Load(); h != nil { // a timeline runs (cupti): it names the Go call behind the work
		defer h.End(h.Begin("Memset"))
	}
	if err := m.check(); err != nil {
		return err
	}
	if m.size%width != 0 {
		return fmt.Errorf("%w: %d-byte memset of a %d-byte buffer", ErrInvalidArgument, width, m.size)
	}
	if s != nil && s.cs != m.ctx.ctxState {
		return fmt.Errorf("cuda: memset on a stream of another context: %w", ErrWrongContext)
	}
	c, err := m.enterAcquire()
	if err != nil {
		return err
	}
	defer c.exit()
	ctx, p, n := c.h, m.ptr, uint64(m.size/width)
	return run(s, func(h cudaraw.CUstream) error {
		switch width {
		case 1:
			return cudaraw.MemsetD8AsyncIn(ctx, p, uint8(v), n, h)
		case 2:
			return cudaraw.MemsetD16AsyncIn(ctx, p, uint16(v), n, h)
		}
		return cudaraw.MemsetD32AsyncIn(ctx, p, v, n, h)
	}, m, true, nil)
}
