package cuda

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/gocuda/gocuda/cuda/cudaraw"
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

// Enqueue's one-pass path holds no memory, only the stream's read lock, and records
// nothing; a use it cannot plan fast by its own marking (a write of memory last read)
// takes the general path, which holds and records it; a failure part way leaves
// nothing held.
func TestEnqueueFastPathCPU(t *testing.T) {
	c, s, w, r := fastPathBufs()
	seq := func(b *fakeBuf) uint64 { return b.m.acc.seq }
	before := seq(w)
	holds, locked := -1, false
	inF := func(b *fakeBuf) func(cudaraw.CUcontext, cudaraw.CUstream) error {
		return func(cudaraw.CUcontext, cudaraw.CUstream) error {
			holds = b.holds()
			if locked = !s.mu.TryLock(); !locked {
				s.mu.Unlock()
			}
			return nil
		}
	}
	require.NoError(t, Enqueue(s, inF(w), rd(w), wr(w), rd(r)))
	assert.Zero(t, holds, "not held")
	assert.True(t, locked, "the stream is read-locked while f runs")
	assert.Equal(t, before, seq(w), "nothing recorded")
	assert.Equal(t, uint64(1), r.m.acc.onlyTag.Load()&1^1, "r's one use is still a read")
	// More uses than Enqueue keeps flags for, with repeats past the eighth.
	many := []Use{rd(w), rd(r)}
	for range 8 {
		many = append(many, rd(w))
	}
	require.NoError(t, Enqueue(s, inF(w), many...))
	assert.Zero(t, holds)
	assert.True(t, locked)

	// r's read and write: the write cannot pass on r's read alone.
	require.NoError(t, Enqueue(s, inF(r), rd(r), wr(r)))
	assert.Equal(t, 1, holds, "the general path holds memory once")
	assert.True(t, locked)
	require.Len(t, r.m.acc.uses, 1)
	assert.True(t, r.m.acc.uses[0].write, "the write is recorded")
	assert.Zero(t, r.holds())

	// Failures after some holds: memory of another context, closed memory.
	foreign := newFakeBuf(0xc000, fakeContext())
	ran := false
	f := func(cudaraw.CUcontext, cudaraw.CUstream) error { ran = true; return nil }
	require.ErrorIs(t, Enqueue(s, f, rd(w), rd(r), wr(foreign)), ErrWrongContext)
	require.ErrorIs(t, Enqueue(s, f, rd(w), wr(closedBuf(c))), ErrClosed)
	assert.False(t, ran)
	assert.Zero(t, w.holds())
	assert.Zero(t, r.holds())

	// A panic in f on the one-pass path unlocks the stream.
	assert.PanicsWithValue(t, "boom", func() {
		_ = Enqueue(s, func(cudaraw.CUcontext, cudaraw.CUstream) error { panic("boom") }, rd(w), wr(w))
	})
	assert.Zero(t, w.holds())
	require.True(t, s.mu.TryLock(), "the stream's read lock was released")
	s.mu.Unlock()
}

// Launch's usual packing (packFast), under its stream's read lock, holds no memory
// argument and declines anything the general path must see: a use that cannot be
// planned fast by its own marking, memory that is not an open allocation of the
// kernel's context, an argument of another type or size than the parameter's, or
// one past the buffer. The general path then reports the error, if any.
func TestPackFastCPU(t *testing.T) {
	c, s, w, r := fastPathBufs()
	buf := make([]byte, 24)
	f := &Function{mod: &Module{ctx: c}, name: "k", params: []paramInfo{{0, 8}, {8, 8}, {16, 8}}, known: true, argSize: 24}

	size, ok := f.packFast(buf, []any{Input{&w.m}, w, Input{&r.m}}, s.stream)
	require.True(t, ok, "w is written on s, r read on s: nothing to wait for or record")
	assert.Equal(t, uintptr(24), size)
	assert.Zero(t, w.holds())
	assert.Equal(t, []uint64{0xa000, 0xa000, 0xb000}, words(buf))

	// Scalars of the usual types, at the parameters' offsets.
	g := &Function{mod: f.mod, name: "k", params: []paramInfo{{0, 4}, {4, 4}, {8, 8}, {16, 4}, {24, 8}, {32, 8}}, known: true, argSize: 40}
	big := make([]byte, 40)
	size, ok = g.packFast(big, []any{int32(-1), float32(1.5), cudaraw.CUdeviceptr(0xc000), uint32(7), float64(2), -2}, s.stream)
	require.True(t, ok)
	assert.Equal(t, uintptr(40), size)
	assert.Equal(t, []uint64{0x3fc00000_ffffffff, 0xc000, 7, math.Float64bits(2), 1<<64 - 2}, words(big))

	// Declined: r passed unmarked too (written, which r's read on s does not
	// cover); closed memory, a view, nil memory, memory of another context; another
	// type, or a size that is not the parameter's.
	view := newFakeBuf(0xa000, c)
	view.m.root = &w.m
	for _, a := range []any{r, closedBuf(c), view, (*DeviceBuffer)(nil), newFakeBuf(0xd000, fakeContext()),
		int8(1), [2]uint32{}, int32(1), nil} {
		_, ok = f.packFast(buf, []any{Input{&r.m}, a, uint64(1)}, s.stream)
		assert.False(t, ok, "%T", a)
		assert.Zero(t, r.holds())
	}
	_, ok = f.packFast(buf, []any{w, w}, s.stream)
	assert.False(t, ok, "a wrong count")

	// Unknown layout: natural alignment, as C lays parameters out; declined past
	// the buffer.
	u := &Function{mod: f.mod, name: "k"}
	size, ok = u.packFast(buf, []any{int32(3), w}, s.stream)
	require.True(t, ok)
	assert.Equal(t, uintptr(16), size)
	assert.Equal(t, []uint64{3, 0xa000}, words(buf[:16]))
	_, ok = u.packFast(buf, []any{w, w, int32(1), w}, s.stream)
	assert.False(t, ok)

	// The general path reports the closed memory's error.
	_, err := packArgs(buf, f.params, true, c, "k", []any{w, w, closedBuf(c)}, &opPlan{})
	require.ErrorIs(t, err, ErrClosed)
	assert.Zero(t, w.holds())
}

