package cudalib_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cudalib"
	"github.com/gocuda/gocuda/resource"
)

// The library being wrapped, "foo": its handle type (a cublasHandle_t), and its
// create, set-stream, destroy and fill functions. A real wrapper calls them through
// its raw layer; here they are Go, with the fill done by the driver, so that the
// example runs wherever the tests run (on the fake driver in CI).
type fooHandle int32

var (
	fooMade    atomic.Int32
	fooStreams sync.Map // fooHandle → the stream it is set to, as the library keeps it
	fooUsed    sync.Map // fooHandle → true once a fill used it (for the example's output)
)

func fooCreate(h *fooHandle) error { *h = fooHandle(fooMade.Add(1)); return nil }

func fooSetStream(_ cudaraw.CUcontext, h fooHandle, st cudaraw.CUstream) error {
	fooStreams.Store(h, st)
	return nil
}

func fooDestroy(h fooHandle) { fooStreams.Delete(h) }

// fooFill sets n bytes at p to v, on the handle's stream, in the context c.
func fooFill(c cudaraw.CUcontext, h fooHandle, p *byte, v byte, n int) error {
	st, _ := fooStreams.Load(h)
	fooUsed.Store(h, true)
	return cudaraw.MemsetD8AsyncIn(c, cudaraw.CUdeviceptr(uintptr(unsafe.Pointer(p))), v, uint64(n), st.(cudaraw.CUstream))
}

// ownedFoo owns a handle: once the pool has dropped it and it is unreachable,
// package resource destroys the handle (in the blocking lane, at resource.Reclaim,
// as for a library whose destroy may wait for the GPU).
type ownedFoo struct{ h fooHandle }

func ownFoo(h fooHandle) *ownedFoo {
	o := &ownedFoo{h}
	resource.ResourceFinalizer(func(o *ownedFoo) { fooDestroy(o.h) }, o, true)
	return o
}

// fooHandles is the wrapper's pool, made once: at most 4 idle handles per context
// besides the one each stream keeps.
var fooHandles = cudalib.NewPool[fooHandle, *ownedFoo, struct{}](4, fooCreate, ownFoo, false)

// Fill is the wrapper's operation: it fills x with v on s. Run checks s and x, takes
// a handle (the one s keeps, after its first call), binds it to s, and queues the
// call after the work on other streams that uses x.
func Fill(s *cuda.Stream, x *cuda.DeviceBuffer, v byte) error {
	return fooHandles.Run(s, cudalib.NoKey{}, fooSetStream, fillCall(x, v), cuda.Writes(x))
}

// fillCall returns the library call that fills x with v, with the handle h in the
// context c: what Run queues.
func fillCall(x *cuda.DeviceBuffer, v byte) func(c cudaraw.CUcontext, h fooHandle) error {
	return func(c cudaraw.CUcontext, h fooHandle) error {
		p, err := cuda.DevicePtr[byte](x)
		if err != nil {
			return err
		}
		return fooFill(c, h, p, v, x.Len())
	}
}

// A wrapper of another CUDA library: calls on a stream take the stream's handle,
// bound to it, and are ordered with the memory's other uses.
func Example() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		fmt.Println("no GPU:", err)
		return
	}
	s, err := ctx.NewStream()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	x, err := cuda.AllocFor[byte](s, 8)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer x.Close()

	fooUsed.Clear()
	for v := range byte(3) { // three calls in a row on s: one handle, which s keeps
		if err := Fill(s, x, v+1); err != nil {
			fmt.Println(err)
			return
		}
	}
	out := make([]byte, 8)
	if err := cuda.CopyFromDevice(out, x); err != nil {
		fmt.Println(err)
		return
	}
	used := 0
	fooUsed.Range(func(any, any) bool { used++; return true })
	fmt.Println(out, "handles used:", used)
	// Output: [3 3 3 3 3 3 3 3] handles used: 1
}
