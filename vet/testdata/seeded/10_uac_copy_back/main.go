// Seeded bug: a copy back to the host from a buffer closed too early.
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
	x, err := cuda.AllocFrom(s, []float32{1, 2, 3})
	if err != nil {
		log.Fatal(err)
	}
	if err := x.Close(); err != nil {
		log.Fatal(err)
	}
	out := make([]float32, 3)
	if err := cuda.CopyFromDevice(out, x); err != nil { // BUG(useafterclose)
		log.Fatal(err)
	}
	log.Println(out)
}
