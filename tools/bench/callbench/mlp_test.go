package callbench

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMLPLoop: each pass queues, layer by layer, the SGEMM from H[i] with W[i] into
// H[i+1] and then the bias kernel with layer i's parameters; without a kernel only
// the SGEMMs; a failing call fails the loop.
func TestMLPLoop(t *testing.T) {
	params := new([2]int32)
	var pin runtime.Pinner
	pin.Pin(params)
	defer pin.Unpin()
	args := []*[4]unsafe.Pointer{
		{unsafe.Pointer(&params[0])}, {unsafe.Pointer(&params[1])},
	}
	sgemm, launch := fakeMLP(-1)
	m := &MLP{Sgemm: sgemm, Launch: launch, Handle: 1, Stream: 2, Bias: 99,
		W: []uintptr{10, 11}, H: []uintptr{20, 21, 22}, Args: args, Width: 8, Batch: 4, Blocks: 1, Threads: 32}
	d, err := m.Loop(2)
	require.NoError(t, err)
	assert.Positive(t, d)
	p0, p1 := uintptr(unsafe.Pointer(&params[0])), uintptr(unsafe.Pointer(&params[1]))
	pass := [][3]uintptr{{1, 10, 21}, {2, 99, p0}, {1, 11, 22}, {2, 99, p1}}
	assert.Equal(t, append(pass, pass...), fakeMLPLog())

	m.Bias, m.Args = 0, args[:1] // Args are not used without a kernel
	fakeMLP(-1)
	_, err = m.Loop(1)
	require.NoError(t, err)
	assert.Equal(t, [][3]uintptr{{1, 10, 21}, {1, 11, 22}}, fakeMLPLog(), "without a kernel: the SGEMMs alone")

	m.Bias, m.Args = 99, args
	m.Sgemm, m.Launch = fakeMLP(3)
	_, err = m.Loop(5)
	assert.ErrorIs(t, err, errCall)
	assert.Len(t, fakeMLPLog(), 3, "the loop stops at the failing call")

	m.H = m.H[:2]
	_, err = m.Loop(1)
	assert.ErrorContains(t, err, "len(H) = len(W)+1")
}

// TestLoopGraphLaunchTouching: each launch is followed by a write to each of the
// lines, stride bytes apart; a buffer too small or a failing launch is an error.
func TestLoopGraphLaunchTouching(t *testing.T) {
	buf := make([]byte, 301)
	_, err := LoopGraphLaunchTouching(fakeGraphLaunch(-1), 5, 6, buf, 4, 100, 3)
	require.NoError(t, err)
	assert.Equal(t, [][3]uintptr{{3, 5, 6}, {3, 5, 6}, {3, 5, 6}}, fakeMLPLog())
	for i, v := range buf {
		if i%100 == 0 {
			assert.Equal(t, byte(3), v, "line at %d", i)
		} else {
			assert.Zero(t, v, "byte %d", i)
		}
	}
	_, err = LoopGraphLaunchTouching(fakeGraphLaunch(-1), 5, 6, buf, 5, 100, 1)
	assert.ErrorContains(t, err, "too small")
	_, err = LoopGraphLaunchTouching(fakeGraphLaunch(1), 5, 6, buf, 0, 1, 4)
	assert.ErrorIs(t, err, errCall)
	assert.Len(t, fakeMLPLog(), 1)
}
