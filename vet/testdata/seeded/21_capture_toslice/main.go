// Seeded bug: a capture that reads its result into Go memory.
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
	var got []uint32
	g, err := ctx.Capture(func(s *cuda.Stream) error {
		if err := x.Memset32Async(s, 3); err != nil {
			return err
		}
		got, err = cuda.ToSlice[uint32](s, x) // BUG(capture)
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()
	log.Println(got)
}
