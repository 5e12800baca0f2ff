// Seeded bug: a kernel launched with a closed buffer marked read-only.
package main

import (
	"log"

	"github.com/gocuda/gocuda/cuda"
)

func launch(f *cuda.Function, s *cuda.Stream, x, y *cuda.DeviceBuffer) error {
	defer y.Close()
	x.Close()
	return f.Launch(s, cuda.D1(1), cuda.D1(256), 0, cuda.In(x), y) // BUG(useafterclose)
}

func main() { log.Println(launch(nil, nil, nil, nil)) }
