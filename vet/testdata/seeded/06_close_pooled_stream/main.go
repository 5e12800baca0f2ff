// Seeded bug: a pooled stream that is never given back.
package main

import (
	"context"
	"log"

	"github.com/gocuda/gocuda/cuda"
)

func work(ctx *cuda.Context, b *cuda.DeviceBuffer) error {
	s, err := ctx.AcquireStream(context.Background()) // BUG(close)
	if err != nil {
		return err
	}
	if err := b.Memset8Async(s, 0); err != nil {
		return err
	}
	return s.Synchronize()
}

func main() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		log.Fatal(err)
	}
	b, err := ctx.Alloc(nil, 1024)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	log.Println(work(ctx, b))
}
