// Seeded bug: an address launched on another stream, unordered with the buffer's work.
package main

import (
	"log"

	"github.com/gocuda/gocuda/cuda"
)

func run(fill *cuda.Function, s, other *cuda.Stream) error {
	b, err := cuda.AllocFor[uint32](s, 1024)
	if err != nil {
		return err
	}
	defer b.Close()
	if err := b.Memset32Async(s, 1); err != nil {
		return err
	}
	p := b.Ptr()
	return fill.Launch(other, cuda.D1(4), cuda.D1(256), 0, p, uint32(2), uint64(1024)) // BUG(rawaddr)
}

func main() { log.Println(run(nil, nil, nil)) }
