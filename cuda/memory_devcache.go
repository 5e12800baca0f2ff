package cuda

import (
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"math/bits"
	"sync"
	"weak"
)

// The device block cache
//
// A DeviceBuffer closed on the stream that last used it leaves its block in that
// stream's cache, and the next allocation of the same size class on the stream takes
// it back without calling the driver. Stream order makes that safe with no event:
// work queued on the stream after the allocation runs after the work that used the
// block before. cuMemAllocAsync and cuMemFreeAsync would give the same reuse through
// the device's pool, at the price of two driver calls (and two cgo crossings) per
// buffer; PyTorch's and CuPy's allocators cache the same way.
//
// Only small blocks are cached (up to devCacheMaxBlock), rounded up to size classes
// at most 25% apart so that a block serves nearby sizes. The cache is bounded per
// class, and per context by the limit Context.SetCacheLimit sets (shared with the pinned and
// unified caches, per kind). Cached blocks go back to the pool when their stream is
// closed, when an allocation runs out of memory (before resource.Reclaim), and when
// the cache is full.

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
	bins   [numDevClasses][]cudaraw.CUdeviceptr
	blocks int
	known  bool // the stream is in its memState's list
}

// takeBlock returns a cached block of the class, or 0. The caller holds the stream's
// read lock.
func (s *stream) takeBlock(ms *memState, class int) cudaraw.CUdeviceptr {
	c := &s.cache
	c.mu.Lock()
	bin := c.bins[class]
	if len(bin) == 0 {
		c.mu.Unlock()
		return 0
	}
	p := bin[len(bin)-1]
	c.bins[class] = bin[:len(bin)-1]
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

// putBlock keeps p, a block of the class, in the stream's cache and reports whether
// it did. The caller holds the stream's read lock and has checked that the stream is
// open.
func (s *stream) putBlock(ms *memState, p cudaraw.CUdeviceptr, class, size int) bool {
	if ms.devCached.Add(int64(size)) > ms.cs.limits.cache.Load() {
		ms.devCached.Add(-int64(size))
		return false
	}
	c := &s.cache
	c.mu.Lock()
	if len(c.bins[class]) >= devClassMax {
		c.mu.Unlock()
		ms.devCached.Add(-int64(size))
		return false
	}
	c.bins[class] = append(c.bins[class], p)
	c.blocks++
	known := c.known
	c.known = true
	c.mu.Unlock()
	if !known {
		ms.cacheMu.Lock()
		ms.cacheStreams = append(ms.cacheStreams, weak.Make(s))
		ms.cacheMu.Unlock()
	}
	return true
}

// flushCache frees the stream's cached blocks on the stream (cuMemFreeAsync, which
// does not wait) and reports whether the stream was on its memState's list, which
// it is no longer taken to be. The caller holds the stream's lock (write, or read
// with the stream open). A block whose free fails stays with the pool until its
// context goes.
func (s *stream) flushCache(ms *memState) (known bool) {
	c := &s.cache
	c.mu.Lock()
	bins := c.bins
	c.bins = [numDevClasses][]cudaraw.CUdeviceptr{}
	c.blocks = 0
	known = c.known
	c.known = false
	c.mu.Unlock()
	for class, bin := range bins {
		size := devClassSize(class)
		for _, p := range bin {
			_ = cudaraw.MemFreeAsyncIn(s.cs.h, p, s.h)
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
