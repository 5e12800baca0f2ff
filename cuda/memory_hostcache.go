package cuda

import (
	"errors"
	"math/bits"
	"sync"
	"unsafe"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/resource"
)

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
	raw.reg = resource.ResourceFinalizer((*rawBlock).free, raw, true, resource.Kind(kind), resource.WithContext(c.res()))
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
