// Package idlecache keeps the idle handles of the library packages (cuBLAS and
// cuSPARSE handles, cuRAND generators, cuFFT plans) for reuse: a bounded LIFO list per
// key, bounded per group of keys (a context), emptied at every resource.Reclaim
// (and so when the device runs out of memory). It never calls CUDA: a handle it
// does not keep is dropped, and its owner's release (package resource) destroys it.
package idlecache

import (
	"sync"

	"github.com/gocuda/gocuda/internal/reclaimhook"
)

// Cache is the idle handles H by key K, at most max per group (group(k) names a
// key's group; nil: each key is its own group).
type Cache[K comparable, G comparable, H any] struct {
	max      int
	group    func(K) G
	maxBytes int64         // 0: no bound
	size     func(H) int64 // the bytes an idle handle holds (with maxBytes)

	mu    sync.Mutex
	idle  map[K][]H
	n     map[G]int
	bytes map[G]int64
}

// New returns a cache that keeps at most max idle handles per group, emptied at
// every resource.Reclaim.
func New[K comparable, G comparable, H any](max int, group func(K) G) *Cache[K, G, H] {
	c := &Cache[K, G, H]{max: max, group: group}
	reclaimhook.Register(c.Drop)
	return c
}

// LimitBytes bounds the bytes of device memory the idle handles of a group hold
// (size tells a handle's), besides their count, and returns c.
func (c *Cache[K, G, H]) LimitBytes(maxBytes int64, size func(H) int64) *Cache[K, G, H] {
	c.maxBytes, c.size = maxBytes, size
	return c
}

// Take returns an idle handle of k, if there is one.
func (c *Cache[K, G, H]) Take(k K) (H, bool) {
	return c.TakePrefer(k, func(H) bool { return true })
}

// TakePrefer returns the most recently kept idle handle of k for which prefer
// reports true, or else the most recent one, if there is one.
func (c *Cache[K, G, H]) TakePrefer(k K, prefer func(H) bool) (H, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	list := c.idle[k]
	if len(list) == 0 {
		var zero H
		return zero, false
	}
	i := len(list) - 1
	for j := i; j >= 0; j-- {
		if prefer(list[j]) {
			i = j
			break
		}
	}
	h := list[i]
	copy(list[i:], list[i+1:])
	var zero H
	list[len(list)-1] = zero
	c.idle[k] = list[:len(list)-1]
	g := c.group(k)
	c.n[g]--
	if c.size != nil {
		c.bytes[g] -= c.size(h)
	}
	return h, true
}

// Put keeps h as an idle handle of k and reports whether it did (false: the group
// is full, in count or bytes, and h is the caller's to drop).
func (c *Cache[K, G, H]) Put(k K, h H) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.idle == nil {
		c.idle, c.n, c.bytes = make(map[K][]H), make(map[G]int), make(map[G]int64)
	}
	g := c.group(k)
	if c.n[g] >= c.max {
		return false
	}
	if c.size != nil {
		b := c.size(h)
		if c.bytes[g]+b > c.maxBytes {
			return false
		}
		c.bytes[g] += b
	}
	c.idle[k] = append(c.idle[k], h)
	c.n[g]++
	return true
}

// Idle returns the number of idle handles of group g.
func (c *Cache[K, G, H]) Idle(g G) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[g]
}

// Drop forgets every idle handle.
func (c *Cache[K, G, H]) Drop() {
	c.mu.Lock()
	c.idle, c.n, c.bytes = nil, nil, nil
	c.mu.Unlock()
}
