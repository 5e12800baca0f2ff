package cuda

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/resource"
)

// A context's memory state, made at its first allocation: its pools, the streams the
// package queues on for it, the counts of its buffers, and what the context's
// destruction gives back. The events and fences it waits with are in
// memory_fence.go.

// memState is a context's memory machinery: the device's pool, the package's
// streams for the context, the pinned and unified pools with their caches, a pool of
// events and the counters.
type memState struct {
	cs    *ctxState
	total uint64 // device memory in bytes

	// defStream orders Alloc without a stream and the copies without a stream
	// argument; hostStream orders pinned and unified pool allocations, which are
	// waited for before the host touches them (so nothing else is queued there).
	defStream  *stream
	hostStream *stream

	mu        sync.Mutex
	devReady  atomic.Bool
	devPool   cudaraw.CUmemoryPool
	hostReady atomic.Bool
	pinned    hostKind
	unified   hostKind

	evMu    sync.Mutex
	events  []cudaraw.CUevent // blocking-sync events, for host waits
	hevents []cudaraw.CUevent // events without blocking sync, for hand-offs (faster to wait for on the device)
	hlast   atomic.Uint64     // one more such event, taken and given back without evMu

	// flags is the page of words that synchronous copies wait on (copyflag.go),
	// made at the first; flagsFailed: it could not be.
	flagMu      sync.Mutex
	flags       atomic.Pointer[flagPage]
	flagsFailed atomic.Bool

	// bounce is the idle bounce buffer of small pageable copies (bounce.go).
	bounce atomic.Pointer[bounceBuf]
	// bounceHeld: a bounce buffer has been kept (a copy that finds none idle
	// then allocates only its size).
	bounceHeld atomic.Bool

	// devCached is the bytes in the streams' device block caches; cacheStreams
	// lists the streams that may hold some (weakly: a dropped stream's destroy
	// flushes its cache).
	devCached    atomic.Int64
	cacheMu      sync.Mutex
	cacheStreams []weak.Pointer[stream]

	live      [numKinds]atomic.Int64
	liveBytes [numKinds]atomic.Int64
	sinceGC   atomic.Int64 // bytes allocated since the last pressure collection

	// owned is the memory of the live buffers of a context of NewContext (by the
	// buffers' addresses): pool memory belongs to the device, and would outlive
	// the context if its destruction did not free it.
	ownedMu sync.Mutex
	owned   map[uintptr]ownedMem
}

// releaseKinds labels the releases of the kinds in resource's reports (wrapped
// buffers register themselves, differently).
var releaseKinds = [numKinds]string{
	KindDevice:  "cuMemFreeAsync",
	KindPinned:  "pinned host memory",
	KindUnified: "unified memory",
}

// regOpts returns the registration options of a buffer of kind k whose allocating
// exported function is skip frames above the registering one, registered in place
// by at. An array, so that the caller's slice of it stays on its stack.
func (ms *memState) regOpts(k MemoryKind, skip int, at resource.Option) [4]resource.Option {
	return [4]resource.Option{resource.Kind(releaseKinds[k]), resource.WithContext(ms.cs.res()),
		resource.CallerSkip(skip), at}
}

// memContexts holds the contexts that have a memory state, for MemoryStatus; a
// context leaves it when destroyed.
var memContexts sync.Map // *ctxState → struct{}

// memory returns c's memory state, creating it (and the context's default stream)
// on first use.
func (c *ctxState) memory() (*memState, error) {
	if ms := c.mem.Load(); ms != nil {
		return ms, nil
	}
	return c.initMemory()
}

func (c *ctxState) initMemory() (*memState, error) {
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.exit()
	c.mu.Lock()
	defer c.mu.Unlock()
	if ms := c.mem.Load(); ms != nil {
		return ms, nil
	}
	ms := &memState{cs: c}
	ms.pinned = hostKind{ms: ms, kind: KindPinned}
	ms.unified = hostKind{ms: ms, kind: KindUnified}
	total, err := c.dev.TotalMemory()
	if err != nil {
		return nil, err
	}
	ms.total = total
	if ms.defStream, err = newStream(c, true, 0, false); err != nil {
		return nil, err
	}
	c.mem.Store(ms)
	memContexts.Store(c, struct{}{})
	return ms, nil
}

