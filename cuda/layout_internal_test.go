package cuda

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The fields of memBase that every operation reads are in its first 64 bytes, and a
// DeviceBuffer is a size that Go's allocator places on 64-byte boundaries: one
// cache line per buffer.
func TestMemBaseLayout(t *testing.T) {
	var m memBase
	hot := []struct {
		name      string
		off, size uintptr
	}{
		{"ctx", unsafe.Offsetof(m.ctx), unsafe.Sizeof(m.ctx)},
		{"ptr", unsafe.Offsetof(m.ptr), unsafe.Sizeof(m.ptr)},
		{"size", unsafe.Offsetof(m.size), unsafe.Sizeof(m.size)},
		{"etypeID", unsafe.Offsetof(m.etypeID), unsafe.Sizeof(m.etypeID)},
		{"root", unsafe.Offsetof(m.root), unsafe.Sizeof(m.root)},
		{"hold", unsafe.Offsetof(m.hold), unsafe.Sizeof(m.hold)},
		{"acc.only", unsafe.Offsetof(m.acc) + unsafe.Offsetof(m.acc.only), unsafe.Sizeof(m.acc.only)},
		{"acc.onlyTag", unsafe.Offsetof(m.acc) + unsafe.Offsetof(m.acc.onlyTag), unsafe.Sizeof(m.acc.onlyTag)},
	}
	for _, f := range hot {
		assert.LessOrEqual(t, f.off+f.size, uintptr(64), "memBase.%s is past the first cache line", f.name)
	}
	require.Zero(t, unsafe.Sizeof(DeviceBuffer{})%64, "DeviceBuffer is %d bytes", unsafe.Sizeof(DeviceBuffer{}))
	var keep []*DeviceBuffer
	for range 64 {
		b := new(DeviceBuffer)
		keep = append(keep, b)
		require.Zero(t, uintptr(unsafe.Pointer(b))%64, "a DeviceBuffer at %p", b)
	}
	assert.Len(t, keep, 64)
}
