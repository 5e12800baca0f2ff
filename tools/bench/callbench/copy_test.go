package callbench

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLoopCopyFlag: each iteration copies, then has the word set to the next value
// and waits for it; a failing copy or write fails the loop.
func TestLoopCopyFlag(t *testing.T) {
	flag := new(uint32)
	*flag = 7
	var pin runtime.Pinner
	pin.Pin(flag)
	defer pin.Unpin()
	host := unsafe.Pointer(new([16]byte))
	copyFn, write := fakeCopyFlag(-1)
	d, err := LoopCopyFlag(true, copyFn, write, 1, host, 16, 2, uintptr(unsafe.Pointer(flag)), flag, 5)
	require.NoError(t, err)
	assert.Positive(t, d)
	assert.Equal(t, uint32(12), *flag, "five values written after the first")
	assert.Equal(t, 10, fakeCopyCalls(), "a copy and a write per iteration")

	for _, failAt := range []int{4, 5} { // the third copy, the third write
		copyFn, write = fakeCopyFlag(failAt)
		_, err = LoopCopyFlag(false, copyFn, write, 1, host, 16, 2, uintptr(unsafe.Pointer(flag)), flag, 5)
		assert.ErrorIs(t, err, errCall)
		assert.Equal(t, failAt+1, fakeCopyCalls(), "the loop stops at the failing call")
	}
}
