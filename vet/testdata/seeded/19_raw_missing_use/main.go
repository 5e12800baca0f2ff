// Seeded bug: raw work through Enqueue on a buffer left out of its uses.
package main

import (
	"log"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
)

func clear2(s *cuda.Stream, a, b *cuda.DeviceBuffer) error {
	return cuda.Enqueue(s, func(c cudaraw.CUcontext, h cudaraw.CUstream) error {
		if err := cudaraw.MemsetD8AsyncIn(c, a.Ptr(), 0, uint64(a.Size()), h); err != nil {
			return err
		}
		return cudaraw.MemsetD8AsyncIn(c, b.Ptr(), 0, uint64(b.Size()), h) // BUG(rawaddr)
	}, cuda.Writes(a))
}

func main() { log.Println(clear2(nil, nil, nil)) }
