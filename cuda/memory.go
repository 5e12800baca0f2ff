package cuda

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gocuda/gocuda/resource"
)

// Memory is memory that the GPU can use and that this package owns: a *DeviceBuffer,
// *HostBuffer, *ManagedBuffer or *WrappedBuffer. Copy and CopyAsync take any two.
type Memory interface {
	// Ptr returns the memory's address in the unified address space.
	Ptr() CUdeviceptr
	// Size returns the memory's size in bytes.
	Size() int
	// Context returns the context the memory belongs to.
	Context() *Context
	base() *memBase
}

// MemoryKind says where a buffer's memory lives.
type MemoryKind int

// Kinds of memory.
const (
	// KindDevice is device memory from the device's stream-ordered pool (DeviceBuffer).
	KindDevice MemoryKind = iota
	// KindPinned is page-locked host memory (HostBuffer).
	KindPinned
	// KindUnified is unified (managed) memory, migrated on demand (ManagedBuffer).
	KindUnified
	// KindWrapped is Go memory registered with the driver (WrappedBuffer).
	KindWrapped
	numKinds
)

// String returns the kind's name: "device", "pinned", "unified" or "wrapped".
func (k MemoryKind) String() string {
	switch k {
	case KindDevice:
		return "device"
	case KindPinned:
		return "pinned"
	case KindUnified:
		return "unified"
	case KindWrapped:
		return "wrapped"
	}
	return fmt.Sprintf("MemoryKind(%d)", int(k))
}

// memBase is what every buffer type holds: the memory, its owner, and the stream
// (with that stream's generation) that last used it.
type memBase struct {
	ctx  *Context
	ms   *memState
	ptr  CUdeviceptr
	size int
	elem int // element size: Len is size/elem
	kind MemoryKind
	prof uint64 // key in the memory profile; 0 when not profiled

	// hold keeps the memory from being freed while work using it is queued:
	// operations hold it until their work is queued, and the release shuts it
	// (waiting for them) before freeing. Order: the context, the hold, then a
	// stream's mu, then lastMu.
	hold hold

	// lastMu serializes changes of the last use; it is a leaf lock (Launch takes
	// it inside a stream's read lock). last and lastGen are atomic so that the
	// common checks (the buffer is used on the stream that last used it, in that
	// stream's current generation) take no lock; uses store them together, with
	// lastMu held, and retire clears last alone.
	lastMu  sync.Mutex
	last    atomic.Pointer[stream] // stream that last used the memory (nil: none yet)
	lastGen atomic.Uint64          // last's generation at that use

	// reg is the buffer's release registration: regv, registered in place by
	// the kinds that allocate often (no allocation of its own, see
	// resource.ResourceFinalizerAt), or one of its own when reg is set.
	reg  *resource.Registration
	regv resource.Registration
}

// acquire holds m (keeps it from being freed) while the caller queues work on it,
// until leave, or returns ErrClosed. The caller is in m's context.
func (m *memBase) acquire() error {
	if !m.hold.enter() {
		return errMemClosed[m.kind]
	}
	return nil
}

// leave ends an acquire.
func (m *memBase) leave() { m.hold.exit() }

// errMemClosed are the errors of uses of freed memory, per kind.
var errMemClosed = func() (e [numKinds]error) {
	for k := range numKinds {
		e[k] = fmt.Errorf("cuda: %s buffer: %w", k, ErrClosed)
	}
	return e
}()

// check rejects nil and uninitialized buffers and buffers of destroyed contexts,
// without locking and without calling the driver.
func (m *memBase) check() error {
	if m == nil || m.ctx == nil {
		return fmt.Errorf("%w: nil or zero buffer", ErrInvalidArgument)
	}
	return m.ctx.check()
}

// usedOn records that work using the memory was queued on s. Launch calls it with
// s's read lock held.
func (m *memBase) usedOn(s *stream) {
	gen := s.gen.Load()
	if m.last.Load() == s && m.lastGen.Load() == gen {
		// Already recorded (the common case: a buffer used on one stream). A
		// concurrent change by another use of the memory may have come between
		// the two loads; the outcome is then that of this use being recorded
		// first and the other one after it.
		return
	}
	m.lastMu.Lock()
	m.last.Store(s)
	m.lastGen.Store(gen)
	m.lastMu.Unlock()
}

