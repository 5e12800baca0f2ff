package cuda_test

import (
	"math"
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/stretchr/testify/assert"
)

func TestFloat16(t *testing.T) {
	for _, c := range []struct {
		f    float32
		bits uint16
	}{
		{0, 0}, {1, 0x3c00}, {-2, 0xc000}, {65504, 0x7bff}, {0.5, 0x3800},
		{6.103515625e-05, 0x0400},  // smallest normal
		{5.960464477539063e-08, 1}, // smallest subnormal
		{2.980232238769531e-08, 0}, // half of it: ties to even, zero
		{4.470348358154297e-08, 1}, // 0.75 of it: rounds up
		{1.00048828125, 0x3c00},    // halfway between 1 and the next: even is 1
		{1.00146484375, 0x3c02},    // halfway, odd below: rounds up
		{65520, 0x7c00},            // rounds to Inf
		{float32(math.Inf(-1)), 0xfc00},
	} {
		h := cuda.NewFloat16(c.f)
		assert.Equal(t, c.bits, uint16(h), "%g", c.f)
	}
	assert.True(t, math.IsNaN(float64(cuda.NewFloat16(float32(math.NaN())).Float32())))
	// Every finite half converts to float32 and back to itself.
	for b := 0; b < 1<<16; b++ {
		h := cuda.Float16(b)
		f := h.Float32()
		if math.IsNaN(float64(f)) {
			assert.Equal(t, uint16(0x7c00), uint16(b)&0x7c00, "NaN only from exponent 31")
			continue
		}
		if !assert.Equal(t, h, cuda.NewFloat16(f), "bits %#04x -> %g", b, f) {
			return
		}
	}
}

func TestBFloat16(t *testing.T) {
	assert.Equal(t, uint16(0x3f80), uint16(cuda.NewBFloat16(1)))
	assert.Equal(t, float32(1), cuda.NewBFloat16(1).Float32())
	assert.Equal(t, uint16(0x3f80), uint16(cuda.NewBFloat16(math.Float32frombits(0x3f808000))), "tie to even")
	assert.Equal(t, uint16(0x3f82), uint16(cuda.NewBFloat16(math.Float32frombits(0x3f818000))), "tie to even, up")
	assert.Equal(t, uint16(0x3f81), uint16(cuda.NewBFloat16(math.Float32frombits(0x3f808001))), "above the tie")
	assert.True(t, math.IsNaN(float64(cuda.NewBFloat16(float32(math.NaN())).Float32())))
	for b := 0; b < 1<<16; b++ {
		h := cuda.BFloat16(b)
		if f := h.Float32(); !math.IsNaN(float64(f)) && !assert.Equal(t, h, cuda.NewBFloat16(f)) {
			return
		}
	}
}
