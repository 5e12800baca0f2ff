// Seeded bug: a cuRAND generator (a library handle) that is never closed.
package main

import (
	"log"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/curand"
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
	x, err := cuda.AllocFor[float32](s, 1024)
	if err != nil {
		log.Fatal(err)
	}
	defer x.Close()
	gen, err := curand.NewGenerator(ctx, curand.PseudoDefault, 42) // BUG(close)
	if err != nil {
		log.Fatal(err)
	}
	log.Println(curand.Uniform[float32](gen, s, x, 1024))
}
