package cuda

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"unsafe"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/internal/errs"
	"github.com/gocuda/gocuda/resource"
)

// Device memory: DeviceBuffer and its views, allocated on a stream from the stream's
// cache of freed blocks (memory_devcache.go) or the device's stream-ordered pool,
// and freed after its last use on the GPU, ordered by the hand-off.

// DeviceBuffer is device memory allocated from the device's stream-ordered pool
// (cuMemAllocAsync). It records its uses on streams since its last write (see the
// package documentation's hand-off): work on another stream waits on the GPU for
// the conflicting ones. Close, or, if the buffer is dropped without Close, a release
// soon after it becomes unreachable, frees it after every use: a small buffer's
// block goes back to the stream it was allocated on, for that stream's next
// allocations once the GPU has finished with it (memory_devcache.go); other memory
// is freed (cuMemFreeAsync) on the stream of its only use (or of a reader that
// waited for the others), else on the context's disposal stream once that has
// waited for all of them.
//
// A DeviceBuffer is safe for concurrent use. Operations (copies, memsets, launches)
// hold it until their work is queued: Close waits for them, never for the GPU, and
// operations after Close fail with ErrClosed. The buffer keeps its Context alive.
type DeviceBuffer struct {
	m    memBase
	home *stream               // the stream it was allocated on, whose cache takes its block back
	_    [deviceBufferPad]byte // to a multiple of 64 bytes (see memBase)
}

// deviceBufferPad pads a DeviceBuffer to 384 bytes, a size class of Go's allocator
// whose objects start on 64-byte boundaries.
const deviceBufferPad = 384 - unsafe.Sizeof(memBase{}) - unsafe.Sizeof((*stream)(nil))

func (b *DeviceBuffer) base() *memBase {
	if b == nil {
		return nil
	}
	return &b.m
}

// Alloc allocates bytes of device memory on s: the memory may be used by work queued
// on s after this call, as with cuMemAllocAsync; work on other streams is ordered
// after the allocation by the hand-off.
// On CUDA_ERROR_OUT_OF_MEMORY it runs resource.Reclaim, waits for the context's work
// and retries once; the error then wraps ErrOutOfMemory and names the size.
func (c *Context) Alloc(s *Stream, bytes int) (*DeviceBuffer, error) {
	return c.alloc(s, bytes, 1, nil, 2)
}

// AllocFor allocates device memory for n elements of T on s (in s's context); the
// buffer's Len is n, and typed copies to and from it must use T. T must be free of
// Go pointers.
func AllocFor[T any](s *Stream, n int) (*DeviceBuffer, error) {
	elem, err := elemSize[T]()
	if err != nil {
		return nil, err
	}
	if n <= 0 || n > math.MaxInt/elem {
		return nil, fmt.Errorf("%w: allocating %d elements of %d bytes", ErrInvalidArgument, n, elem)
	}
	if err := checkStream(s); err != nil {
		return nil, err
	}
	return s.ctx.alloc(s, n*elem, elem, reflect.TypeFor[T](), 2)
}

