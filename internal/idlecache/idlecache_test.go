package idlecache

import (
	"testing"

	"github.com/gocuda/gocuda/internal/oom"
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
	oom.Run()
	assert.Zero(t, c.Idle(1))
	assert.Zero(t, c.Idle(2))
	_, ok = c.Take(key{2, 1})
	assert.False(t, ok, "emptied on out-of-memory")
}
