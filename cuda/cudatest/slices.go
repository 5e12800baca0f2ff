package cudatest

import (
	"testing"

	"github.com/gocuda/gocuda/cuda"
)

// AllocFrom returns device memory on s holding a copy of host (cuda.AllocFrom), closed
// when the test ends; it fails the test on an error. An empty host gives a one-element
// buffer with nothing copied, for tests of empty operands.
func AllocFrom[T any](t testing.TB, s *cuda.Stream, host []T) *cuda.DeviceBuffer {
	t.Helper()
	var b *cuda.DeviceBuffer
	var err error
	if len(host) == 0 {
		b, err = cuda.AllocFor[T](s, 1)
	} else {
		b, err = cuda.AllocFrom(s, host)
	}
	if err != nil {
		t.Fatalf("cudatest: uploading %d elements: %v", len(host), err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// Read returns the first n elements of T of b (cuda.CopyFromDevice: after the writes
// queued to it); it fails the test on an error.
func Read[T any](t testing.TB, b *cuda.DeviceBuffer, n int) []T {
	t.Helper()
	out := make([]T, n)
	if err := cuda.CopyFromDevice(out, b); err != nil {
		t.Fatalf("cudatest: reading %d elements: %v", n, err)
	}
	return out
}
