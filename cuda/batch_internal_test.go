package cuda

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Add checks and packs each launch before anything reaches the driver, and a failed
// Add leaves the batch as it was.
func TestLaunchBatchAddCPU(t *testing.T) {
	ctx := fakeContext()
	m := &Module{ctx: ctx}
	f := &Function{mod: m, name: "k", params: []paramInfo{{0, 4}, {8, 8}}, known: true, argSize: 16}
	buf := newFakeBuf(0xabc000, ctx)

	var b LaunchBatch
	require.NoError(t, b.Add(f, D1(2), D2(32, 2), 128, int32(7), buf))
	require.NoError(t, b.Add(f, D1(1), D1(1), 0, int32(-1), cudaraw.CUdeviceptr(0x1000)))
	require.Equal(t, 2, b.Len())
	require.Len(t, b.args, 4, "two 16-byte buffers")
	args := unsafe.Slice((*byte)(unsafe.Pointer(&b.args[0])), 32)
	assert.Equal(t, uint32(7), binary.NativeEndian.Uint32(args[0:]))
	assert.Equal(t, uint64(0xabc000), binary.NativeEndian.Uint64(args[8:]))
	assert.Equal(t, uint32(0xffffffff), binary.NativeEndian.Uint32(args[16:]))
	assert.Equal(t, uint64(0x1000), binary.NativeEndian.Uint64(args[24:]))
	r := b.recs[0]
	assert.Equal(t, []uint32{2, 1, 1, 32, 2, 1, 128}, []uint32{uint32(r.gx), uint32(r.gy), uint32(r.gz),
		uint32(r.bx), uint32(r.by), uint32(r.bz), uint32(r.shmem)})
	assert.Equal(t, uint64(16), uint64(r.size))
	assert.Equal(t, uint64(16), uint64(b.recs[1].off))
	assert.Len(t, b.devs, 1)

	// Failures add nothing.
	for _, bad := range []func() error{
		func() error { return b.Add(nil, D1(1), D1(1), 0) },
		func() error { return b.Add(f, Dim3{}, D1(1), 0, int32(1), buf) },
		func() error { return b.Add(f, D1(1), D1(1), -1, int32(1), buf) },
		func() error { return b.Add(f, D1(1), D1(1), 0, int32(1)) },
		func() error { return b.Add(f, D1(1), D1(1), 0, int64(1), buf) },
	} {
		require.ErrorIs(t, bad(), ErrInvalidArgument)
	}
	closed := closedBuf(ctx)
	require.ErrorIs(t, b.Add(f, D1(1), D1(1), 0, int32(1), closed), ErrClosed)
	other := &Function{mod: &Module{ctx: fakeContext()}, name: "k2", known: true}
	require.ErrorIs(t, b.Add(other, D1(1), D1(1), 0), ErrWrongContext)
	assert.Equal(t, 2, b.Len())
	assert.Len(t, b.args, 4)
	assert.Len(t, b.devs, 1)

	// Unknown layouts are packed by natural alignment, past the inline size too.
	u := &Function{mod: m, name: "u"}
	big := [40]uint64{1: 5}
	require.NoError(t, b.Add(u, D1(1), D1(1), 0, uint8(1), big))
	assert.Equal(t, uint64(8+320), uint64(b.recs[2].size))
	assert.Len(t, b.args, 4+41)

	b.Reset()
	assert.Zero(t, b.Len())
	require.NoError(t, b.Add(other, D1(1), D1(1), 0), "a reset batch takes any context")
}

// Submit fails before the driver for a nil, closed or foreign stream, a closed
// module and closed device memory; an empty batch queues nothing.
func TestLaunchBatchSubmitChecksCPU(t *testing.T) {
	ctx := fakeContext()
	m := &Module{ctx: ctx}
	f := &Function{mod: m, name: "k", params: []paramInfo{{0, 8}}, known: true, argSize: 8}
	s := fakeStream(ctx)
	var empty LaunchBatch
	require.ErrorIs(t, empty.Submit(nil), ErrInvalidArgument)
	require.NoError(t, empty.Submit(s))

	buf := newFakeBuf(0xabc000, ctx)
	var b LaunchBatch
	require.NoError(t, b.Add(f, D1(1), D1(1), 0, buf))
	require.ErrorIs(t, b.Submit(fakeStream(fakeContext())), ErrWrongContext)

	buf.m.hold.users.Or(shutBit)
	require.ErrorIs(t, b.Submit(s), ErrClosed)
	buf.m.hold.users.And(^uint64(shutBit))

	m.closed = true
	require.ErrorIs(t, b.Submit(s), ErrClosed)
	m.closed = false
	s.closed.Store(true)
	require.ErrorIs(t, b.Submit(s), ErrClosed)
	assert.Empty(t, buf.used(), "nothing was marked used")
}
