package idlecache

import (
	"testing"

	"github.com/gocuda/gocuda/internal/rescore"
	"github.com/stretchr/testify/assert"
)

type key struct{ ctx, kind int }

func TestCache(t *testing.T) {
	c := New[key, int, string](2, func(k key) int { return k.ctx })
	_, ok := c.Take(key{1, 1})
	assert.False(t, ok)
	assert.True(t, c.Put(key{1, 1}, "a"))
	assert.True(t, c.Put(key{1, 2}, "b"))
	assert.False(t, c.Put(key{1, 1}, "c"), "context 1 is full")
	assert.True(t, c.Put(key{2, 1}, "d"), "another group")
	assert.Equal(t, 2, c.Idle(1))
	h, ok := c.Take(key{1, 2})
	assert.True(t, ok)
	assert.Equal(t, "b", h)
	_, ok = c.Take(key{1, 2})
	assert.False(t, ok)
	assert.Equal(t, 1, c.Idle(1))
	rescore.RunReclaim()
	assert.Zero(t, c.Idle(1))
	assert.Zero(t, c.Idle(2))
	_, ok = c.Take(key{2, 1})
	assert.False(t, ok, "emptied at Reclaim")
}

func TestTakePrefer(t *testing.T) {
	c := New[int, int, string](4, identity)
	for _, h := range []string{"a", "b", "c"} {
		c.Put(1, h)
	}
	h, ok := c.TakePrefer(1, func(h string) bool { return h == "a" })
	assert.True(t, ok)
	assert.Equal(t, "a", h)
	h, _ = c.TakePrefer(1, func(h string) bool { return h == "z" })
	assert.Equal(t, "c", h, "no preferred one: the most recent")
	h, _ = c.Take(1)
	assert.Equal(t, "b", h)
	assert.Zero(t, c.Idle(1))
}

func identity(k int) int { return k }

func TestLimitBytes(t *testing.T) {
	c := New[int, int, int64](8, identity).LimitBytes(100, func(b int64) int64 { return b })
	assert.True(t, c.Put(1, 60))
	assert.False(t, c.Put(1, 50), "over 100 bytes")
	assert.True(t, c.Put(1, 40))
	assert.True(t, c.Put(2, 100), "another group")
	h, ok := c.Take(1)
	assert.True(t, ok)
	assert.Equal(t, int64(40), h)
	assert.True(t, c.Put(1, 30), "room again")
	c.Drop()
	assert.True(t, c.Put(1, 100), "emptied")
}

func TestDropGroup(t *testing.T) {
	c := New[key, int, string](2, func(k key) int { return k.ctx })
	assert.True(t, c.Put(key{1, 1}, "a"))
	assert.True(t, c.Put(key{1, 2}, "b"))
	assert.True(t, c.Put(key{2, 1}, "c"))
	c.DropGroup(1)
	assert.Zero(t, c.Idle(1))
	_, ok := c.Take(key{1, 1})
	assert.False(t, ok, "dropped with its group")
	assert.Equal(t, 1, c.Idle(2), "other groups stay")
	assert.True(t, c.Put(key{1, 1}, "d"))
	assert.True(t, c.Put(key{1, 2}, "e"))
	assert.False(t, c.Put(key{1, 1}, "f"), "the group counts from zero again, up to its max")
}
