package cuda

import (
	"reflect"
	"unsafe"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/resource"
)

// Host-visible memory: HostBuffer (pinned) and ManagedBuffer (unified), one
// implementation for both (hostMem), allocated through the cache of freed blocks in
// memory_hostcache.go.

// HostBuffer is page-locked (pinned) host memory: the GPU copies to and from it at
// full speed and asynchronously, and kernels can read it directly. It comes from a
// stream-ordered host memory pool (CUDA 12.6 and later drivers; cuMemAllocHost
// elsewhere), through a small cache of freed blocks that makes allocation cost
// about as much as a Go allocation. Bytes and HostSlice expose it to Go.
//
// The memory is not Go memory: the slices stay valid until Close, or until the
// HostBuffer becomes unreachable, whichever comes first, so keep the HostBuffer
// reachable (runtime.KeepAlive) while its slices are used. Never store Go pointers in
// it.
//
// A HostBuffer is safe for concurrent use, its contents are not synchronized.
// Operations hold it until their work is queued: Close waits for them, never for the
// GPU, and operations after Close fail with ErrClosed.
type HostBuffer struct {
	hostMem
}

// ManagedBuffer is unified (managed) memory: one address that both the host and the
// GPU use, its pages migrating on demand. It comes from a managed memory pool (where
// the driver has none, from cuMemAllocManaged), through a cache of freed blocks, like
// HostBuffer. Bytes and HostSlice expose it to Go; Ptr is for kernels.
//
// As with HostBuffer, the slices are valid until Close or until the buffer becomes
// unreachable, and must not hold Go pointers. Do not touch the memory from the host
// while GPU work that uses it is running. Its concurrency contract is HostBuffer's.
type ManagedBuffer struct {
	hostMem
}

// hostMem is what a HostBuffer and a ManagedBuffer are made of: memory of a
// host-visible kind (pinned or unified) and its block, one implementation for both.
type hostMem struct {
	m   memBase
	blk *hostBlock
}

// AllocHost allocates bytes of pinned host memory for the context. The memory is
// ready for the host when AllocHost returns. A freed block is reused only once the
// GPU work that used it (copies and kernels the package saw) has finished, checked
// without waiting.
func (c *Context) AllocHost(bytes int) (*HostBuffer, error) {
	b := new(HostBuffer)
	ms, err := c.allocVisible(&b.hostMem, KindPinned, bytes)
	if err != nil {
		return nil, err
	}
	opts := ms.regOpts(KindPinned, 1, resource.At(&b.m.regv, finalizeHost))
	resource.ResourceFinalizer((*HostBuffer).free, b, false, opts[:]...)
	ms.track(&b.m, b.blk, 1)
	return b, nil
}

// AllocManaged allocates bytes of unified memory for the context, ready for the host
// when it returns.
func (c *Context) AllocManaged(bytes int) (*ManagedBuffer, error) {
	b := new(ManagedBuffer)
	ms, err := c.allocVisible(&b.hostMem, KindUnified, bytes)
	if err != nil {
		return nil, err
	}
	opts := ms.regOpts(KindUnified, 1, resource.At(&b.m.regv, finalizeManaged))
	resource.ResourceFinalizer((*ManagedBuffer).free, b, false, opts[:]...)
	ms.track(&b.m, b.blk, 1)
	return b, nil
}

// finalizeHost and finalizeManaged are the buffers' finalizers: they queue the
// release.
func finalizeHost(b *HostBuffer)       { b.m.regv.Finalized() }
func finalizeManaged(b *ManagedBuffer) { b.m.regv.Finalized() }

