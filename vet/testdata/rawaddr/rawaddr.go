// Package rawaddr holds what the rawaddr analyzer must report (want lines) and what
// it must not.
package rawaddr

import (
	"fmt"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
)

var last cudaraw.CUdeviceptr

type job struct {
	addr   cudaraw.CUdeviceptr
	stream cudaraw.CUstream
}

func storedInGlobal(b *cuda.DeviceBuffer) {
	last = b.Ptr() // want `raw address from Ptr stored in package variable last`
}

func storedInField(j *job, s *cuda.Stream) {
	j.stream = s.Handle() // want `raw handle from Handle stored in a field`
}

func sent(b *cuda.DeviceBuffer, ch chan<- cudaraw.CUdeviceptr) {
	ch <- b.Ptr() // want `raw address from Ptr sent on a channel`
}

func consume(p cudaraw.CUdeviceptr) {}

func afterClose(b *cuda.DeviceBuffer) {
	p := b.Ptr()
	b.Close()
	consume(p) // want `raw address from Ptr used after cuda.DeviceBuffer's Close on line 35`
}

// A stale address on another stream: the launch is not ordered after b's work.
func launchOutside(f *cuda.Function, other *cuda.Stream, b *cuda.DeviceBuffer) error {
	p := b.Ptr()
	return f.Launch(other, cuda.D1(1), cuda.D1(32), 0, p) // want `address of b passed to Launch outside cuda.Enqueue`
}

func rawOutside(b *cuda.DeviceBuffer, s *cuda.Stream) error {
	p, err := cuda.DevicePtr[byte](b)
	if err != nil {
		return err
	}
	return cudaraw.MemsetD8Async(cudaraw.CUdeviceptr(uintptr(unsafePointer(p))), 0, 16, s.Handle()) // want `address of b passed to MemsetD8Async outside cuda.Enqueue`
}

func notInUses(s *cuda.Stream, a, b *cuda.DeviceBuffer) error {
	return cuda.Enqueue(s, func(c cudaraw.CUcontext, h cudaraw.CUstream) error {
		return cudaraw.MemsetD8AsyncIn(c, b.Ptr(), 0, 16, h) // want `address of b used in the function given to the ordering helper, but b is not among its uses`
	}, cuda.Writes(a))
}

// Not reported below.

func ordered(s *cuda.Stream, b *cuda.DeviceBuffer) error {
	p := b.Ptr()
	return cuda.Enqueue(s, func(c cudaraw.CUcontext, h cudaraw.CUstream) error {
		return cudaraw.MemsetD8AsyncIn(c, p, 0, 16, h)
	}, cuda.Writes(b))
}

func synchronized(b *cuda.DeviceBuffer) error {
	if err := b.Synchronize(); err != nil {
		return err
	}
	return cudaraw.MemsetD8(b.Ptr(), 0, 16) // every use of b has finished
}

func handles(s *cuda.Stream) error {
	return cudaraw.StreamQuery(s.Handle()) // a handle orders nothing: it may go to raw calls
}

func compared(a, b *cuda.DeviceBuffer) {
	p := a.Ptr()
	a.Close()
	fmt.Println(p == b.Ptr()) // an address compared, not used
}

func local(b *cuda.DeviceBuffer) job {
	var j job
	j.addr = b.Ptr() // a local value
	return j
}
