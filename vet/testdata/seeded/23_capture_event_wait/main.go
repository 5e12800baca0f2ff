// Seeded bug: a host wait for an event inside a capture.
package main

import (
	"log"

	"github.com/gocuda/gocuda/cuda"
)

func capture(ctx *cuda.Context, producer *cuda.Stream, ready *cuda.Event, x *cuda.DeviceBuffer) (*cuda.Graph, error) {
	if err := ready.Record(producer); err != nil {
		return nil, err
	}
	return ctx.Capture(func(s *cuda.Stream) error {
		if err := ready.Synchronize(); err != nil { // BUG(capture)
			return err
		}
		return x.Memset8Async(s, 0)
	})
}

func main() { log.Println(capture(nil, nil, nil, nil)) }
