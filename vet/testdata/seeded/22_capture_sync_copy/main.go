// Seeded bug: a synchronous copy in a capture (it runs once, not in the graph).
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
	x, err := ctx.Alloc(nil, 16)
	if err != nil {
		log.Fatal(err)
	}
	defer x.Close()
	host := []float32{1, 2, 3, 4}
	g, err := ctx.Capture(func(s *cuda.Stream) error {
		return cuda.CopyToDevice(x, host) // BUG(capture)
	})
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()
}
