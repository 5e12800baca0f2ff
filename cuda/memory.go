package cuda

import (
	"fmt"
	"reflect"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/internal/errs"
	"github.com/gocuda/gocuda/resource"
)

// Memory this package owns: the Memory interface, the kinds of memory, and memBase,
// what every buffer type is made of (its hold, its hand-off state, its release).
// The kinds are in memory_device.go, memory_host.go (pinned and unified) and
// memory_wrapped.go; a context's memory machinery is in memory_state.go.

// Memory is memory that the GPU can use and that this package owns: a *DeviceBuffer,
// *HostBuffer, *ManagedBuffer or *WrappedBuffer. Copy and CopyAsync take any two.
type Memory interface {
	// Ptr returns the memory's address in the unified address space.
	Ptr() cudaraw.CUdeviceptr
	// Size returns the memory's size in bytes.
	Size() int
	// Len returns the number of elements: Size divided by the element size (1 for
	// untyped memory).
	Len() int
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
//
// The fields every operation reads come first, in 64 bytes: ctx, ptr, size, etypeID,
// root, hold and the start of acc (only, onlyTag). A DeviceBuffer is a multiple of
// 64 bytes, which puts them in one cache line (TestMemBaseLayout): operations run
// between library calls that leave little of their data in cache, and each line
// they touch again costs a miss.
type memBase struct {
	ctx  *Context
	ptr  cudaraw.CUdeviceptr
	size int
	// etypeID is etype's type descriptor (typeWord), which DevicePtr compares.
	etypeID unsafe.Pointer

	// root is the allocation a view (DeviceBuffer.Slice) is part of, nil for an
	// allocation: operations on a view hold the root too, and the root keeps the
	// hand-off state (acc).
	root *memBase

	// hold keeps the memory from being freed while work using it is queued:
	// operations hold it until their work is queued, and the release shuts it
	// (waiting for them) before freeing. Order: the context, the hold, then a
	// stream's mu, then acc.mu.
	hold hold

	// acc is the allocation's uses on streams since its last write (handoff_state.go).
	acc access

	ms    *memState
	elem  int          // element size: Len is size/elem
	etype reflect.Type // the element type of AllocFor and Wrap; nil for bytes
	kind  MemoryKind
	prof  uint64 // key in the memory profile; 0 when not profiled

	// reg is the buffer's release registration: regv, registered in place by
	// the kinds that allocate often (no allocation of its own, see
	// resource.At), or one of its own when reg is set.
	reg  *resource.Registration
	regv resource.Registration

	// lease counts the graphs that keep the allocation (graph_lease.go); nil
	// until the first.
	lease atomic.Pointer[leaseState]
}

// acquire holds m (keeps it from being freed) while the caller queues work on it,
// until leave, or returns ErrClosed. The caller is in m's context. A view holds its
// root as well.
func (m *memBase) acquire() error {
	if !m.hold.enter() {
		return errMemClosed[m.kind]
	}
	if m.root != nil && !m.root.hold.enter() {
		m.hold.exit()
		return errMemClosed[m.kind]
	}
	return nil
}

// enterAcquire enters m's context and acquires m, for an operation on m that the
// caller ends with m.leave and the returned context's exit.
func (m *memBase) enterAcquire() (*ctxState, error) {
	c := m.ctx.ctxState
	if err := c.enter(); err != nil {
		return nil, err
	}
	if err := m.acquire(); err != nil {
		c.exit()
		return nil, err
	}
	return c, nil
}

// leave ends an acquire.
func (m *memBase) leave() {
	if m.root != nil {
		m.root.hold.exit()
	}
	m.hold.exit()
}

// owner returns the memBase of the allocation m is part of: m, or a view's root.
func (m *memBase) owner() *memBase {
	if m.root != nil {
		return m.root
	}
	return m
}

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
		return errNilMemory
	}
	return m.ctx.check()
}

// retire shuts m's hold, once the operations queuing work on it are done, and
// returns its uses, which it forgets.
func (m *memBase) retire() []use {
	m.hold.close()
	uses := m.takeUses()
	// The operations that use m without holding it (fastUse) do it on the stream of
	// one of its uses, under that stream's read lock.
	for _, u := range uses {
		u.s.drain()
	}
	checkForget(m)
	if m.ms != nil {
		m.ms.untrack(m)
	}
	return uses
}

// close runs the registration's release now; a nil buffer, or one released
// already, gives errs.Closed.
func (m *memBase) close(what string) error {
	if m == nil {
		return errs.Closed(what)
	}
	r := m.reg
	if r == nil {
		r = &m.regv
	}
	err := r.Release()
	runtime.KeepAlive(m)         // the buffer stays reachable until its release has run
	return closeError(what, err) // ErrContextDestroyed: the driver freed it with its context
}

// ptrChecked is Ptr: the address, seen by the stream checker when it is on.
func (m *memBase) ptrChecked() cudaraw.CUdeviceptr {
	if streamCheck.on.Load() {
		ptrTaken(m)
	}
	return m.ptrOrZero()
}

func (m *memBase) ptrOrZero() cudaraw.CUdeviceptr {
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

// length returns the number of elements (0 for nil).
func (m *memBase) length() int {
	if m == nil || m.elem == 0 {
		return 0
	}
	return m.size / m.elem
}

// checkElem rejects a typed copy of T with memory of another element type.
func checkElem[T any](m *memBase) error {
	if m == nil || m.etype == nil {
		return nil
	}
	if t := reflect.TypeFor[T](); t != m.etype {
		return fmt.Errorf("%w: copying %v with a buffer of %v", ErrInvalidArgument, t, m.etype)
	}
	return nil
}

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

// hasPointers reports whether values of t hold Go pointers (pointerFree's verdict,
// cached).
func hasPointers(t reflect.Type) bool { return checkArgType(t) != nil }

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
func hostPointer(p cudaraw.CUdeviceptr) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&p))
}
