// Seeded bug: timing events that are never closed.
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
	start, _ := ctx.NewEvent(true) // BUG(close)
	end, _ := ctx.NewEvent(true)   // BUG(close)
	_ = start.Record(s)
	_ = end.Record(s)
	_ = end.Synchronize()
	log.Println(cuda.Elapsed(start, end))
}
