package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fastPathBufs returns a context, a stream s of it, and two buffers of it: w, whose
// one use is a write on s, and r, whose one use is a read on s (its allocation on
// another stream is complete).
func fastPathBufs() (*Context, *Stream, *fakeBuf, *fakeBuf) {
	c := fakeContext()
	s, done := fakeStream(c), fakeStream(c)
	w, r := newFakeBuf(0xa000, c), newFakeBuf(0xb000, c)
	w.m.allocated(s.stream, 1)
	r.m.allocated(done.stream, 1)
	done.stream.doneGen.Store(1)
	op(&r.m, s.stream, false)
	return c, s, w, r
}

// rd and wr are Reads and Writes of a fakeBuf (not a Memory).
func rd(b *fakeBuf) Use { return Use{&b.m, false} }
func wr(b *fakeBuf) Use { return Use{&b.m, true} }

// Enqueue's one-pass path holds each use by itself and records nothing; a use it
// cannot plan fast by its own marking (a write of memory last read) takes the
// general path, which records it; a failure part way leaves nothing held.
func TestEnqueueFastPathCPU(t *testing.T) {
	c, s, w, r := fastPathBufs()
	seq := func(b *fakeBuf) uint64 { return b.m.acc.seq }
	before := seq(w)
	holds := -1
	require.NoError(t, Enqueue(s, func(CUcontext, CUstream) error { holds = w.holds(); return nil }, rd(w), wr(w), rd(r)))
	assert.Equal(t, 2, holds, "named twice, held twice")
	assert.Zero(t, w.holds())
	assert.Zero(t, r.holds())
	assert.Equal(t, before, seq(w), "nothing recorded")
	assert.Equal(t, uint64(1), r.m.acc.onlyTag.Load()&1^1, "r's one use is still a read")
	// More uses than Enqueue keeps flags for, with repeats past the eighth.
	many := []Use{rd(w), rd(r)}
	for range 8 {
		many = append(many, rd(w))
	}
	require.NoError(t, Enqueue(s, func(CUcontext, CUstream) error { holds = w.holds(); return nil }, many...))
	assert.Equal(t, 9, holds)
	assert.Zero(t, w.holds(), "each hold ended, past the eighth use too")

	// r's read and write: the write cannot pass on r's read alone.
	require.NoError(t, Enqueue(s, func(CUcontext, CUstream) error { holds = r.holds(); return nil }, rd(r), wr(r)))
	assert.Equal(t, 1, holds, "the general path holds memory once")
	require.Len(t, r.m.acc.uses, 1)
	assert.True(t, r.m.acc.uses[0].write, "the write is recorded")
	assert.Zero(t, r.holds())

	// Failures after some holds: memory of another context, closed memory.
	foreign := newFakeBuf(0xc000, fakeContext())
	ran := false
	f := func(CUcontext, CUstream) error { ran = true; return nil }
	require.ErrorIs(t, Enqueue(s, f, rd(w), rd(r), wr(foreign)), ErrWrongContext)
	require.ErrorIs(t, Enqueue(s, f, rd(w), wr(closedBuf(c))), ErrClosed)
	assert.False(t, ran)
	assert.Zero(t, w.holds())
	assert.Zero(t, r.holds())

	// A panic in f on the one-pass path ends the holds and unlocks the stream.
	assert.PanicsWithValue(t, "boom", func() {
		_ = Enqueue(s, func(CUcontext, CUstream) error { panic("boom") }, rd(w), wr(w))
	})
	assert.Zero(t, w.holds())
	require.True(t, s.mu.TryLock(), "the stream's read lock was released")
	s.mu.Unlock()
}

// Launch's packing with its stream (on) holds each memory argument by itself and
// reports whether any use cannot be planned fast by its own marking; its release
// records nothing.
func TestPackArgsOnStreamCPU(t *testing.T) {
	c, s, w, r := fastPathBufs()
	buf := make([]byte, 24)
	params := []paramInfo{{0, 8}, {8, 8}, {16, 8}}

	args := []any{Input{&w.m}, w, Input{&r.m}}
	_, held, err := packArgs(buf, params, true, c, "k", args, s.stream)
	require.NoError(t, err)
	assert.True(t, held.each)
	assert.False(t, held.slow, "w is written on s, r read on s: nothing to wait for or record")
	assert.Equal(t, 2, w.holds(), "w is held once per argument")
	before := r.m.acc.seq
	var plans argPlans // empty: releaseArgs must not read plans of held.each
	releaseArgs(args, &held, s.stream, &plans)
	assert.Zero(t, w.holds())
	assert.Zero(t, r.holds())
	assert.Equal(t, before, r.m.acc.seq, "nothing recorded")

	// r passed unmarked too: written, which r's read on s does not cover.
	args = []any{Input{&r.m}, r, uint64(1)}
	_, held, err = packArgs(buf, params, true, c, "k", args, s.stream)
	require.NoError(t, err)
	assert.True(t, held.slow)
	releaseArgs(args, &held, nil, nil)
	assert.Zero(t, r.holds())

	// An error part way leaves nothing held.
	_, _, err = packArgs(buf, params, true, c, "k", []any{w, w, closedBuf(c)}, s.stream)
	require.ErrorIs(t, err, ErrClosed)
	assert.Zero(t, w.holds())
}
