package curand

import (
	"fmt"

	"github.com/gocuda/gocuda/cuda"
)

// The calls that return a new buffer: each allocates n (positive) elements on s (cuda.AllocFor,
// from the device's pool) and fills them as the call of the same name without New
// does; the caller closes the buffer. On an error nothing is returned and the buffer
// is freed.

// NewUniform returns a new buffer of n numbers of T uniform in (0, 1], drawn on s
// (Uniform).
func NewUniform[T Float](g *Generator, s *cuda.Stream, n int) (*cuda.DeviceBuffer, error) {
	return allocFill[T](g, s, n, func(b cuda.Memory) error { return Uniform[T](g, s, b, n) })
}

// NewNormal returns a new buffer of n normally distributed numbers of T (Normal).
func NewNormal[T Float](g *Generator, s *cuda.Stream, n int, mean, stddev T) (*cuda.DeviceBuffer, error) {
	return allocFill[T](g, s, n, func(b cuda.Memory) error { return Normal(g, s, b, n, mean, stddev) })
}

// NewLogNormal returns a new buffer of n log-normally distributed numbers of T
// (LogNormal).
func NewLogNormal[T Float](g *Generator, s *cuda.Stream, n int, mean, stddev T) (*cuda.DeviceBuffer, error) {
	return allocFill[T](g, s, n, func(b cuda.Memory) error { return LogNormal(g, s, b, n, mean, stddev) })
}

// NewPoisson returns a new buffer of n Poisson-distributed uint32s of mean lambda
// (Poisson).
func NewPoisson(g *Generator, s *cuda.Stream, n int, lambda float64) (*cuda.DeviceBuffer, error) {
	return allocFill[uint32](g, s, n, func(b cuda.Memory) error { return Poisson(g, s, b, n, lambda) })
}

// NewUint32 returns a new buffer of n random 32-bit words (Uint32).
func NewUint32(g *Generator, s *cuda.Stream, n int) (*cuda.DeviceBuffer, error) {
	return allocFill[uint32](g, s, n, func(b cuda.Memory) error { return Uint32(g, s, b, n) })
}

// allocFill allocates n elements of T on s for g and fills them; n and g are checked
// first, so that they allocate nothing when wrong (fill checks the rest).
func allocFill[T Float | uint32](g *Generator, s *cuda.Stream, n int, fill func(cuda.Memory) error) (*cuda.DeviceBuffer, error) {
	if n < 1 || g == nil {
		return nil, fmt.Errorf("curand: %w: %d numbers (at least one) from generator %p", cuda.ErrInvalidArgument, n, g)
	}
	b, err := cuda.AllocFor[T](s, n)
	if err != nil {
		return nil, fmt.Errorf("curand: %w", err)
	}
	if err := fill(b); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}