// initDevice raises the release threshold of the device's default pool so that
// freed memory stays in the pool for reuse instead of going back to the driver at
// every synchronization, as PyTorch and CuPy do.
func (ms *memState) initDevice() error {
	if ms.devReady.Load() {
		return nil
	}
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.devReady.Load() {
		return nil
	}
	c := ms.cs
	dev, err := c.dev.handle()
	if err != nil {
		return err
	}
	var pool cudaraw.CUmemoryPool
	if err := cudaraw.DeviceGetDefaultMemPoolIn(c.h, &pool, dev); err != nil {
		return fmt.Errorf("cuda: device %d memory pool: %w", int(c.dev), err)
	}
	threshold := uint64(math.MaxUint64)
	if err := cudaraw.MemPoolSetAttributeIn(c.h, pool, cudaraw.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, unsafe.Pointer(&threshold)); err != nil {
		return fmt.Errorf("cuda: device %d memory pool release threshold: %w", int(c.dev), err)
	}
	ms.devPool = pool
	ms.devReady.Store(true)
	return nil
}

// initHost creates the stream for pool allocations and the pinned and unified
// pools; where the driver cannot make a pool, that kind falls back to
// cuMemAllocHost or cuMemAllocManaged, whose blocks are cached for reuse.
func (ms *memState) initHost() error {
	if ms.hostReady.Load() {
		return nil
	}
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.hostReady.Load() {
		return nil
	}
	c := ms.cs
	s, err := newStream(c, true, 0, false)
	if err != nil {
		return err
	}
	ms.hostStream = s
	threshold := uint64(math.MaxUint64)

	pinned := cudaraw.CUmemPoolProps{AllocType: cudaraw.CU_MEM_ALLOCATION_TYPE_PINNED, Location: cudaraw.CUmemLocation{Type: cudaraw.CU_MEM_LOCATION_TYPE_HOST}}
	ms.pinned.pool, ms.pinned.poolErr = ms.createPool(&pinned, &threshold, !testNoHostPools)
	if ms.pinned.pool != 0 {
		// A host pool's memory is accessible from the host only until the device
		// is given access: copies and kernels need it.
		access := cudaraw.CUmemAccessDesc{Location: cudaraw.CUmemLocation{Type: cudaraw.CU_MEM_LOCATION_TYPE_DEVICE, Id: int32(c.dev)}, Flags: cudaraw.CU_MEM_ACCESS_FLAGS_PROT_READWRITE}
		if err := cudaraw.MemPoolSetAccessIn(c.h, ms.pinned.pool, &access, 1); err != nil {
			ms.pinned.poolErr = fmt.Errorf("cuda: giving the device access to the pinned pool: %w", err)
			_ = cudaraw.MemPoolDestroyIn(c.h, ms.pinned.pool)
			ms.pinned.pool = 0
		}
	}
	unified := cudaraw.CUmemPoolProps{AllocType: cudaraw.CU_MEM_ALLOCATION_TYPE_MANAGED, Location: cudaraw.CUmemLocation{Type: cudaraw.CU_MEM_LOCATION_TYPE_DEVICE, Id: int32(c.dev)}}
	ms.unified.pool, ms.unified.poolErr = ms.createPool(&unified, &threshold, !testNoHostPools)
	ms.hostReady.Store(true)
	return nil
}

// testNoHostPools makes new contexts use the fallbacks (tests).
var testNoHostPools bool

func (ms *memState) createPool(props *cudaraw.CUmemPoolProps, threshold *uint64, enabled bool) (cudaraw.CUmemoryPool, error) {
	if !enabled {
		return 0, fmt.Errorf("cuda: memory pools disabled: %w", cudaraw.ErrNotSupported)
	}
	c := ms.cs
	var pool cudaraw.CUmemoryPool
	if err := cudaraw.MemPoolCreateIn(c.h, &pool, props); err != nil {
		return 0, fmt.Errorf("cuda: creating a %v memory pool: %w", props.AllocType, err)
	}
	if err := cudaraw.MemPoolSetAttributeIn(c.h, pool, cudaraw.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, unsafe.Pointer(threshold)); err != nil {
		_ = cudaraw.MemPoolDestroyIn(c.h, pool)
		return 0, fmt.Errorf("cuda: setting a memory pool's release threshold: %w", err)
	}
	return pool, nil
}

// syncStreamFor picks the stream for an operation that has no stream argument: the
// stream of m's only use if it is still in the generation of that use (the
// operation then waits for nothing else), else the context's default stream.
func (ms *memState) syncStreamFor(m *memBase) *stream {
	a := &m.owner().acc
	if s := a.only.Load(); s != nil && !streamClosed(s) && s.gen.Load() == a.onlyTag.Load()>>1 {
		return s
	}
	return ms.defStream
}

// reclaimForOOM makes room after an allocation failed for lack of memory: it hands
// the caches' blocks back, runs resource.Reclaim (garbage buffers are freed), waits
// for the context's work so that the frees have happened before the retry, and
// returns the pools' unused memory to the driver (another pool, or an allocator
// outside them, may be the one that needs it).
func (ms *memState) reclaimForOOM() {
	oomReclaims.Add(1)
	ms.flushDeviceCaches()
	if ms.hostReady.Load() {
		ms.pinned.flush()
		ms.unified.flush()
	}
	_, _ = resource.Reclaim()
	_ = cudaraw.CtxSynchronizeIn(ms.cs.h)
	ms.trim()
}

