// Package idlecache keeps the idle handles of cudalib's pools (the library packages'
// handles, cuFFT plans, cuRAND generators) for reuse: a bounded LIFO list per key,
// bounded per group of keys (a context), emptied at every resource.Reclaim (and so
// when the device runs out of memory) and a group at a time by DropGroup (a
// destroyed context). It never calls CUDA: a handle it does not keep is dropped, and
// its owner's release (package resource) destroys it.
package idlecache

import (
	"sync"

	"github.com/gocuda/gocuda/internal/rescore"
)

// Cache is the idle handles H by key K, at most max per group (group(k) names a
// key's group).
type Cache[K comparable, G comparable, H any] struct {
	max      int
	group    func(K) G
	maxBytes int64         // 0: no bound
	size     func(H) int64 // the bytes an idle handle holds (with maxBytes)

	mu   sync.Mutex
	idle map[K]*list[G, H] // made once per key: the hot path only looks up
}

// list is the idle handles of one key and the counts of its group.
type list[G comparable, H any] struct {
	handles []H
	g       *groupCount
}

// groupCount is the number and bytes of a group's idle handles.
type groupCount struct {
	n     int
	bytes int64
}

// New returns a cache that keeps at most max idle handles per group, emptied at
// every resource.Reclaim.
func New[K comparable, G comparable, H any](max int, group func(K) G) *Cache[K, G, H] {
	c := &Cache[K, G, H]{max: max, group: group}
	rescore.OnReclaim(c.Drop)
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
	var zero H
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.idle[k]
	if l == nil || len(l.handles) == 0 {
		return zero, false
	}
	hs := l.handles
	i := len(hs) - 1
	for j := i; j >= 0; j-- {
		if prefer(hs[j]) {
			i = j
			break
		}
	}
	h := hs[i]
	copy(hs[i:], hs[i+1:])
	hs[len(hs)-1] = zero
	l.handles = hs[:len(hs)-1]
	l.g.n--
	if c.size != nil {
		l.g.bytes -= c.size(h)
	}
	return h, true
}

// Put keeps h as an idle handle of k and reports whether it did (false: the group
// is full, in count or bytes, and h is the caller's to drop).
func (c *Cache[K, G, H]) Put(k K, h H) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.idle[k]
	if l == nil {
		l = c.newList(k)
	}
	if l.g.n >= c.max {
		return false
	}
	if c.size != nil {
		b := c.size(h)
		if l.g.bytes+b > c.maxBytes {
			return false
		}
		l.g.bytes += b
	}
	l.handles = append(l.handles, h)
	l.g.n++
	return true
}

// newList makes k's list, sharing its group's counts with the group's other keys.
func (c *Cache[K, G, H]) newList(k K) *list[G, H] {
	if c.idle == nil {
		c.idle = make(map[K]*list[G, H])
	}
	g := c.groupOf(k)
	l := &list[G, H]{g: g}
	c.idle[k] = l
	return l
}

// groupOf returns the counts of k's group (a new one if no key of it has a list).
func (c *Cache[K, G, H]) groupOf(k K) *groupCount {
	gk := c.group(k)
	for k2, l := range c.idle {
		if c.group(k2) == gk {
			return l.g
		}
	}
	return new(groupCount)
}

// Idle returns the number of idle handles of group g.
func (c *Cache[K, G, H]) Idle(g G) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, l := range c.idle {
		if c.group(k) == g {
			return l.g.n
		}
	}
	return 0
}

// Drop forgets every idle handle.
func (c *Cache[K, G, H]) Drop() {
	c.mu.Lock()
	c.idle = nil
	c.mu.Unlock()
}

// DropGroup forgets every idle handle of group g.
func (c *Cache[K, G, H]) DropGroup(g G) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.idle {
		if c.group(k) == g {
			delete(c.idle, k)
		}
	}
}
