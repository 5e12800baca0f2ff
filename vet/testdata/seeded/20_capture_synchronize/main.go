// Seeded bug: a capture that synchronizes its own stream.
package main

import (
	"log"

	"github.com/gocuda/gocuda/cuda"
)

func main() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		log.Fatal(err)
	}
	x, err := ctx.Alloc(nil, 4096)
	if err != nil {
		log.Fatal(err)
	}
	defer x.Close()
	g, err := ctx.Capture(func(s *cuda.Stream) error {
		if err := x.Memset8Async(s, 1); err != nil {
			return err
		}
		return s.Synchronize() // BUG(capture)
	})
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()
}