// teardown gives back what the package holds for a context about to be destroyed
// (its caller shut the context's hold): the cached blocks, then the pools it made.
// Pools belong to the device, not the context: destroying the context would leave
// them behind.
//
// Buffers still open are freed here too: their releases find the context gone and
// call no driver. Each buffer's work is complete by then (cuCtxSynchronize), so the
// frees need no ordering.
func (ms *memState) teardown() {
	c := ms.cs
	ms.ownedMu.Lock()
	owned := ms.owned
	ms.owned = nil
	ms.ownedMu.Unlock()
	_ = cudaraw.CtxSynchronizeIn(c.h)
	ms.flushDeviceCaches()
	if len(owned) > 0 {
		if d, err := c.disposalStream(); err == nil {
			for _, o := range owned {
				switch {
				case o.blk == nil: // device memory
					_ = cudaraw.MemFreeAsyncIn(c.h, o.ptr, d.h)
				case o.blk.raw != nil: // the fallback allocators
					_ = o.blk.raw.release()
					o.blk.raw.reg.Cancel()
				default: // a pinned or unified pool
					_ = cudaraw.MemFreeAsyncIn(c.h, o.ptr, d.h)
				}
			}
		}
	}
	if ms.hostReady.Load() {
		ms.pinned.flush()
		ms.unified.flush()
	}
	_ = cudaraw.CtxSynchronizeIn(c.h)
	ms.freeFlags()
	if ms.devReady.Load() {
		// The device's pool keeps freed memory (release threshold): give back what
		// this context's buffers held.
		_ = cudaraw.MemPoolTrimToIn(c.h, ms.devPool, 0)
	}
	if ms.hostReady.Load() {
		for _, k := range []*hostKind{&ms.pinned, &ms.unified} {
			if k.pool != 0 {
				_ = cudaraw.MemPoolDestroyIn(c.h, k.pool)
			}
		}
	}
}

// trim returns the memory the pools hold unused to the driver.
func (ms *memState) trim() {
	h := ms.cs.h
	if ms.devReady.Load() {
		_ = cudaraw.MemPoolTrimToIn(h, ms.devPool, 0)
	}
	// The device's graph memory pool: what graphs allocated and freed (theirs, not
	// ours: captures allocate outside the graph, libraries may not).
	if d, err := ms.cs.dev.handle(); err == nil {
		_ = cudaraw.DeviceGraphMemTrim(d)
	}
	if ms.hostReady.Load() {
		for _, k := range []*hostKind{&ms.pinned, &ms.unified} {
			if k.pool != 0 {
				_ = cudaraw.MemPoolTrimToIn(h, k.pool, 0)
			}
		}
	}
}

var oomReclaims atomic.Int64 // tests

// track counts a new buffer, profiles it, and applies memory pressure. The caller
// of the package's exported function is skip frames above track's caller.
// blk is the block of a pinned or unified buffer (nil for the other kinds).
func (ms *memState) track(m *memBase, blk *hostBlock, skip int) {
	ms.live[m.kind].Add(1)
	ms.liveBytes[m.kind].Add(int64(m.size))
	profileAdd(m, skip+1)
	if m.kind != KindWrapped {
		ms.pressure(m.size)
		if !ms.cs.primary {
			ms.own(m, blk)
		}
	}
}

// untrack undoes track when m is freed.
func (ms *memState) untrack(m *memBase) {
	ms.live[m.kind].Add(-1)
	ms.liveBytes[m.kind].Add(-int64(m.size))
	profileRemove(m)
	if m.kind != KindWrapped && !ms.cs.primary {
		ms.disown(m)
	}
}

// ownedMem is the memory of a live buffer of a context of NewContext, which the
// context's destruction frees if the buffer has not been freed by then.
type ownedMem struct {
	ptr cudaraw.CUdeviceptr
	blk *hostBlock // pinned and unified memory; nil for device memory
}

// own records m's memory; the key is m's address, which keeps nothing alive.
func (ms *memState) own(m *memBase, blk *hostBlock) {
	ms.ownedMu.Lock()
	if ms.owned == nil {
		ms.owned = make(map[uintptr]ownedMem)
	}
	ms.owned[uintptr(unsafe.Pointer(m))] = ownedMem{m.ptr, blk}
	ms.ownedMu.Unlock()
}

func (ms *memState) disown(m *memBase) {
	ms.ownedMu.Lock()
	delete(ms.owned, uintptr(unsafe.Pointer(m)))
	ms.ownedMu.Unlock()
}
