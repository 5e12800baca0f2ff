// Package close holds what the close analyzer must report (want lines) and what it
// must not.
package close

import (
	"context"
	"errors"
	"fmt"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/nvrtc"
)

func leakBuffer(s *cuda.Stream) error {
	b, err := cuda.AllocFor[float32](s, 16) // want `cuda.DeviceBuffer from AllocFor is not closed on every path`
	if err != nil {
		return err
	}
	return b.Memset32Async(s, 0)
}

func leakOnOnePath(ctx *cuda.Context, early bool) {
	s, err := ctx.NewStream() // want `cuda.Stream from NewStream is not closed on every path`
	if err != nil {
		return
	}
	if early {
		return // leaks s
	}
	s.Close()
}

func leakEvent(ctx *cuda.Context) {
	e, _ := ctx.NewEvent(false) // want `cuda.Event from NewEvent is not closed`
	_, _ = e.Query()
}

func leakModule(ctx *cuda.Context, out *nvrtc.Output) {
	m, err := out.Load(ctx) // want `cuda.Module from Load is not closed`
	if err == nil {
		fmt.Println(m)
	}
}

func leakGraphAndExec(ctx *cuda.Context) error {
	g, err := ctx.Capture(func(s *cuda.Stream) error { return nil }) // want `cuda.Graph from Capture is not closed`
	if err != nil {
		return err
	}
	e, err := g.Instantiate() // want `cuda.Exec from Instantiate is not closed`
	if err != nil {
		return err
	}
	fmt.Println(e)
	return nil
}

func leakPooled(ctx *cuda.Context) {
	s, err := ctx.AcquireStream(context.Background()) // want `cuda.Stream from AcquireStream is not closed`
	if err != nil {
		return
	}
	_ = s.Synchronize()
}

// Not reported below.

func deferred(s *cuda.Stream) error {
	b, err := cuda.AllocFor[float32](s, 16)
	if err != nil {
		return err
	}
	defer b.Close()
	return b.Memset32Async(s, 0)
}

func closedOnEveryPath(ctx *cuda.Context, early bool) error {
	s, err := ctx.NewStream()
	if err != nil {
		return err
	}
	if early {
		return s.Close()
	}
	return s.Close()
}

func returned(s *cuda.Stream) (*cuda.DeviceBuffer, error) {
	b, err := cuda.AllocFor[float32](s, 16)
	if err != nil {
		return nil, err
	}
	if err := b.Memset32Async(s, 0); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

type holder struct{ b *cuda.DeviceBuffer }

func stored(s *cuda.Stream, h *holder) error {
	b, err := cuda.AllocFor[float32](s, 16)
	if err != nil {
		return err
	}
	h.b = b
	return nil
}

func sent(s *cuda.Stream, ch chan<- *cuda.DeviceBuffer) {
	b, err := cuda.AllocFor[float32](s, 16)
	if err != nil {
		return
	}
	ch <- b
}

func keep(b *cuda.DeviceBuffer) {}

func handedOver(s *cuda.Stream) {
	b, err := cuda.AllocFor[float32](s, 16)
	if err != nil {
		return
	}
	keep(b) // the program's own function may close it
}

func inClosure(ctx *cuda.Context, cleanup func(func())) {
	s, err := ctx.NewStream()
	if err != nil {
		return
	}
	cleanup(func() { s.Close() })
}

// An error path may drop an object to the finalizer fallback.
func errorPath(s *cuda.Stream) error {
	b, err := cuda.AllocFor[float32](s, 16)
	if err != nil {
		return err
	}
	if err := b.Memset32Async(s, 0); err != nil {
		return err
	}
	if b.Len() == 0 {
		return errors.New("empty")
	}
	return b.Close()
}

// Objects of a context closed here go with it; a device's primary context and a
// buffer's view are not made here.
func ofClosedContext() error {
	ctx, err := cuda.NewContext(0, 0)
	if err != nil {
		return err
	}
	defer ctx.Close()
	primary, err := cuda.Device(0).Context()
	if err != nil {
		return err
	}
	_ = primary
	s, err := ctx.NewStream()
	if err != nil {
		return err
	}
	b, err := cuda.AllocFor[float32](s, 16)
	if err != nil {
		return err
	}
	v, err := b.Slice(0, 4)
	if err != nil {
		return err
	}
	_ = v
	return nil
}

// Dropped on purpose.
func blank(ctx *cuda.Context) error {
	_, err := ctx.NewStream()
	return err
}
