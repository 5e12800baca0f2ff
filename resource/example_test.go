package resource_test

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/gocuda/gocuda/resource"
)

// A fake C library standing in for, say, a cuFFT-like plan API (its
// destroy waits for the GPU) and an event API (its destroy returns at once).
var clib = struct {
	sync.Mutex
	next cHandle
	live map[cHandle]string
}{live: map[cHandle]string{}}

type cHandle uintptr

func cCreate(what string) cHandle {
	clib.Lock()
	defer clib.Unlock()
	clib.next++
	clib.live[clib.next] = what
	return clib.next
}

func cDestroy(h cHandle) {
	clib.Lock()
	defer clib.Unlock()
	delete(clib.live, h)
}

func cLive() int {
	clib.Lock()
	defer clib.Unlock()
	return len(clib.live)
}

// Plan wraps a C handle whose destroy may wait for the GPU (like
// cufftDestroy or cuMemFree): blocking lane.
type Plan struct {
	h   cHandle
	reg *resource.Registration
}

// NewPlan creates a plan. Close it when done; a forgotten plan is released
// by the next resource.Reclaim.
func NewPlan() *Plan {
	p := &Plan{h: cCreate("plan")}
	// The release function gets the plan as its argument: it must not
	// capture p itself, or p would never become unreachable.
	p.reg = resource.ResourceFinalizer(func(p *Plan) { cDestroy(p.h) }, p, true,
		resource.Kind("planDestroy"))
	return p
}

// Close destroys the plan now. Calling it again returns resource.ErrReleased.
func (p *Plan) Close() error {
	err := p.reg.Release()
	runtime.KeepAlive(p) // p must not become unreachable during Release
	return err
}

// Event wraps a C handle whose destroy returns in microseconds (like
// cuEventDestroy): non-blocking lane.
type Event struct {
	h   cHandle
	reg *resource.Registration
}

// NewEvent creates an event.
func NewEvent() *Event {
	e := &Event{h: cCreate("event")}
	e.reg = resource.ResourceFinalizer(func(e *Event) { cDestroy(e.h) }, e, false,
		resource.Kind("eventDestroy"))
	return e
}

// Close destroys the event now.
func (e *Event) Close() error {
	err := e.reg.Release()
	runtime.KeepAlive(e)
	return err
}

//go:noinline
func forget() {
	NewPlan()
	NewEvent()
}

func Example() {
	p := NewPlan()
	e := NewEvent()
	fmt.Println("live:", cLive())

	// The deterministic path: Close.
	fmt.Println(p.Close(), e.Close())
	fmt.Println("after Close:", cLive())
	fmt.Println("second Close:", p.Close())

	// The fallback: objects nobody closed. The non-blocking one is
	// released within ~100 ms (or at the next resource.Drain); the
	// blocking one waits for Reclaim, which the allocator calls on
	// out-of-memory. Reclaim releases both, now.
	forget()
	fmt.Println("forgotten:", cLive())
	if _, err := resource.Reclaim(); err != nil {
		fmt.Println(err)
	}
	fmt.Println("after Reclaim:", cLive())

	// Output:
	// live: 2
	// <nil> <nil>
	// after Close: 0
	// second Close: resource: already released
	// forgotten: 2
	// after Reclaim: 0
}

// Buffer registers itself in place, as objects allocated at a high rate
// should: its registration allocates nothing.
type Buffer struct {
	reg resource.Registration
	h   cHandle
}

// finalizeBuffer is Buffer's finalizer: a top-level function, not a
// closure, so that registering allocates nothing.
func finalizeBuffer(b *Buffer) { b.reg.Finalized() }

// free is the release function, a func(*Buffer) error as a method
// expression.
func (b *Buffer) free() error {
	cDestroy(b.h)
	return nil
}

// NewBuffer creates a buffer whose release is non-blocking.
func NewBuffer() *Buffer {
	b := &Buffer{h: cCreate("buffer")}
	resource.ResourceFinalizer((*Buffer).free, b, false,
		resource.Kind("bufferFree"), resource.At(&b.reg, finalizeBuffer))
	return b
}

// Close frees the buffer now.
func (b *Buffer) Close() error {
	err := b.reg.Release()
	runtime.KeepAlive(b)
	return err
}

//go:noinline
func forgetBuffers() {
	for range 3 {
		NewBuffer()
	}
}

func ExampleAt() {
	b := NewBuffer()
	fmt.Println("live:", cLive())
	fmt.Println(b.Close(), "after Close:", cLive())

	// Forgotten buffers are released through their finalizers.
	forgetBuffers()
	if _, err := resource.Reclaim(); err != nil {
		fmt.Println(err)
	}
	fmt.Println("after Reclaim:", cLive())

	// Output:
	// live: 1
	// <nil> after Close: 0
	// after Reclaim: 0
}
