package cuda

import "math"

// Float16 is an IEEE 754 half-precision number (CUDA's __half, CUDA_R_16F) as the GPU
// stores it: memory of Float16 (AllocFor[Float16]) is what cuBLAS's half-precision
// GEMM reads and writes. Go has no 16-bit float: convert with NewFloat16 and
// Float32.
type Float16 uint16

// BFloat16 is a bfloat16 number (CUDA's __nv_bfloat16, CUDA_R_16BF): the top 16 bits
// of a float32. Convert with NewBFloat16 and Float32.
type BFloat16 uint16

// NewFloat16 returns the half-precision number nearest to f (ties to even); values
// beyond the half range become ±Inf, NaN stays NaN.
func NewFloat16(f float32) Float16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23&0xff) - 127 + 15
	mant := b & 0x7fffff
	switch {
	case b&0x7fffffff > 0x7f800000: // NaN: keep it quiet and non-zero
		return Float16(sign | 0x7e00 | uint16(mant>>13))
	case exp >= 0x1f: // overflow or Inf
		return Float16(sign | 0x7c00)
	case exp <= 0: // subnormal half, or zero
		if exp < -10 {
			return Float16(sign)
		}
		mant |= 0x800000 // the implicit bit
		shift := uint32(14 - exp)
		h := mant >> shift
		rem := mant & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || rem == half && h&1 == 1 {
			h++ // may carry into the smallest normal: still the right bits
		}
		return Float16(sign | uint16(h))
	}
	h := uint32(exp)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && h&1 == 1 {
		h++ // a carry into the exponent rounds up to the next binade, or to Inf
	}
	return Float16(sign | uint16(h))
}

// Float32 returns h as a float32 (exactly: every half is a float32).
func (h Float16) Float32() float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f: // Inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: normalise
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// NewBFloat16 returns the bfloat16 nearest to f (ties to even); NaN stays NaN.
func NewBFloat16(f float32) BFloat16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return BFloat16(b>>16 | 0x40) // quiet NaN
	}
	b += 0x7fff + (b>>16)&1
	return BFloat16(b >> 16)
}

// Float32 returns h as a float32 (exactly).
func (h BFloat16) Float32() float32 { return math.Float32frombits(uint32(h) << 16) }