// lastUse returns the stream that last used m and its generation then.
func (m *memBase) lastUse() (*stream, uint64) {
	m.lastMu.Lock()
	defer m.lastMu.Unlock()
	return m.last.Load(), m.lastGen.Load()
}

// lastIsCurrent reports, without locking, whether the memory was last used on t in
// t's current generation (work queued on t is then ordered after that use) or never
// used on a stream.
func (m *memBase) lastIsCurrent(t *stream) bool {
	s := m.last.Load()
	return s == nil || s == t && m.lastGen.Load() == t.gen.Load()
}

// holdArg holds the memory for a kernel argument until releaseArg and returns its
// address and context.
func (m *memBase) holdArg() (CUdeviceptr, *Context, error) {
	if m == nil || m.ctx == nil {
		return 0, nil, fmt.Errorf("%w: nil or zero buffer", ErrInvalidArgument)
	}
	if !m.hold.enter() {
		return 0, nil, errMemClosed[m.kind]
	}
	return m.ptr, m.ctx, nil
}

// releaseArg records that work using the memory was queued on s (unless s is nil)
// and ends holdArg.
func (m *memBase) releaseArg(s *stream) {
	if s != nil {
		m.usedOn(s)
	}
	m.hold.exit()
}

// retire shuts m's hold, once the operations queuing work on it are done, and
// returns its last use, which it forgets.
func (m *memBase) retire() (*stream, uint64) {
	m.hold.close()
	// Without lastMu: every use is recorded while the memory is held, and no one
	// holds it any more.
	s := m.last.Swap(nil)
	gen := m.lastGen.Load()
	if m.ms != nil {
		m.ms.untrack(m)
	}
	return s, gen
}

// close runs the registration's release now.
func (m *memBase) close() error {
	if m == nil {
		return fmt.Errorf("%w: nil buffer", ErrInvalidArgument)
	}
	r := m.reg
	if r == nil {
		r = &m.regv
	}
	err := r.Release()
	runtime.KeepAlive(m) // the buffer stays reachable until its release has run
	if errors.Is(err, resource.ErrReleased) {
		return errMemClosed[m.kind]
	}
	return closeError("", err) // ErrContextDestroyed: the driver freed it with its context
}

func (m *memBase) ptrOrZero() CUdeviceptr {
	if m == nil {
		return 0
	}
	return m.ptr
}

func (m *memBase) sizeOrZero() int {
	if m == nil {
		return 0
	}
	return m.size
}

func (m *memBase) context() *Context {
	if m == nil {
		return nil
	}
	return m.ctx
}

// DeviceBuffer is device memory allocated from the device's stream-ordered pool
// (cuMemAllocAsync). It remembers the stream that last used it and is freed there
// (cuMemFreeAsync) by Close or, if dropped without Close, soon after it becomes
// unreachable; if that stream has been closed meanwhile, the free waits on the
// context's disposal stream for the stream's last work.
//
// A DeviceBuffer is safe for concurrent use. Operations (copies, memsets, launches)
// hold it until their work is queued: Close waits for them, never for the GPU, and
// operations after Close fail with ErrClosed. The buffer keeps its Context alive.
type DeviceBuffer struct {
	m memBase
}

func (b *DeviceBuffer) base() *memBase {
	if b == nil {
		return nil
	}
	return &b.m
}

// Alloc allocates bytes of device memory on s: the memory may be used by work queued
// on s after this call (as with cuMemAllocAsync, other streams must wait for s).
// On CUDA_ERROR_OUT_OF_MEMORY it runs resource.Reclaim, waits for the context's work
// and retries once; the error then wraps ErrOutOfMemory and names the size.
func (c *Context) Alloc(s *Stream, bytes int) (*DeviceBuffer, error) {
	return c.alloc(s, bytes, 1, 2)
}

// Alloc allocates bytes of device memory on device 0, ordered on a non-blocking
// stream that the package keeps for its context (not the legacy default stream).
// Copy functions without a stream argument use that stream too.
func Alloc(bytes int) (*DeviceBuffer, error) {
	if err := checkSize(bytes); err != nil {
		return nil, err
	}
	c, err := defaultContext()
	if err != nil {
		return nil, err
	}
	ms, err := c.memory()
	if err != nil {
		return nil, err
	}
	return allocDevice(c, ms, ms.defStream, bytes, 1, 2)
}

// AllocFor allocates device memory for n elements of T on s; the buffer's Len is n.
// T must be free of Go pointers.
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
	return s.ctx.alloc(s, n*elem, elem, 2)
}

