package curand

import (
	_ "embed"
	"fmt"
	"unsafe"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cudalib"
)

// toFloat32 returns a float argument as a float32 (a half's exact value).
func toFloat32[T Float](v T) float32 {
	switch x := any(v).(type) {
	case cuda.Float16:
		return x.Float32()
	case float64:
		return float32(x)
	}
	return *(*float32)(unsafe.Pointer(&v)) // float32 itself: the other types are above
}

// halfPTX holds the float32-to-half conversion of the half-precision draws
// (half.ptx).
//
//go:embed half.ptx
var halfPTX []byte

// halfKernels is that conversion, loaded in each context at first use.
var halfKernels = cudalib.NewKernels(halfPTX)

// viaFloat32 fills the first n halves of out on s: draw (a float32 call of the same
// distribution) into a temporary float32 buffer from the pool, then the conversion.
func viaFloat32(g *Generator, s *cuda.Stream, out cuda.Memory, n int, draw func(tmp cuda.Memory) error) error {
	const op = "half"
	if n < 0 {
		return fmt.Errorf("curand: %s: %w: %d numbers", op, cuda.ErrInvalidArgument, n)
	}
	if out == nil {
		return fmt.Errorf("curand: %s: %w: nil memory", op, cuda.ErrInvalidArgument)
	}
	if _, err := cuda.DevicePtr[cuda.Float16](out); err != nil {
		return fmt.Errorf("curand: %s: %w", op, err)
	}
	if out.Size()/2 < n {
		return fmt.Errorf("curand: %s: %w: %d numbers into memory for %d", op, cuda.ErrInvalidArgument, n, out.Size()/2)
	}
	if g == nil {
		return fmt.Errorf("curand: %s: %w: nil generator", op, cuda.ErrInvalidArgument)
	}
	if n == 0 {
		return nil
	}
	// The conversion runs over whole arrays: out's first n halves.
	dst := out
	if out.Size()/2 != n {
		b, ok := out.(*cuda.DeviceBuffer)
		if !ok {
			return fmt.Errorf("curand: %s: %w: %d numbers into %T of %d: give memory of exactly n halves or a *cuda.DeviceBuffer",
				op, cuda.ErrInvalidArgument, n, out, out.Size()/2)
		}
		v, err := b.Slice(0, n)
		if err != nil {
			return fmt.Errorf("curand: %s: %w", op, err)
		}
		dst = v
	}
	conv, err := halfKernels.Function(s.Context(), "to_half")
	if err != nil {
		return fmt.Errorf("curand: %s: %w", op, err)
	}
	tmp, err := cuda.AllocFor[float32](s, n)
	if err != nil {
		return fmt.Errorf("curand: %s: %w", op, err)
	}
	defer tmp.Close() // freed on s after the conversion
	if err := draw(tmp); err != nil {
		return err
	}
	const block = 256
	grid := min((n+block-1)/block, 1<<16)
	if err := conv.Launch(s, cuda.D1(grid), cuda.D1(block), 0, dst, cuda.In(tmp), uint64(n)); err != nil {
		return fmt.Errorf("curand: %s: converting: %w", op, err)
	}
	return nil
}
