package cuda

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/resource"
)

// WrappedBuffer is Go memory registered with the driver (cuMemHostRegister): the
// GPU copies to and from it at pinned-memory speed and kernels can read it through
// Ptr. The Go slice stays pinned (runtime.Pinner) and alive until the buffer is
// closed: Close waits for the GPU work that used it, then unregisters it. A buffer
// dropped without Close is unregistered in resource.Reclaim (unregistering may wait
// for the GPU, so it never happens on the way of the program); when the bytes
// awaiting that exceed the context's bound (Context.SetWrapLimit), the package
// starts a Reclaim in the background.
//
// Registration works on whole pages: two slices that share a page cannot both be
// registered (the driver reports CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED), so wrap
// large, separately allocated slices. Registering costs about 100 µs for 4 KiB; for
// short-lived buffers HostBuffer is far cheaper.
//
// A WrappedBuffer is safe for concurrent use. Operations hold it until their work is
// queued: Close waits for them (and then for the GPU work that used the memory), and
// operations after Close fail with ErrClosed.
type WrappedBuffer struct {
	w       *wrapped
	cleanup runtime.Cleanup // counts the bytes awaiting unregistration if dropped
}

// wrapped is the part of a WrappedBuffer that the release runs on; WrappedBuffer
// carries a cleanup that counts the bytes awaiting unregistration.
type wrapped struct {
	m    memBase
	host unsafe.Pointer // the Go memory, kept alive and pinned
	pin  runtime.Pinner
	st   *wrapState
}

// wrapState is shared by a WrappedBuffer's cleanup and its release.
type wrapState struct {
	cs    *ctxState
	size  int64
	state atomic.Int32 // wrapLive, wrapAwaiting or wrapDone
}

const (
	wrapLive int32 = iota
	wrapAwaiting
	wrapDone
)

// wrapReclaims counts the background reclaims started for wrapped memory (tests).
var wrapReclaims atomic.Int64

// Wrap registers s for the context.
func Wrap[T any](c *Context, s []T) (*WrappedBuffer, error) {
	return wrapIn(c, s, 2)
}

func emptyWrap(err error) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("%w: wrapping an empty slice", ErrInvalidArgument)
}