func (c *Context) alloc(s *Stream, bytes, elem, skip int) (*DeviceBuffer, error) {
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
	return allocDevice(c, ms, s.stream, bytes, elem, skip+1)
}

func errAllocClosed() error { return fmt.Errorf("cuda: allocating on a stream: %w", ErrClosed) }

func allocDevice(c *Context, ms *memState, s *stream, bytes, elem, skip int) (*DeviceBuffer, error) {
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
	b := &DeviceBuffer{m: memBase{ctx: c, ms: ms, size: bytes, elem: elem, kind: KindDevice}}
	gen, err := allocOn(c, ms, s, &b.m.ptr, bytes)
	if errors.Is(err, ErrOutOfMemory) {
		ms.reclaimForOOM()
		gen, err = allocOn(c, ms, s, &b.m.ptr, bytes)
	}
	if err != nil {
		if errors.Is(err, errStreamClosed) {
			return nil, errAllocClosed()
		}
		return nil, allocError(bytes, err)
	}
	b.m.last.Store(s)
	if gen != 0 {
		b.m.lastGen.Store(gen)
	}
	resource.ResourceFinalizerAt(&b.m.regv, (*DeviceBuffer).free, b, finalizeDevice, false, ms.regOpts(KindDevice, skip)...)
	ms.track(&b.m, nil, skip)
	return b, nil
}

// finalizeDevice is a DeviceBuffer's finalizer: it queues the release.
func finalizeDevice(b *DeviceBuffer) { resource.Finalized(&b.m.regv, b) }

// errStreamClosed is allocOn's error for a closed stream (internal: allocDevice
// replaces it).
var errStreamClosed = fmt.Errorf("cuda: stream: %w", ErrClosed)

// allocOn allocates bytes on s into *p, from s's cache of freed blocks or from the
// pool, and returns s's generation.
func allocOn(c *Context, ms *memState, s *stream, p *CUdeviceptr, bytes int) (uint64, error) {
	size, class := devClass(bytes)
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return 0, errStreamClosed
	}
	gen := s.gen.Load()
	if class >= 0 {
		if *p = s.takeBlock(ms, class); *p != 0 {
			s.mu.RUnlock()
			return gen, nil
		}
	}
	err := inMemAllocAsync(c.h, p, uint64(size), s.h)
	s.mu.RUnlock()
	return gen, err
}

// free frees the memory on the stream that last used it: into the stream's cache if
// the stream is still in the generation of that use and the cache has room, else to
// the pool.
func (b *DeviceBuffer) free() error {
	s, gen := b.m.retire()
	c := b.m.ctx
	if c.enter() != nil {
		return resource.ErrContextDestroyed // freed with its context
	}
	defer c.exit()
	if size, class := devClass(b.m.size); class >= 0 && s != nil {
		s.mu.RLock()
		if !s.closed && s.gen.Load() == gen && s.putBlock(b.m.ms, b.m.ptr, class, size) {
			s.mu.RUnlock()
			return nil
		}
		s.mu.RUnlock()
	}
	return freeAsync(c.ctxState, b.m.ptr, s, gen, nil)
}

// Ptr returns the device address of the memory, for the raw layer and other
// libraries. It stays valid until Close; keep the buffer reachable while it is used.
func (b *DeviceBuffer) Ptr() CUdeviceptr { return b.base().ptrOrZero() }

// Size returns the buffer's size in bytes.
func (b *DeviceBuffer) Size() int { return b.base().sizeOrZero() }

// Len returns the number of elements: Size divided by the element size given to
// AllocFor (1 for Alloc).
func (b *DeviceBuffer) Len() int {
	if b == nil || b.m.elem == 0 {
		return 0
	}
	return b.m.size / b.m.elem
}

// Context returns the buffer's context.
func (b *DeviceBuffer) Context() *Context { return b.base().context() }

// Close frees the memory, ordered after the work queued on the stream that last used
// it; it does not wait. Closing again returns an error matching ErrClosed.
func (b *DeviceBuffer) Close() error { return b.base().close() }

// Free is Close.
func (b *DeviceBuffer) Free() error { return b.base().close() }

func (b *DeviceBuffer) holdArg() (CUdeviceptr, *Context, error) { return b.base().holdArg() }

func (b *DeviceBuffer) releaseArg(s *stream) { b.m.releaseArg(s) }

