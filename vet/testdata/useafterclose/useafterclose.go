// Package useafterclose holds what the useafterclose analyzer must report (want
// lines) and what it must not.
package useafterclose

import (
	"errors"
	"fmt"

	"github.com/gocuda/gocuda/cuda"
)

func memsetAfterClose(s *cuda.Stream) error {
	b, err := cuda.AllocFor[uint32](s, 16)
	if err != nil {
		return err
	}
	b.Close()
	return b.Memset32Async(s, 0) // want `cuda.DeviceBuffer used after its Close on line 17`
}

func copyAfterClose(s *cuda.Stream, dst *cuda.DeviceBuffer) error {
	src, err := cuda.AllocFor[uint32](s, 16)
	if err != nil {
		return err
	}
	if err := src.Close(); err != nil {
		return err
	}
	return cuda.CopyAsync(s, dst, src) // want `cuda.DeviceBuffer used after its Close`
}

func onOnePath(ctx *cuda.Context, done bool) error {
	s, err := ctx.NewStream()
	if err != nil {
		return err
	}
	if done {
		s.Close()
	}
	return s.Synchronize() // want `cuda.Stream used after its Close`
}

func launchAfterClose(f *cuda.Function, s *cuda.Stream, b *cuda.DeviceBuffer) error {
	b.Close()
	return f.Launch(s, cuda.D1(1), cuda.D1(32), 0, cuda.In(b)) // want `cuda.DeviceBuffer used after its Close`
}

func closedTwice(e *cuda.Event) {
	e.Close()
	e.Close() // want `cuda.Event used after its Close`
}

// Not reported below.

func closeLast(s *cuda.Stream) error {
	b, err := cuda.AllocFor[uint32](s, 16)
	if err != nil {
		return err
	}
	if err := b.Memset32Async(s, 0); err != nil {
		return err
	}
	return b.Close()
}

// A new object each time round the loop.
func inLoop(s *cuda.Stream) error {
	for range 4 {
		b, err := cuda.AllocFor[uint32](s, 16)
		if err != nil {
			return err
		}
		if err := b.Memset32Async(s, 0); err != nil {
			return err
		}
		b.Close()
	}
	return nil
}

// Accessors do not fail after Close.
func accessors(b *cuda.DeviceBuffer) int {
	b.Close()
	return b.Len()
}

// Showing that an operation fails after Close is the point.
func showsFailure(b *cuda.DeviceBuffer) {
	b.Close()
	fmt.Println("fails:", b.Memset8(0) != nil)
}

// So is testing for ErrClosed.
func testsClosed(b *cuda.DeviceBuffer) bool {
	b.Close()
	return errors.Is(b.Memset8(0), cuda.ErrClosed)
}
