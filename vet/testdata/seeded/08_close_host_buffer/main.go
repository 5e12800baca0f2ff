// Seeded bug: pinned host memory in a loop, closed on no path.
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
	total := 0
	for i := range 4 {
		h, err := ctx.AllocHost(4096 << i) // BUG(close)
		if err != nil {
			log.Fatal(err)
		}
		total += h.Size()
	}
	log.Println(total)
}
