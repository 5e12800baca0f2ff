// Seeded bug: a device address sent to another goroutine.
package main

import (
	"log"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
)

func main() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		log.Fatal(err)
	}
	b, err := ctx.Alloc(nil, 4096)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	addrs := make(chan cudaraw.CUdeviceptr, 1)
	addrs <- b.Ptr() // BUG(rawaddr)
	go func() { log.Println(cudaraw.MemsetD8(<-addrs, 0, 4096)) }()
}
