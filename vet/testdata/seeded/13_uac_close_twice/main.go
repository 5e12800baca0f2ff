// Seeded bug: an event closed twice (the second Close returns ErrClosed).
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
	e, err := ctx.NewEvent(false)
	if err != nil {
		log.Fatal(err)
	}
	if err := e.Close(); err != nil {
		log.Fatal(err)
	}
	if err := e.Close(); err != nil { // BUG(useafterclose)
		log.Fatal(err)
	}
}
