// Seeded bug: a stream closed inside a loop, used (and closed again) on the next round.
package main

import (
	"log"

	"github.com/gocuda/gocuda/cuda"
)

func fill(s *cuda.Stream, bufs []*cuda.DeviceBuffer) error {
	for i, b := range bufs {
		if err := b.Memset8Async(s, byte(i)); err != nil { // BUG(useafterclose)
			return err
		}
		if err := s.Close(); err != nil { // BUG(useafterclose): meant after the loop
			return err
		}
	}
	return nil
}

func main() { log.Println(fill(nil, nil)) }
