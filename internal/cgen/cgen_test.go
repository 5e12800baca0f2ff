package cgen

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestBits(t *testing.T) {
	b := make([]byte, 4)
	SetBits(b, 3, 5, 0b10110)
	assert.Equal(t, []byte{0b10110000, 0, 0, 0}, b)
	assert.Equal(t, uint64(0b10110), GetBits(b, 3, 5, false))
	assert.Equal(t, uint64(0xfffffffffffffff6), GetBits(b, 3, 5, true), "sign-extended -10")
	SetBits(b, 6, 10, 0x3ff)
	assert.Equal(t, uint64(0x3ff), GetBits(b, 6, 10, false))
	assert.Equal(t, uint64(0b110), GetBits(b, 3, 3, false), "neighbouring field kept")
	SetBits(b, 6, 10, 0)
	assert.Equal(t, uint64(0), GetBits(b, 6, 10, false))
	assert.Equal(t, uint64(0b110), GetBits(b, 3, 3, false))
}