// checkSize rejects zero and negative sizes.
func checkSize(bytes int) error {
	if bytes <= 0 {
		return fmt.Errorf("%w: allocating %d bytes", ErrInvalidArgument, bytes)
	}
	return nil
}

// allocError wraps an allocation failure with the size asked for.
func allocError(bytes int, err error) error {
	return fmt.Errorf("cuda: allocating %d bytes: %w", bytes, err)
}

func streamClosed(s *stream) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.closed
}

var dev0 atomic.Pointer[Context]

// defaultContext returns device 0's primary context.
func defaultContext() (*Context, error) {
	if c := dev0.Load(); c != nil {
		return c, nil
	}
	c, err := Device(0).Context()
	if err != nil {
		return nil, err
	}
	dev0.Store(c)
	return c, nil
}

// useIfCurrent runs f on s if s is open and still in generation gen; it reports
// whether f ran.
func useIfCurrent(s *stream, gen uint64, f func(h CUstream) error) (bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed || s.gen.Load() != gen {
		return false, nil
	}
	return true, f(s.h)
}

// finalOf returns the event marking the end of s's work before its generation moved
// on (nil if the stream could not record one).
func finalOf(s *stream) *event {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.final
}

// freeAsync frees stream-ordered memory: on s if it is still in generation gen,
// else on the disposal stream after s's final event; memory never used on a stream
// (s nil) is freed on idle.
func freeAsync(c *ctxState, ptr CUdeviceptr, s *stream, gen uint64, idle *stream) error {
	free := func(h CUstream) error { return inMemFreeAsync(c.h, ptr, h) }
	if s == nil {
		return idle.use(free)
	}
	// useIfCurrent(s, gen, free), without the closure.
	s.mu.RLock()
	if !s.closed && s.gen.Load() == gen {
		err := inMemFreeAsync(c.h, ptr, s.h)
		s.mu.RUnlock()
		return err
	}
	s.mu.RUnlock()
	d, err := c.disposalStream()
	if err != nil {
		return err
	}
	final, err := waitableFinal(c, s)
	if err != nil {
		return err
	}
	return d.use(func(h CUstream) error {
		if final != nil {
			if err := inStreamWaitEvent(c.h, h, final.h, 0); err != nil {
				return err
			}
		}
		return free(h)
	})
}

// waitableFinal returns s's final event; where s could not record one (event
// creation failed when it was destroyed), it waits for the whole context instead,
// which is rare and the only way left to order after s's work.
func waitableFinal(c *ctxState, s *stream) (*event, error) {
	if final := finalOf(s); final != nil {
		return final, nil
	}
	return nil, inCtxSynchronize(c.h)
}

// elemSize returns T's size, rejecting zero-size types and types holding Go
// pointers (the GPU cannot hold them, and cgo forbids passing them). It never makes
// a value of T, which may be far too large to exist ([1 << 40]byte).
func elemSize[T any]() (int, error) {
	t := reflect.TypeFor[T]()
	n := int(t.Size())
	if n == 0 {
		return 0, fmt.Errorf("%w: %v has size zero", ErrInvalidArgument, t)
	}
	if hasPointers(t) {
		return 0, fmt.Errorf("%w: %v holds Go pointers", ErrInvalidArgument, t)
	}
	return n, nil
}

var pointerTypes sync.Map // reflect.Type → bool

// hasPointers reports whether values of t hold Go pointers.
func hasPointers(t reflect.Type) bool {
	if v, ok := pointerTypes.Load(t); ok {
		return v.(bool)
	}
	r := walkPointers(t)
	pointerTypes.Store(t, r)
	return r
}

func walkPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return false
	case reflect.Array:
		return t.Len() > 0 && walkPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if walkPointers(t.Field(i).Type) {
				return true
			}
		}
		return false
	}
	return true
}

// hostSpan returns the address and byte length of a Go slice, checking its element
// type.
func hostSpan[T any](s []T) (unsafe.Pointer, int, error) {
	elem, err := elemSize[T]()
	if err != nil {
		return nil, 0, err
	}
	if len(s) == 0 {
		return nil, 0, nil
	}
	return unsafe.Pointer(unsafe.SliceData(s)), len(s) * elem, nil
}

// hostPointer converts an address in host memory to a pointer (the vet-clean form of
// unsafe.Pointer(uintptr(p)) for memory that Go does not manage).
func hostPointer(p CUdeviceptr) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&p))
}
