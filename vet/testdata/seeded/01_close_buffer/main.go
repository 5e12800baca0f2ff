// Seeded bug: a device buffer that is never closed.
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
	x, err := cuda.AllocFrom(s, []float32{1, 2, 3, 4}) // BUG(close)
	if err != nil {
		log.Fatal(err)
	}
	got, err := cuda.ToSlice[float32](s, x)
	log.Println(got, err)
}
