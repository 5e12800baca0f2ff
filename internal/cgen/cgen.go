// Package cgen holds the small helpers that generated bindings share: bit-field access
// for C structs that Go cannot lay out with bit fields.
package cgen

// GetBits returns width bits of b starting at bit offset bit (little-endian bit order,
// as GCC lays out bit fields on x86-64), sign-extended when signed is true.
func GetBits(b []byte, bit, width int, signed bool) uint64 {
	var v uint64
	for i := 0; i < width; i++ {
		p := bit + i
		if b[p/8]&(1<<(p%8)) != 0 {
			v |= 1 << i
		}
	}
	if signed && width < 64 && v&(1<<(width-1)) != 0 {
		v |= ^uint64(0) << width
	}
	return v
}

// SetBits stores the low width bits of v into b at bit offset bit.
func SetBits(b []byte, bit, width int, v uint64) {
	for i := 0; i < width; i++ {
		p := bit + i
		if v&(1<<i) != 0 {
			b[p/8] |= 1 << (p % 8)
		} else {
			b[p/8] &^= 1 << (p % 8)
		}
	}
}

// BoolBit converts a bool to the 0 or 1 a _Bool bit field stores.
func BoolBit(v bool) uint64 {
	if v {
		return 1
	}
	return 0
}
