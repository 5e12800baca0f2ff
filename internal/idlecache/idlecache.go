// Package idlecache keeps the idle handles of the library packages (cuBLAS and
// cuSPARSE handles, cuRAND generators, cuFFT plans) for reuse: a bounded LIFO list per
// key, bounded per group of keys (a context), emptied when the device runs out of
// memory. It never calls CUDA: a handle it does not keep is dropped, and its owner's
// release (package resource) destroys it.
package idlecache

import (
	"sync"

	"github.com/gocuda/gocuda/internal/oom"
)

// Cache is the idle handles H by key K, at most max per group (group(k) names a
// key's group; nil: each key is its own group).
type Cache[K comparable, G comparable, H any] struct {
	max   int
	group func(K) G

	mu   sync.Mutex
	idle map[K][]H
	n    map[G]int
}

// New returns a cache that keeps at most max idle handles per group, emptied at
// every out-of-memory reclaim.
func New[K comparable, G comparable, H any](max int, group func(K) G) *Cache[K, G, H] {
	c := &Cache[K, G, H]{max: max, group: group}
	oom.Register(c.Drop)
	return c
}

// Take returns an idle handle of k, if there is one.
func (c *Cache[K, G, H]) Take(k K) (H, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	list := c.idle[k]
	if len(list) == 0 {
		var zero H
		return zero, false
	}
	h := list[len(list)-1]
	var zero H
	list[len(list)-1] = zero
	c.idle[k] = list[:len(list)-1]
	c.n[c.group(k)]--
	return h, true
}

// Put keeps h as an idle handle of k and reports whether it did (false: the group
// is full, and h is the caller's to drop).
func (c *Cache[K, G, H]) Put(k K, h H) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.idle == nil {
		c.idle, c.n = make(map[K][]H), make(map[G]int)
	}
	g := c.group(k)
	if c.n[g] >= c.max {
		return false
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
	c.idle, c.n = nil, nil
	c.mu.Unlock()
}
