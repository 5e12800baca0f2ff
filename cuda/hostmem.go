package cuda

import (
	"errors"
	"math/bits"
	"reflect"
	"sync"
	"unsafe"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/resource"
)

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
	resource.ResourceFinalizerAt(&b.m.regv, (*HostBuffer).free, b, finalizeHost, false, ms.regOpts(KindPinned, 1)...)
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
	resource.ResourceFinalizerAt(&b.m.regv, (*ManagedBuffer).free, b, finalizeManaged, false, ms.regOpts(KindUnified, 1)...)
	ms.track(&b.m, b.blk, 1)
	return b, nil
}

// finalizeHost and finalizeManaged are the buffers' finalizers: they queue the
// release.
func finalizeHost(b *HostBuffer)       { resource.Finalized(&b.m.regv, b) }
func finalizeManaged(b *ManagedBuffer) { resource.Finalized(&b.m.regv, b) }

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
// the device. As DeviceBuffer.Ptr, it orders nothing (see UseOn and ForeignPtr).
func (b *HostBuffer) Ptr() cudaraw.CUdeviceptr { return b.base().ptrChecked() }

// Ptr returns the memory's address, the same on the host and the device. As
// DeviceBuffer.Ptr, it orders nothing (see UseOn and ForeignPtr).
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

// Close releases the memory: it is reused once the GPU work queued so far on the
// stream that last used it has finished. It does not wait. Slices obtained from the
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

// Cache of freed pinned and unified blocks, per context and kind. Blocks come in
// size classes (powers of two up to 1 MiB, then multiples of 1 MiB up to 64 MiB;
// larger blocks are not cached). A freed block enters the cache with a fence for the
// GPU work that last used it and is handed out again only once that fence has
// passed, which is checked with an event query, never waited for.
const (
	hostMinClass      = 512
	hostPow2Max       = 1 << 20
	hostCacheMaxBlock = 64 << 20
	hostCacheProbe    = 4 // cached blocks examined per allocation
)

// hostClass returns the size allocated for a request of n bytes, and whether blocks
// of that size are cached.
func hostClass(n int) (int, bool) {
	switch {
	case n <= hostMinClass:
		return hostMinClass, true
	case n <= hostPow2Max:
		return 1 << bits.Len(uint(n-1)), true
	case n <= hostCacheMaxBlock:
		return (n + hostPow2Max - 1) &^ (hostPow2Max - 1), true
	}
	return n, false
}

// hostKind is one kind of host-visible memory (pinned or unified) of a context: its
// pool, or the fallback, and the cache.
type hostKind struct {
	ms      *memState
	kind    MemoryKind
	pool    cudaraw.CUmemoryPool // 0: fallback allocator
	poolErr error                // why there is no pool

	mu     sync.Mutex
	free   map[int][]*hostBlock
	cached int64 // bytes in free
	blocks int   // blocks in free
}

// hostBlock is a block of a hostKind.
type hostBlock struct {
	ptr  cudaraw.CUdeviceptr
	size int       // the allocated size (a class)
	raw  *rawBlock // fallback: the owner of the memory
	f    fence     // while cached: the work that last used it
}

// rawBlock owns memory of the fallback allocators, whose free functions wait for the
// GPU: dropped, it is freed in resource.Reclaim, never on the way of the program.
type rawBlock struct {
	cs   *ctxState
	ptr  cudaraw.CUdeviceptr
	kind MemoryKind
	reg  *resource.Registration
}

func (r *rawBlock) free() error {
	if r.cs.enter() != nil {
		return resource.ErrContextDestroyed // freed with its context
	}
	defer r.cs.exit()
	return r.release()
}

// release frees the memory; the caller is in the context, or is destroying it.
func (r *rawBlock) release() error {
	if r.kind == KindPinned {
		return cudaraw.MemFreeHostIn(r.cs.h, hostPointer(r.ptr))
	}
	return cudaraw.MemFreeIn(r.cs.h, r.ptr)
}

// get returns a block of at least bytes: a cached one whose last use has finished,
// or a new one (after reclaiming once on out-of-memory).
func (k *hostKind) get(bytes int) (*hostBlock, error) {
	class, cacheable := hostClass(bytes)
	if cacheable {
		if blk := k.take(class); blk != nil {
			return blk, nil
		}
	}
	blk, err := k.alloc(class)
	if errors.Is(err, cudaraw.ErrOutOfMemory) {
		k.ms.reclaimForOOM()
		blk, err = k.alloc(class)
	}
	if err != nil {
		return nil, allocError(bytes, err)
	}
	return blk, nil
}

