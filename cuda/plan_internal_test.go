package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The planner holds each memory once (written if any use writes), past its inline
// operands too, and a failed hold leaves the earlier holds to release.
func TestOpPlanHoldsOnceCPU(t *testing.T) {
	ctx, other := fakeContext(), fakeContext()
	var bs [6]*fakeBuf
	for i := range bs {
		bs[i] = newFakeBuf(0x1000, ctx)
	}
	var p opPlan
	for i, b := range bs {
		require.NoError(t, p.hold(&b.m, i%2 == 0, ctx.ctxState))
	}
	require.NoError(t, p.hold(&bs[1].m, true, ctx.ctxState), "a second use writes the read operand")
	require.NoError(t, p.hold(&bs[4].m, false, ctx.ctxState))
	assert.Equal(t, 6, p.n)
	assert.Equal(t, []bool{true, true, true, false, true, false}, writesOf(&p))
	for i, b := range bs {
		assert.Equal(t, 1, b.holds(), "buffer %d", i)
	}

	require.ErrorIs(t, p.hold(&newFakeBuf(0x2000, other).m, true, ctx.ctxState), ErrWrongContext)
	require.ErrorIs(t, p.hold(&closedBuf(ctx).m, true, ctx.ctxState), ErrClosed)
	require.ErrorIs(t, p.hold(nil, true, ctx.ctxState), ErrInvalidArgument)
	assert.Equal(t, 6, p.n, "failed holds add nothing")

	s := fakeStream(ctx).stream
	p.plan(s)
	assert.Zero(t, p.wait.n, "nothing to wait for: no use yet")
	p.record(s)
	p.release()
	p.release() // a second release ends nothing more
	for i, b := range bs {
		assert.Zero(t, b.holds(), "buffer %d", i)
		assert.Equal(t, []*stream{s}, b.used(), "buffer %d", i)
	}
}

// The usual operation's rule: an open allocation of the operation's context whose
// one use is on the stream; a read passes on a written use, a write only on one.
func TestFastOnCPU(t *testing.T) {
	ctx := fakeContext()
	s, u := fakeStream(ctx).stream, fakeStream(ctx).stream
	b := newFakeBuf(0x1000, ctx)
	c := ctx.ctxState
	assert.False(t, b.m.fastOn(c, s, false), "no use yet")

	var p opPlan
	require.NoError(t, p.hold(&b.m, false, c))
	p.plan(s)
	p.record(s)
	p.release()
	assert.True(t, b.m.fastOn(c, s, false), "its one use is a read on s")
	assert.False(t, b.m.fastOn(c, s, true), "a write after a read is planned")
	assert.False(t, b.m.fastOn(c, u, false), "another stream")
	assert.False(t, b.m.fastOn(fakeContext().ctxState, s, false), "another context")
	view := &memBase{ctx: ctx, root: &b.m}
	assert.False(t, view.fastOn(c, s, false), "a view")
	assert.False(t, (*memBase)(nil).fastOn(c, s, false))

	p = opPlan{}
	require.NoError(t, p.hold(&b.m, true, c))
	p.plan(s)
	p.record(s)
	p.release()
	assert.True(t, b.m.fastOn(c, s, true), "its one use is a write on s")
	b.m.hold.users.Or(shutBit)
	assert.False(t, b.m.fastOn(c, s, false), "closed")
}
