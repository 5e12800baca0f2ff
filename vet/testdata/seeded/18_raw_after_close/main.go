// Seeded bug: an address used after its buffer's Close.
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
	p := b.Ptr()
	b.Close()
	log.Println(clearRaw(ctx, p, 4096)) // BUG(rawaddr)
}

// clearRaw stands for foreign code (cgo, another library) that takes an address.
func clearRaw(ctx *cuda.Context, p cudaraw.CUdeviceptr, n uint64) error {
	return ctx.Locked(func() error { return cudaraw.MemsetD8(p, 0, n) })
}
