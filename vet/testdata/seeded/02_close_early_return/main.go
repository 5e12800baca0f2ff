// Seeded bug: a stream left open on an early return that is not an error.
package main

import (
	"log"

	"github.com/gocuda/gocuda/cuda"
)

func run(ctx *cuda.Context, n int) error {
	s, err := ctx.NewStream() // BUG(close)
	if err != nil {
		return err
	}
	if n == 0 {
		return nil // nothing to do, and s stays open
	}
	defer s.Close()
	b, err := cuda.AllocFor[float32](s, n)
	if err != nil {
		return err
	}
	defer b.Close()
	return b.Memset32Async(s, 0)
}

func main() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		log.Fatal(err)
	}
	log.Println(run(ctx, 0))
}