func wrapIn[T any](c *Context, s []T, skip int) (*WrappedBuffer, error) {
	p, n, err := hostSpan(s)
	if err != nil || n == 0 {
		return nil, emptyWrap(err)
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	ms, err := c.memory()
	if err != nil {
		return nil, err
	}
	resource.Drain()
	c.maybeReclaimWrapped()
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.exit()
	w := &wrapped{host: p, st: &wrapState{cs: c.ctxState, size: int64(n)}}
	w.pin.Pin(p)
	register := func() error {
		return cudaraw.MemHostRegisterIn(c.h, p, uint64(n), uint32(cudaraw.CU_MEMHOSTREGISTER_DEVICEMAP))
	}
	err = register()
	switch {
	case errors.Is(err, cudaraw.ErrOutOfMemory):
		ms.reclaimForOOM()
		err = register()
	case errors.Is(err, cudaraw.ErrHostMemoryAlreadyRegistered):
		// A WrappedBuffer of these pages dropped without Close keeps them
		// registered until its release, which waits for Reclaim: find it and run
		// it, then try again.
		collect()
		_, _ = resource.Reclaim()
		if err = register(); errors.Is(err, cudaraw.ErrHostMemoryAlreadyRegistered) {
			err = fmt.Errorf("%w (the slice shares pages with memory registered already: "+
				"an open WrappedBuffer of an overlapping slice, or memory registered outside this package)", err)
		}
	}
	if err != nil {
		w.pin.Unpin()
		return nil, fmt.Errorf("cuda: registering %d bytes of Go memory: %w", n, err)
	}
	addHostRange(uintptr(p), n)
	var dp cudaraw.CUdeviceptr
	if err := cudaraw.MemHostGetDevicePointerIn(c.h, &dp, p, 0); err != nil {
		removeHostRange(uintptr(p))
		_ = cudaraw.MemHostUnregisterIn(c.h, p)
		w.pin.Unpin()
		return nil, fmt.Errorf("cuda: device address of registered memory: %w", err)
	}
	elem, _ := elemSize[T]()
	w.m = memBase{ctx: c, ms: ms, ptr: dp, size: n, elem: elem, etype: reflect.TypeFor[T](), etypeID: typeWord(reflect.TypeFor[T]()), kind: KindWrapped}
	// No context for the registration: the release must run even after the context
	// is destroyed, to unpin the Go memory (a Pinner collected while pinning panics);
	// it makes the context current itself and skips the driver if the context is gone.
	w.m.reg = resource.ResourceFinalizer((*wrapped).unregister, w, true,
		resource.Kind("cuMemHostUnregister"), resource.WithContext(nil), resource.CallerSkip(skip))
	ms.track(&w.m, nil, skip)
	c.wrapLive.Add(int64(n))
	out := &WrappedBuffer{w: w}
	out.cleanup = runtime.AddCleanup(out, awaitUnregister, w.st)
	return out, nil
}

// unregister waits for the GPU work that used the memory, unregisters and unpins it.
func (w *wrapped) unregister() error {
	if w.m.postpone(w.unregister, true) {
		return nil
	}
	uses := w.m.retire()
	var err error
	if c := w.m.ctx; c.enter() == nil { // else the context went, and the registration with it
		ms := w.m.ms
		var d deps
		usesOf(uses, &d)
		f, ferr := ms.fenceFor(&d)
		if ferr == nil {
			ferr = f.wait(ms)
			f.clear(ms)
		}
		err = errors.Join(ferr, cudaraw.MemHostUnregisterIn(c.h, w.host))
		c.exit()
	}
	removeHostRange(uintptr(w.host))
	w.pin.Unpin()
	w.host = nil
	cs := w.st.cs
	cs.wrapLive.Add(-w.st.size)
	if w.st.state.Swap(wrapDone) == wrapAwaiting {
		cs.wrapAwaiting.Add(-w.st.size)
	}
	return err
}

// awaitUnregister runs (as a runtime cleanup) when a WrappedBuffer becomes
// unreachable without Close: its bytes now await unregistration in Reclaim.
func awaitUnregister(st *wrapState) {
	if st.state.CompareAndSwap(wrapLive, wrapAwaiting) {
		st.cs.wrapAwaiting.Add(st.size)
		st.cs.maybeReclaimWrapped()
	}
}

// maybeReclaimWrapped starts resource.Reclaim in a goroutine when the bytes of c
// awaiting unregistration exceed its limit; at most one runs at a time per context.
func (c *ctxState) maybeReclaimWrapped() {
	if c.wrapAwaiting.Load() <= c.limits.wrap.Load() || !c.wrapReclaiming.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer c.wrapReclaiming.Store(false)
		wrapReclaims.Add(1)
		_, _ = resource.Reclaim()
	}()
}

func (b *WrappedBuffer) base() *memBase {
	if b == nil || b.w == nil {
		return nil
	}
	return &b.w.m
}

// Ptr returns the device address of the registered memory. As DeviceBuffer.Ptr, it
// orders nothing: raw work with it goes through Enqueue.
func (b *WrappedBuffer) Ptr() cudaraw.CUdeviceptr { return b.base().ptrChecked() }

// Size returns the registered size in bytes.
func (b *WrappedBuffer) Size() int { return b.base().sizeOrZero() }

// Len returns the number of elements of the wrapped slice.
func (b *WrappedBuffer) Len() int { return b.base().length() }

// Context returns the buffer's context.
func (b *WrappedBuffer) Context() *Context { return b.base().context() }

// Close waits for the GPU work queued so far on every stream that uses the
// memory, then unregisters and unpins it; the Go slice is ordinary Go memory again.
// Closing again, or closing a nil buffer, returns an error matching ErrClosed and
// resource.ErrReleased.
func (b *WrappedBuffer) Close() error {
	err := b.base().close("cuda: wrapped buffer")
	if err == nil {
		b.cleanup.Stop() // nothing will await unregistration
	}
	runtime.KeepAlive(b)
	return err
}