// words returns buf as 8-byte words.
func words(buf []byte) []uint64 {
	out := make([]uint64, len(buf)/8)
	for i := range out {
		out[i] = binary.NativeEndian.Uint64(buf[8*i:])
	}
	return out
}

// blockedEnqueue starts an Enqueue of uses on s whose f waits until the returned
// function is called, which returns Enqueue's error; it returns once f runs.
func blockedEnqueue(t *testing.T, s *Stream, uses ...Use) (finish func() error) {
	in, out := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Enqueue(s, func(cudaraw.CUcontext, cudaraw.CUstream) error { close(in); <-out; return nil }, uses...)
	}()
	<-in
	return func() error { close(out); return <-done }
}

// A release waits for a fast Enqueue that uses the memory without holding it (the
// stream's read lock keeps it there), and Enqueues after the release fail with
// ErrClosed.
func TestFastUseRelease(t *testing.T) {
	_, s, w, _ := fastPathBufs()
	finish := blockedEnqueue(t, s, wr(w))
	assert.Zero(t, w.holds(), "the fast path holds nothing")
	retired := make(chan []use, 1)
	go func() { retired <- w.m.retire() }()
	select {
	case <-retired:
		t.Fatal("the release did not wait for the call using the memory")
	case <-time.After(50 * time.Millisecond):
	}
	require.NoError(t, finish())
	uses := <-retired
	require.Len(t, uses, 1)
	assert.Same(t, s.stream, uses[0].s)
	assert.ErrorIs(t, Enqueue(s, func(cudaraw.CUcontext, cudaraw.CUstream) error {
		t.Error("f ran on released memory")
		return nil
	}, rd(w)), ErrClosed)
}

// An operation on another stream that orders itself after memory's use while a fast
// call on that use's stream is queuing (which may queue after the hand-off's event)
// keeps that stream's use and makes later calls take the general path; with no call
// queuing there, a write replaces the use.
func TestHandOffKeepsBusyStream(t *testing.T) {
	c, s, w, _ := fastPathBufs()
	u := fakeStream(c)
	finish := blockedEnqueue(t, s, wr(w))
	assert.Equal(t, []*stream{s.stream}, op(&w.m, u.stream, true), "the write on u waits for s")
	assert.ElementsMatch(t, []*stream{s.stream, u.stream}, w.used(), "s's use kept")
	assert.Nil(t, w.m.acc.only.Load(), "no fast path on s any more")
	for _, x := range w.m.acc.uses {
		assert.False(t, x.synced, "nothing counts as ordered after the call on s")
	}
	require.NoError(t, finish())

	// A write on u again, with a call on s between its plan and its record: the call
	// takes the general path (it holds the memory), so the record sees it.
	op(&w.m, s.stream, true)
	require.Same(t, s.stream, w.m.acc.only.Load(), "s's write is the only use again")
	require.True(t, w.m.hold.enter())
	var d deps
	p := w.m.plan(u.stream, true, &d)
	holds := -1
	require.NoError(t, Enqueue(s, func(cudaraw.CUcontext, cudaraw.CUstream) error { holds = w.holds(); return nil }, wr(w)))
	assert.Equal(t, 2, holds, "after the plan, calls on s hold the memory")
	w.m.record(u.stream, true, p)
	w.m.hold.exit()
	assert.ElementsMatch(t, []*stream{s.stream, u.stream}, w.used(), "s's use kept")

	assert.Equal(t, []*stream{s.stream}, op(&w.m, u.stream, true))
	assert.Equal(t, []*stream{u.stream}, w.used(), "replaced: nothing was queuing on s")
	assert.Same(t, u.stream, w.m.acc.only.Load())
}
