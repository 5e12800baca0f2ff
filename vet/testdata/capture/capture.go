// Package capture holds what the capture analyzer must report (want lines) and what
// it must not.
package capture

import (
	"github.com/gocuda/gocuda/cuda"
)

func captured(ctx *cuda.Context, x, y *cuda.DeviceBuffer, ev *cuda.Event, e *cuda.Exec, other *cuda.Stream, h *cuda.HostBuffer) (*cuda.Graph, error) {
	host := make([]float32, 16)
	return ctx.Capture(func(s *cuda.Stream) error {
		if err := cuda.CopyAsync(s, y, x); err != nil { // captured
			return err
		}
		if err := cuda.CopyAsync(s, h, y); err != nil { // through a HostBuffer: captured
			return err
		}
		if err := ev.Record(s); err != nil {
			return err
		}
		if err := s.Synchronize(); err != nil { // want `s.Synchronize \(the capturing stream\) cannot be captured`
			return err
		}
		if _, err := s.Query(); err != nil { // want `s.Query \(the capturing stream\) cannot be captured`
			return err
		}
		if err := cuda.CopyFromDeviceAsync(s, host, y); err != nil { // want `cuda.CopyFromDeviceAsync \(a copy into Go memory`
			return err
		}
		if _, err := cuda.ToSlice[float32](s, y); err != nil { // want `cuda.ToSlice \(a copy into Go memory`
			return err
		}
		if err := e.Launch(s); err != nil { // want `e.Launch \(a graph launched on the capturing stream\)`
			return err
		}
		if err := other.Synchronize(); err != nil { // want `other.Synchronize waits on the host during a capture`
			return err
		}
		if err := ev.Synchronize(); err != nil { // want `ev.Synchronize waits on the host`
			return err
		}
		if err := ctx.Synchronize(); err != nil { // want `ctx.Synchronize waits on the host`
			return err
		}
		if err := x.Synchronize(); err != nil { // want `x.Synchronize waits on the host`
			return err
		}
		if err := cuda.CopyToDevice(x, host); err != nil { // want `cuda.CopyToDevice is synchronous`
			return err
		}
		if err := x.Memset32(0); err != nil { // want `x.Memset32 is synchronous`
			return err
		}
		if err := cuda.CopyToDeviceAsync(s, x, host); err != nil { // a snapshot: captured
			return err
		}
		if err := e.Launch(other); err != nil { // another stream: runs as usual
			return err
		}
		return x.Memset32Async(s, 0)
	})
}

// A capture function declared apart is checked too.
func body(s *cuda.Stream) error {
	return s.Synchronize() // want `s.Synchronize \(the capturing stream\)`
}

func named(g *cuda.Graph) ([]cuda.Node, error) { return g.CaptureInto(nil, body) }

// Outside a capture nothing is reported.
func outside(s *cuda.Stream, x *cuda.DeviceBuffer) error {
	if err := s.Synchronize(); err != nil {
		return err
	}
	return x.Memset32(0)
}
