// Seeded bug: a memset on a buffer after its Close.
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
	b, err := cuda.AllocFor[uint32](s, 256)
	if err != nil {
		log.Fatal(err)
	}
	b.Close()
	if err := b.Memset32Async(s, 7); err != nil { // BUG(useafterclose)
		log.Fatal(err)
	}
}
