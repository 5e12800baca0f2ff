package cuda

import (
	"math/bits"
	"slices"
	"sync"
	"weak"

	"github.com/gocuda/gocuda/cuda/cudaraw"
)

// The device block cache
//
// A DeviceBuffer's block goes back, when the buffer is freed, to the cache of the
// stream it was allocated on (its home), and the next allocation of the same size
// class on that stream takes it back without calling the driver. Stream order makes
// that safe for the uses on the home stream; a use on another stream that is not
// known complete is fenced by an event recorded there at the free, and an
// allocation takes the block only once a query finds the event done: the GPU has
// finished with it, and nothing waits. So a producer that allocates on its stream
// gets back the blocks its consumers freed on theirs, and blocks that stay on one
// stream cost no event. cuMemAllocAsync and cuMemFreeAsync would give the same
// reuse through the device's pool, at the price of two driver calls (and two cgo
// crossings) per buffer (BenchmarkCrossStreamFree); PyTorch's and CuPy's
// allocators cache the same way, PyTorch's with events for the streams a block was
// used on (record_stream).
//
// Only small blocks are cached (up to devCacheMaxBlock), rounded up to size classes
// at most 25% apart so that a block serves nearby sizes. The cache is bounded per
// class, and per context by the limit Context.SetCacheLimit sets (shared with the pinned and
// unified caches, per kind). Cached blocks go back to the pool when their stream is
// closed, when an allocation runs out of memory (before resource.Reclaim), and when
// the cache is full; a buffer used on more than one stream besides its home, or
// whose home is closed, goes back to the pool (freeAsync).

const (
	devMinClass      = 512
	devSmallMax      = 2048    // classes of 512 bytes up to here
	devCacheMaxBlock = 1 << 20 // larger blocks are not cached
	devClassMax      = 32      // blocks kept per class and stream
	numDevClasses    = 4 + (20-11)*4
)

// devClass returns the size allocated for a request of n bytes and its class index,
// or -1 when blocks of that size are not cached.
func devClass(n int) (size, class int) {
	switch {
	case n <= devSmallMax:
		size = (n + devMinClass - 1) &^ (devMinClass - 1)
		return size, size/devMinClass - 1
	case n <= devCacheMaxBlock:
		// 2^(p-1) < n ≤ 2^p: four classes, 2^(p-3) apart.
		p := bits.Len(uint(n - 1))
		step := 1 << (p - 3)
		size = (n + step - 1) &^ (step - 1)
		return size, 4 + (p-12)*4 + size/step - 5
	}
	return n, -1
}

// devCache is a stream's cache of freed device blocks.
type devCache struct {
	mu     sync.Mutex
	bins   [numDevClasses][]cachedBlock
	blocks int
	known  bool // the stream is in its memState's list
}

// cachedBlock is a block in a stream's cache, with the fence of its last use on
// another stream (done when it has none).
type cachedBlock struct {
	p cudaraw.CUdeviceptr
	f fence
}

// takeBlock returns a cached block of the class whose fence is done, or 0: the
// newest (its fence polled if it has one), else the oldest, whose fence is the
// likeliest to be done. The caller holds the stream's read lock.
func (s *stream) takeBlock(ms *memState, class int) cudaraw.CUdeviceptr {
	c := &s.cache
	c.mu.Lock()
	bin := c.bins[class]
	i := len(bin) - 1
	if i >= 0 && !bin[i].f.poll(ms) {
		if i = 0; len(bin) == 1 || !bin[0].f.poll(ms) {
			i = -1
		}
	}
	if i < 0 {
		c.mu.Unlock()
		return 0
	}
	p := bin[i].p
	c.bins[class] = slices.Delete(bin, i, i+1)
	c.blocks--
	c.mu.Unlock()
	ms.devCached.Add(-int64(devClassSize(class)))
	return p
}

// devClassSize returns the size of a class's blocks.
func devClassSize(class int) int {
	if class < 4 {
		return (class + 1) * devMinClass
	}
	p := (class-4)/4 + 12
	step := 1 << (p - 3)
	return (class%4 + 5) * step
}