func (c *Context) alloc(s *Stream, bytes, elem int, etype reflect.Type, skip int) (*DeviceBuffer, error) {
	if err := checkSize(bytes); err != nil {
		return nil, err
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	if err := checkStream(s); err != nil {
		return nil, err
	}
	if s.cs != c.ctxState {
		return nil, fmt.Errorf("cuda: allocating on a stream of another context: %w", ErrWrongContext)
	}
	ms := c.mem.Load()
	if ms == nil || !ms.devReady.Load() {
		// First device allocation in the context: a closed stream fails before
		// anything is set up. Later ones find it closed under the stream's lock,
		// in allocOn, before any driver call.
		if streamClosed(s.stream) {
			return nil, errAllocClosed()
		}
		var err error
		if ms, err = c.memory(); err != nil {
			return nil, err
		}
	}
	return allocDevice(c, ms, s, bytes, elem, etype, skip+1)
}

func errAllocClosed() error { return fmt.Errorf("cuda: allocating on a stream: %w", ErrClosed) }

func allocDevice(c *Context, ms *memState, s *Stream, bytes, elem int, etype reflect.Type, skip int) (*DeviceBuffer, error) {
	resource.Drain()
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.exit()
	if err := ms.initDevice(); err != nil {
		return nil, err
	}
	// The driver writes the address straight into the buffer (a field free of Go
	// pointers, which cgo allows), so that it needs no allocation of its own.
	b := &DeviceBuffer{m: memBase{ctx: c, ms: ms, size: bytes, elem: elem, etype: etype, etypeID: typeWord(etype), kind: KindDevice}}
	captured := s.capture.Load() != nil
	if captured {
		// On a capturing stream the allocation would become the graph's own: take
		// it from the pool on the context's default stream instead, which the
		// graph's replays wait for (hand-off), and never reclaim in a capture.
		s = &Stream{stream: ms.defStream, ctx: c}
	}
	gen, err := allocOn(c, ms, s, &b.m.ptr, bytes)
	if errors.Is(err, cudaraw.ErrOutOfMemory) && !captured {
		ms.reclaimForOOM()
		gen, err = allocOn(c, ms, s, &b.m.ptr, bytes)
	}
	if err != nil {
		if errors.Is(err, errStreamClosed) {
			return nil, errAllocClosed()
		}
		return nil, allocError(bytes, err)
	}
	b.m.allocated(s.stream, gen)
	b.home = s.stream
	opts := ms.regOpts(KindDevice, skip, resource.At(&b.m.regv, finalizeDevice))
	resource.ResourceFinalizer((*DeviceBuffer).free, b, false, opts[:]...)
	ms.track(&b.m, nil, skip)
	return b, nil
}

// finalizeDevice is a DeviceBuffer's finalizer: it queues the release.
func finalizeDevice(b *DeviceBuffer) { b.m.regv.Finalized() }

// errStreamClosed is allocOn's error for a closed stream (internal: allocDevice
// replaces it).
var errStreamClosed = fmt.Errorf("cuda: stream: %w", ErrClosed)

// allocOn allocates bytes on pub into *p, from its stream's cache of freed blocks or
// from the pool, and returns the stream's generation.
func allocOn(c *Context, ms *memState, pub *Stream, p *cudaraw.CUdeviceptr, bytes int) (uint64, error) {
	size, class := devClass(bytes)
	s := pub.stream
	if lockOpen(pub, s) != nil {
		return 0, errStreamClosed
	}
	gen := s.gen.Load()
	if class >= 0 {
		if *p = s.takeBlock(ms, class); *p != 0 {
			s.mu.RUnlock()
			return gen, nil
		}
	}
	err := cudaraw.MemAllocAsyncIn(c.h, p, uint64(size), s.h)
	s.mu.RUnlock()
	return gen, err
}

// free frees the memory after the work that used it: a block of a cached size into
// the cache of the stream it was allocated on (stream.release), else after every
// use (freeAsync).
func (b *DeviceBuffer) free() error {
	if b.m.postpone(b.free, false) {
		return nil
	}
	uses := b.m.retire()
	home := b.home
	b.home = nil // the stream may go once the buffer has
	c := b.m.ctx
	if c.enter() != nil {
		return resource.ErrContextDestroyed // freed with its context
	}
	defer c.exit()
	if size, class := devClass(b.m.size); class >= 0 && home.release(b.m.ms, b.m.ptr, class, size, uses) {
		return nil
	}
	return b.m.ms.freeAsync(b.m.ptr, uses, nil)
}

// Ptr returns the device address of the memory, for the raw layer and other
// libraries (DevicePtr gives it as a typed pointer). It stays valid until Close;
// keep the buffer reachable while it is used. Ptr waits for nothing and orders
// nothing. The one way to hand it to raw code is Enqueue, with the buffer among the
// work's uses: the work then waits on the device for the buffer's conflicting uses
// on other streams, later uses wait for it, and Close waits until it is queued. Code
// that this package cannot order at all (a stream of its own, a host thread) calls
// Synchronize first. The stream checker (EnableStreamCheck) reports an address from
// Ptr launched on another stream, while earlier work on it is outstanding, that no
// Enqueue ordered there.
func (b *DeviceBuffer) Ptr() cudaraw.CUdeviceptr { return b.base().ptrChecked() }

// Size returns the buffer's size in bytes.
func (b *DeviceBuffer) Size() int { return b.base().sizeOrZero() }

// Len returns the number of elements: Size divided by the element size given to
// AllocFor (1 for Alloc).
func (b *DeviceBuffer) Len() int { return b.base().length() }

// Context returns the buffer's context.
func (b *DeviceBuffer) Context() *Context { return b.base().context() }

// Close frees the memory, ordered after the work queued so far on every stream that
// uses it; it does not wait. Closing a view (Slice) frees nothing: the view is closed,
// the memory stays with its allocation. Closing again, or closing a nil buffer,
// returns an error matching ErrClosed and resource.ErrReleased.
func (b *DeviceBuffer) Close() error {
	if b != nil && b.m.root != nil {
		if !b.m.hold.close() {
			return errs.Closed("cuda: device buffer view")
		}
		return nil
	}
	return b.base().close("cuda: device buffer")
}

// Slice returns a view of n elements of b from element off (elements of b's Len;
// bytes for a buffer from Context.Alloc), as b[off:off+n] would be. The view shares
// b's memory and lifetime: it keeps b reachable, operations on it hold b (so that
// b's Close waits for them, or they fail with ErrClosed after it), and its work is
// ordered on b's streams as b's own. Views of views are views of b.
func (b *DeviceBuffer) Slice(off, n int) (*DeviceBuffer, error) {
	m := b.base()
	if m == nil || m.ctx == nil {
		return nil, errNilMemory
	}
	if length := m.size / m.elem; off < 0 || n < 0 || off > length || n > length-off {
		return nil, fmt.Errorf("%w: slice [%d:%d] of a buffer of %d elements", ErrInvalidArgument, off, off+n, length)
	}
	if m.hold.closed() || m.owner().hold.closed() {
		return nil, errMemClosed[KindDevice]
	}
	v := &DeviceBuffer{m: memBase{ctx: m.ctx, ms: m.ms, ptr: m.ptr + cudaraw.CUdeviceptr(off*m.elem), size: n * m.elem,
		elem: m.elem, etype: m.etype, etypeID: m.etypeID, kind: KindDevice, root: m.owner()}}
	return v, nil
}

func streamClosed(s *stream) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.closed.Load()
}

// freeAsync frees stream-ordered memory after its uses: on the stream of the only
// use if that stream is still in the generation of the use, else on the disposal
// stream after every use not known to be complete (a multi-stream free joins there);
// memory that no stream used is freed on idle.
func (ms *memState) freeAsync(ptr cudaraw.CUdeviceptr, uses []use, idle *stream) error {
	c := ms.cs
	free := func(h cudaraw.CUstream) error { return cudaraw.MemFreeAsyncIn(c.h, ptr, h) }
	if len(uses) == 0 {
		if idle == nil {
			idle = ms.defStream
		}
		return idle.use(free)
	}
	if u, ok := freeStream(uses); ok {
		s := u.s
		s.mu.RLock()
		if u.current() {
			err := cudaraw.MemFreeAsyncIn(c.h, ptr, s.h)
			s.mu.RUnlock()
			return err
		}
		s.mu.RUnlock()
	}
	d, err := c.disposalStream()
	if err != nil {
		return err
	}
	var wait deps
	usesOf(uses, &wait)
	if err := ms.handOff(&wait, d); err != nil {
		return err
	}
	return d.use(free)
}
