// Seeded bug: a stream's raw handle kept in a long-lived struct.
package main

import (
	"log"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
)

type engine struct {
	stream cudaraw.CUstream
}

func (e *engine) bind(s *cuda.Stream) {
	e.stream = s.Handle() // BUG(rawaddr)
}

func main() {
	var e engine
	e.bind(nil)
	log.Println(e.stream)
}
