// Seeded bug: a graph's executable that is never closed.
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
	s, err := ctx.NewStream()
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	x, err := cuda.AllocFor[uint32](s, 256)
	if err != nil {
		log.Fatal(err)
	}
	defer x.Close()
	g, err := ctx.Capture(func(cs *cuda.Stream) error { return x.Memset32Async(cs, 1) })
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()
	e, err := g.Instantiate() // BUG(close)
	if err != nil {
		log.Fatal(err)
	}
	for range 10 {
		if err := e.Launch(s); err != nil {
			log.Fatal(err)
		}
	}
	log.Println(s.Synchronize())
}