// allocVisible fills h with a block of bytes of the kind (pinned or unified) from
// the cache or the pool; the caller registers the release.
func (c *Context) allocVisible(h *hostMem, kind MemoryKind, bytes int) (*memState, error) {
	if err := checkSize(bytes); err != nil {
		return nil, err
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	ms, err := c.memory()
	if err != nil {
		return nil, err
	}
	resource.Drain()
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.exit()
	if err := ms.initHost(); err != nil {
		return nil, err
	}
	blk, err := ms.hostKindOf(kind).get(bytes)
	if err != nil {
		return nil, err
	}
	h.m = memBase{ctx: c, ms: ms, ptr: blk.ptr, size: bytes, elem: 1, kind: kind}
	h.blk = blk
	return ms, nil
}

// hostKindOf returns the pinned or the unified kind.
func (ms *memState) hostKindOf(kind MemoryKind) *hostKind {
	if kind == KindUnified {
		return &ms.unified
	}
	return &ms.pinned
}

// free is the release: the block goes back to the cache, or to its pool, after the
// GPU work that last used it.
func (h *hostMem) free() error {
	if h.m.postpone(h.free, false) {
		return nil
	}
	uses := h.m.retire()
	blk := h.blk
	h.blk = nil
	c := h.m.ctx
	if c.enter() != nil {
		return resource.ErrContextDestroyed // freed with its context
	}
	defer c.exit()
	return h.m.ms.hostKindOf(h.m.kind).put(blk, uses)
}

// The methods are the same for both kinds; each type has its own so that they work
// on a nil buffer.

func (b *HostBuffer) base() *memBase {
	if b == nil {
		return nil
	}
	return &b.m
}

func (b *ManagedBuffer) base() *memBase {
	if b == nil {
		return nil
	}
	return &b.m
}

// Ptr returns the memory's address, valid on the host and (unified addressing) on
// the device. As DeviceBuffer.Ptr, it orders nothing: raw work with it goes through
// Enqueue.
func (b *HostBuffer) Ptr() cudaraw.CUdeviceptr { return b.base().ptrChecked() }

// Ptr returns the memory's address, the same on the host and the device. As
// DeviceBuffer.Ptr, it orders nothing: raw work with it goes through Enqueue.
func (b *ManagedBuffer) Ptr() cudaraw.CUdeviceptr { return b.base().ptrChecked() }

// Size returns the buffer's size in bytes.
func (b *HostBuffer) Size() int { return b.base().sizeOrZero() }

// Size returns the buffer's size in bytes.
func (b *ManagedBuffer) Size() int { return b.base().sizeOrZero() }

// Len returns the buffer's length in bytes (its elements are bytes; HostSlice views
// them as other types).
func (b *HostBuffer) Len() int { return b.base().length() }

// Len returns the buffer's length in bytes (its elements are bytes; HostSlice views
// them as other types).
func (b *ManagedBuffer) Len() int { return b.base().length() }

// Context returns the buffer's context.
func (b *HostBuffer) Context() *Context { return b.base().context() }

// Context returns the buffer's context.
func (b *ManagedBuffer) Context() *Context { return b.base().context() }

// Bytes returns the memory as a byte slice of length Size; nil for a nil or closed
// buffer. It is valid while the buffer is open and reachable.
func (b *HostBuffer) Bytes() []byte { return hostBytes(b.base()) }

// Bytes returns the memory as a byte slice of length Size; nil for a nil or closed
// buffer. It is valid while the buffer is open and reachable.
func (b *ManagedBuffer) Bytes() []byte { return hostBytes(b.base()) }

// Close releases the memory: it is reused once the GPU work queued so far on every
// stream that uses it has finished. It does not wait. Slices obtained from the
// buffer must not be used afterwards. Closing again, or closing a nil buffer,
// returns an error matching ErrClosed and resource.ErrReleased.
func (b *HostBuffer) Close() error { return b.base().close("cuda: pinned buffer") }

// Close releases the memory, as HostBuffer.Close does.
func (b *ManagedBuffer) Close() error { return b.base().close("cuda: unified buffer") }

// HostVisible is a buffer that the host reads and writes directly: a *HostBuffer
// or a *ManagedBuffer.
type HostVisible interface {
	*HostBuffer | *ManagedBuffer
	base() *memBase
}

// HostSlice returns b's memory (a *HostBuffer or *ManagedBuffer) as a []T of length
// b.Size()/sizeof(T), or nil if b is nil or closed, T holds Go pointers or the memory
// is not aligned for T. It is valid while b is open and reachable.
func HostSlice[T any, B HostVisible](b B) []T { return viewSlice[T](b.base()) }

func hostBytes(m *memBase) []byte {
	if m == nil || m.ctx == nil {
		return nil
	}
	if m.hold.closed() {
		return nil
	}
	return unsafe.Slice((*byte)(hostPointer(m.ptr)), m.size)
}

func viewSlice[T any](m *memBase) []T {
	elem, err := elemSize[T]()
	if err != nil {
		return nil
	}
	bs := hostBytes(m)
	if len(bs)/elem == 0 {
		return nil
	}
	// The alignment from the type: T may be too large to make a value of.
	if uintptr(unsafe.Pointer(&bs[0]))%uintptr(reflect.TypeFor[T]().Align()) != 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&bs[0])), len(bs)/elem)
}
