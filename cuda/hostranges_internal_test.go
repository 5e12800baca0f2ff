package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestHostRanges: overlap of a span with the recorded ranges, at their edges, after
// removals, and for ranges added out of order.
func TestHostRanges(t *testing.T) {
	const base = uintptr(1) << 44 // far from any memory of the process
	addHostRange(base+0x3000, 0x1000)
	addHostRange(base+0x1000, 0x1000)
	addHostRange(base+0x8000, 0x100)
	t.Cleanup(func() {
		for _, p := range []uintptr{0x1000, 0x3000, 0x8000} {
			removeHostRange(base + p)
		}
	})
	for _, c := range []struct {
		p    uintptr
		n    int
		want bool
	}{
		{0x0, 0x1000, false},     // ends where the first starts
		{0x0, 0x1001, true},      // its first byte
		{0x1fff, 1, true},        // its last byte
		{0x2000, 0x1000, false},  // the gap
		{0x2000, 0x1001, true},   // into the second
		{0x1800, 0x2000, true},   // across the gap
		{0x4000, 0x4000, false},  // up to the third
		{0x80ff, 1, true},        // the third's last byte
		{0x8100, 1 << 20, false}, // past all
		{0x3000, 0, false},       // nothing
	} {
		assert.Equal(t, c.want, inHostRanges(base+c.p, c.n), "[%#x, +%#x)", c.p, c.n)
	}
	removeHostRange(base + 0x3000)
	assert.False(t, inHostRanges(base+0x3000, 0x1000), "removed")
	assert.True(t, inHostRanges(base+0x1000, 1), "the others stay")
	assert.True(t, inHostRanges(base+0x8000, 1))
	removeHostRange(base + 0x5000) // not a range: nothing happens
	assert.True(t, inHostRanges(base+0x1000, 1))
}