// release keeps the block p of the class, freed after uses, in the cache of s, the
// stream it was allocated on, and reports whether it did. Work on s is ordered
// after s's own uses; the use on another stream, unless known complete or its
// stream idle, is fenced (an event recorded on it). With more than one such
// stream, or one being captured into a graph, the block is not kept. The caller
// has entered the context.
func (s *stream) release(ms *memState, p cudaraw.CUdeviceptr, class, size int, uses []use) bool {
	var other use
	for _, u := range uses {
		if u.s == s || u.complete() {
			continue
		}
		if other.s != nil || u.s.capture.Load() != nil {
			return false
		}
		other = u
	}
	// Reserve the room first: a fence recorded for a full cache would be wasted.
	if ms.devCached.Add(int64(size)) > ms.cs.limits.cache.Load() {
		ms.devCached.Add(-int64(size))
		return false
	}
	f := fence{done: true}
	if other.s != nil && !other.s.idle() {
		var err error
		if f, err = ms.fenceAfter(other); err != nil {
			ms.devCached.Add(-int64(size))
			return false
		}
	}
	c := &s.cache
	s.mu.RLock()
	c.mu.Lock()
	if s.closed.Load() || len(c.bins[class]) >= devClassMax {
		c.mu.Unlock()
		s.mu.RUnlock()
		f.clear(ms)
		ms.devCached.Add(-int64(size))
		return false
	}
	c.bins[class] = append(c.bins[class], cachedBlock{p, f})
	c.blocks++
	known := c.known
	c.known = true
	c.mu.Unlock()
	s.mu.RUnlock()
	if !known {
		ms.cacheMu.Lock()
		ms.cacheStreams = append(ms.cacheStreams, weak.Make(s))
		ms.cacheMu.Unlock()
	}
	return true
}

// idle reports whether the work queued on the stream has finished (a query that
// waits for nothing); false for a closed stream, or when the query fails.
func (s *stream) idle() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return false
	}
	done, err := ready(cudaraw.StreamQueryIn(s.cs.h, s.h))
	return done && err == nil
}

// flushCache frees the stream's cached blocks on the stream (cuMemFreeAsync, which
// does not wait), each after its fence, and reports whether the stream was on its
// memState's list, which it is no longer taken to be. The caller holds the
// stream's lock (write, or read with the stream open). A block whose free (or
// fence's wait) fails stays with the pool until its context goes.
func (s *stream) flushCache(ms *memState) (known bool) {
	c := &s.cache
	c.mu.Lock()
	bins := c.bins
	c.bins = [numDevClasses][]cachedBlock{}
	c.blocks = 0
	known = c.known
	c.known = false
	c.mu.Unlock()
	for class, bin := range bins {
		size := devClassSize(class)
		for _, b := range bin {
			if b.f.orderOn(ms, s.h) == nil {
				_ = cudaraw.MemFreeAsyncIn(s.cs.h, b.p, s.h)
			}
			b.f.clear(ms)
			ms.devCached.Add(-int64(size))
		}
	}
	return known
}

// dropCache flushes the cache of a stream being destroyed (the caller holds its
// write lock) and takes it off its memState's list.
func (s *stream) dropCache() {
	s.cache.mu.Lock()
	empty := s.cache.blocks == 0 && !s.cache.known
	s.cache.mu.Unlock()
	if empty {
		return
	}
	ms := s.cs.mem.Load()
	if ms == nil {
		return
	}
	if !s.flushCache(ms) {
		return
	}
	w := weak.Make(s)
	ms.cacheMu.Lock()
	for i, x := range ms.cacheStreams {
		if x == w {
			last := len(ms.cacheStreams) - 1
			ms.cacheStreams[i] = ms.cacheStreams[last]
			ms.cacheStreams[last] = weak.Pointer[stream]{}
			ms.cacheStreams = ms.cacheStreams[:last]
			break
		}
	}
	ms.cacheMu.Unlock()
}

// cachedBlocks returns the blocks in the stream's cache.
func (s *stream) cachedBlocks() int {
	s.cache.mu.Lock()
	defer s.cache.mu.Unlock()
	return s.cache.blocks
}

// flushDeviceCaches gives every stream's cached blocks back to the pool.
func (ms *memState) flushDeviceCaches() {
	ms.cacheMu.Lock()
	list := ms.cacheStreams
	ms.cacheStreams = nil
	ms.cacheMu.Unlock()
	for _, w := range list {
		s := w.Value()
		if s == nil {
			continue // collected: its destroy flushes it
		}
		s.mu.RLock()
		if !s.closed.Load() {
			s.flushCache(ms)
		}
		s.mu.RUnlock()
	}
}

// deviceCacheStats returns the bytes and blocks in the context's device caches.
func (ms *memState) deviceCacheStats() (int64, int) {
	ms.cacheMu.Lock()
	list := append([]weak.Pointer[stream](nil), ms.cacheStreams...)
	ms.cacheMu.Unlock()
	blocks := 0
	for _, w := range list {
		if s := w.Value(); s != nil {
			blocks += s.cachedBlocks()
		}
	}
	return ms.devCached.Load(), blocks
}
