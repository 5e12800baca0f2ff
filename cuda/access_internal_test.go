package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// op plans and records one use of m on t, as every operation does, and returns the
// streams it had to wait for.
func op(m *memBase, t *stream, write bool) []*stream {
	if !m.hold.enter() {
		panic("closed")
	}
	defer m.hold.exit()
	var d deps
	p := m.plan(t, write, &d)
	m.record(t, write, p)
	var out []*stream
	for i := range d.n {
		out = append(out, d.at(i).s)
	}
	return out
}

// The reader/writer rules: a read waits for the last write on another stream, a
// write for every use on another stream; reads never wait for reads.
func TestHandOffRulesCPU(t *testing.T) {
	c := fakeContext()
	s1, s2, s3, s4 := fakeStream(c).stream, fakeStream(c).stream, fakeStream(c).stream, fakeStream(c).stream
	var m memBase
	m.allocated(s1, 1)

	assert.Empty(t, op(&m, s1, true), "the allocating stream waits for nothing")
	assert.Equal(t, []*stream{s1}, op(&m, s2, false), "a read waits for the write")
	assert.Equal(t, []*stream{s1}, op(&m, s3, false), "a second reader waits for the write only, not the first reader")
	assert.Empty(t, op(&m, s2, false), "s2 has waited for s1's write already")
	assert.ElementsMatch(t, []*stream{s1, s2, s3}, op(&m, s4, true), "a write waits for the writer and every reader")
	assert.Len(t, m.acc.uses, 1, "a write alone becomes the only use")
	assert.Same(t, s4, m.acc.only.Load())
	assert.Empty(t, op(&m, s4, false), "reads on the writer's stream wait for nothing")
	assert.Empty(t, op(&m, s4, true))
	assert.Equal(t, []*stream{s4}, op(&m, s1, false))
	assert.Equal(t, []*stream{s4}, op(&m, s2, false))
	assert.ElementsMatch(t, []*stream{s4, s1, s2}, op(&m, s3, true))

	// The fast path: the only use is on t in t's generation.
	var d deps
	require.True(t, m.hold.enter())
	assert.True(t, m.plan(s3, true, &d).fast)
	assert.True(t, m.plan(s3, false, &d).fast)
	m.hold.exit()
	assert.Zero(t, d.n)
	assert.Equal(t, []*stream{s3}, op(&m, s2, false), "a new write: s2 waits again")
}

// Generations: a use in a generation that its stream's new holder found complete
// is waited for by no one.
func TestHandOffGenerationsCPU(t *testing.T) {
	c := fakeContext()
	s1, s2 := fakeStream(c).stream, fakeStream(c).stream
	var m memBase
	m.allocated(s1, 1)
	// s1 is handed to a new holder, its work found done (as the pool does).
	s1.doneGen.Store(1)
	s1.gen.Store(2)
	assert.Empty(t, op(&m, s2, true), "the allocation's work is complete")
	assert.Len(t, m.acc.uses, 1)
	op(&m, s1, false) // the new holder reads: generation 2
	assert.Equal(t, []*stream{s1}, op(&m, s2, true), "generation 2 is not known complete")
	// A write on the same stream in a later generation waits for nothing (stream
	// order) but is recorded with the new generation.
	s2.gen.Store(5)
	assert.Empty(t, op(&m, s2, true))
	assert.Equal(t, uint64(5), m.acc.uses[0].gen)
}

// Uses that race (another call held the memory between an operation's plan and its
// record) are added, never replace the others: the free waits for all of them.
func TestHandOffRacingUsesCPU(t *testing.T) {
	c := fakeContext()
	s1, s2, s3 := fakeStream(c).stream, fakeStream(c).stream, fakeStream(c).stream
	var m memBase
	m.allocated(s1, 1)

	// s2's write is planned while another call (on s3) holds the memory.
	require.True(t, m.hold.enter())
	var d deps
	p := m.plan(s2, true, &d)
	require.True(t, m.hold.enter()) // the other call
	m.record(s2, true, p)
	m.hold.exit()
	m.hold.exit()
	assert.Len(t, m.acc.uses, 2, "s1's use is kept: s2's write was not alone")

	// A call that entered and left between the plan and the record counts too.
	require.True(t, m.hold.enter())
	p = m.plan(s3, true, &d)
	require.True(t, m.hold.enter())
	m.hold.exit()
	m.record(s3, true, p)
	m.hold.exit()
	assert.Len(t, m.acc.uses, 3)
	assert.Nil(t, m.acc.only.Load())

	// Alone again: the write replaces everything.
	assert.ElementsMatch(t, []*stream{s2, s3}, op(&m, s1, true))
	assert.Len(t, m.acc.uses, 1)
}

// An Input passed with the same memory unmarked is written; alone it is read.
func TestLaunchInputModesCPU(t *testing.T) {
	ctx := fakeContext()
	b := newFakeBuf(0xa000, ctx)
	buf := make([]byte, 16)
	params := []paramInfo{{0, 8}, {8, 8}}
	args := []any{Input{&b.m}, b}
	var held opPlan
	_, err := packArgs(buf, params, true, ctx, "k", args, &held)
	require.NoError(t, err)
	assert.Equal(t, []bool{true}, writesOf(&held), "one operand, written through the unmarked argument")
	held.release()

	args = []any{Input{&b.m}, Input{&b.m}}
	held = opPlan{}
	_, err = packArgs(buf, params, true, ctx, "k", args, &held)
	require.NoError(t, err)
	assert.Equal(t, []bool{false}, writesOf(&held))
	held.release()
	assert.Zero(t, b.holds())

	_, err = packArgs(buf[:8], params[:1], true, ctx, "k", []any{In(nil)}, &opPlan{})
	require.ErrorIs(t, err, ErrInvalidArgument)
}

// The free runs on a stream that waited for every other use (a consumer after its
// producer) and needs a join otherwise.
func TestFreeStreamCPU(t *testing.T) {
	c := fakeContext()
	a, b, x := fakeStream(c).stream, fakeStream(c).stream, fakeStream(c).stream
	var m memBase
	m.allocated(a, 1)
	op(&m, a, true) // produced on a
	op(&m, b, false)
	u, ok := freeStream(m.acc.uses)
	require.True(t, ok, "the consumer waited for the producer")
	assert.Same(t, b, u.s)

	op(&m, x, false) // a second reader: neither reader waited for the other
	_, ok = freeStream(m.acc.uses)
	assert.False(t, ok)

	var n memBase
	n.allocated(a, 1)
	op(&n, b, false)
	op(&n, a, false) // the producer reads after the consumer waited: not covered
	_, ok = freeStream(n.acc.uses)
	assert.False(t, ok)
}
