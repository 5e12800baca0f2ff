// Seeded bug: a device address cached in a package variable.
package main

import (
	"log"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
)

var scratch cudaraw.CUdeviceptr

func setup(s *cuda.Stream) (*cuda.DeviceBuffer, error) {
	b, err := cuda.AllocFor[byte](s, 1<<20)
	if err != nil {
		return nil, err
	}
	scratch = b.Ptr() // BUG(rawaddr)
	return b, nil
}

func main() { log.Println(setup(nil)) }