// take removes and returns a cached block of the class whose fence has passed.
func (k *hostKind) take(class int) *hostBlock {
	k.mu.Lock()
	defer k.mu.Unlock()
	list := k.free[class]
	for i, probes := len(list)-1, 0; i >= 0 && probes < hostCacheProbe; i, probes = i-1, probes+1 {
		blk := list[i]
		if !blk.f.poll(k.ms) {
			continue
		}
		copy(list[i:], list[i+1:])
		list[len(list)-1] = nil
		k.free[class] = list[:len(list)-1]
		k.cached -= int64(blk.size)
		k.blocks--
		return blk
	}
	return nil
}

// alloc allocates a new block from the pool (then waits for the allocation, so the
// host may touch it) or from the fallback allocator.
func (k *hostKind) alloc(size int) (*hostBlock, error) {
	ms := k.ms
	c := ms.cs
	if k.pool != 0 {
		var p cudaraw.CUdeviceptr
		err := ms.hostStream.use(func(h cudaraw.CUstream) error {
			return cudaraw.MemAllocFromPoolAsyncIn(c.h, &p, uint64(size), k.pool, h)
		})
		if err != nil {
			return nil, err
		}
		if err := ms.syncInternal(ms.hostStream); err != nil {
			return nil, err
		}
		addHostRange(uintptr(p), size)
		return &hostBlock{ptr: p, size: size, f: fence{done: true}}, nil
	}
	var p cudaraw.CUdeviceptr
	var kind string
	if k.kind == KindPinned {
		var hp unsafe.Pointer
		if err := cudaraw.MemAllocHostIn(c.h, &hp, uint64(size)); err != nil {
			return nil, err
		}
		p = cudaraw.CUdeviceptr(uintptr(hp))
		kind = "cuMemFreeHost"
	} else {
		if err := cudaraw.MemAllocManagedIn(c.h, &p, uint64(size), uint32(cudaraw.CU_MEM_ATTACH_GLOBAL)); err != nil {
			return nil, err
		}
		kind = "cuMemFree"
	}
	addHostRange(uintptr(p), size)
	raw := &rawBlock{cs: c, ptr: p, kind: k.kind}
	raw.reg = resource.ResourceFinalizerErr((*rawBlock).free, raw, true, resource.Kind(kind), resource.WithContext(c.res()))
	return &hostBlock{ptr: p, size: size, raw: raw, f: fence{done: true}}, nil
}

// accepts reports whether the cache would take a block of size now.
func (k *hostKind) accepts(size int) bool {
	if _, ok := hostClass(size); !ok {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.cached+int64(size) <= k.ms.cs.limits.cache.Load()
}

// push puts a fenced block in the cache, if it still fits.
func (k *hostKind) push(blk *hostBlock) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cached+int64(blk.size) > k.ms.cs.limits.cache.Load() {
		return false
	}
	if k.free == nil {
		k.free = make(map[int][]*hostBlock)
	}
	k.free[blk.size] = append(k.free[blk.size], blk)
	k.cached += int64(blk.size)
	k.blocks++
	return true
}

// put takes back a block with the given uses: into the cache if it has room, else
// back to the pool, ordered after those uses.
func (k *hostKind) put(blk *hostBlock, uses []use) error {
	if blk == nil {
		return nil
	}
	ms := k.ms
	if k.accepts(blk.size) {
		var d deps
		usesOf(uses, &d)
		f, err := ms.fenceFor(&d)
		if err == nil {
			blk.f = f
			if k.push(blk) {
				return nil
			}
			blk.f.clear(ms)
		}
	}
	return k.release(blk, uses)
}

// release gives a block back for good: to its pool, after its uses, or (the
// fallback) to resource.Reclaim by dropping its owner.
func (k *hostKind) release(blk *hostBlock, uses []use) error {
	removeHostRange(uintptr(blk.ptr))
	if k.pool != 0 {
		return k.ms.freeAsync(blk.ptr, uses, k.ms.hostStream)
	}
	blk.raw = nil
	return nil
}

// flush empties the cache, giving every block back after its fence. It runs when an
// allocation found no memory; a block whose free fails (its context is being torn
// down) is left to the driver.
func (k *hostKind) flush() {
	k.mu.Lock()
	all := k.free
	k.free = nil
	k.cached, k.blocks = 0, 0
	k.mu.Unlock()
	ms := k.ms
	var d *stream
	for _, list := range all {
		for _, blk := range list {
			removeHostRange(uintptr(blk.ptr))
			if k.pool != 0 {
				if d == nil {
					var err error
					if d, err = ms.cs.disposalStream(); err != nil {
						return
					}
				}
				_ = d.use(func(h cudaraw.CUstream) error {
					if err := blk.f.orderOn(ms, h); err != nil {
						return err
					}
					return cudaraw.MemFreeAsyncIn(ms.cs.h, blk.ptr, h)
				})
			}
			blk.f.clear(ms)
			blk.raw = nil
		}
	}
}

// cacheStats returns the bytes and blocks in the cache.
func (k *hostKind) cacheStats() (int64, int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.cached, k.blocks
}
