package cuda

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/internal/errs"
	"github.com/gocuda/gocuda/internal/rescore"
	"github.com/gocuda/gocuda/resource"
)

// Context is a CUDA context: the primary context of a device (Device.Context), or one
// made with NewContext. Every call of this package runs with its object's context
// current on whatever thread the goroutine is on, so callers never need
// runtime.LockOSThread.
//
// A Context is safe for concurrent use. Calls in a context made by NewContext hold it
// while they queue work: Close waits for the calls in progress, and later calls in
// the context, or on its objects, fail with ErrClosed. The zero Context is not
// usable: its methods return ErrInvalidArgument.
type Context struct {
	*ctxState
	reg *resource.Registration // NewContext: the release (cuCtxDestroy); nil for primary contexts
}

// ctxState is the part of a Context that the package's own objects in the context
// (its streams, its memory state, release registrations) point to. They must not
// point to the Context itself: a Context dropped without Close is destroyed once it
// is unreachable, which it never would be if it were reachable from itself.
type ctxState struct {
	h       cudaraw.CUcontext
	dev     Device
	primary bool
	// hold counts the calls in a context of NewContext; destroying the context
	// shuts it first. Primary contexts live as long as the process: no hold.
	hold hold
	dead atomic.Bool // destroyed: set once the hold is shut and its calls are out
	// fault is the sticky fault that ended the context, once seen (fault.go):
	// enter fails with it.
	fault faultState

	limits limits
	// WrappedBuffers: bytes registered, and bytes of dropped ones awaiting
	// unregistration in resource.Reclaim (see Context.SetWrapLimit).
	wrapLive, wrapAwaiting atomic.Int64
	wrapReclaiming         atomic.Bool

	// pools are the stream pools, one per priority and kind (a list replaced
	// whole under mu); prio is the device's stream priority range (least,
	// greatest), read once.
	pools atomic.Pointer[[]*streamPool]
	prio  atomic.Pointer[[2]int]

	mu       sync.Mutex
	disposal *stream // non-blocking stream for releases whose stream is gone
	waiter   *stream // non-blocking stream for host waits on events (sleepOn)
	mem      atomic.Pointer[memState]
}

var (
	primaries sync.Map // Device → *primaryEntry
	contexts  sync.Map // CUcontext → *ctxState, for the resource hooks
	// deadContexts holds the handles of the contexts this package destroyed, until
	// the driver hands one out again: restoreCurrent never makes one current.
	deadContexts sync.Map // CUcontext → struct{}
)

type primaryEntry struct {
	once sync.Once
	ctx  *Context
	err  error
}

// errContextClosed is the error of a call in a destroyed context.
var errContextClosed = fmt.Errorf("cuda: context: %w", ErrClosed)

// The errors of nil or zero objects, made once: the checks that return them stay
// small enough to be inlined into every call.
var (
	errNilContext = fmt.Errorf("%w: nil or zero *cuda.Context (use Device.Context or NewContext)", ErrInvalidArgument)
	errNilStream  = fmt.Errorf("%w: nil or zero *cuda.Stream", ErrInvalidArgument)
	errNilMemory  = fmt.Errorf("%w: nil or zero buffer", ErrInvalidArgument)
)

// Context returns the device's primary context, retained once for the life of the
// process (as the CUDA runtime does). Synchronization in it blocks the thread rather
// than spinning once a short poll has not seen the work finish.
func (d Device) Context() (*Context, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	v, _ := primaries.LoadOrStore(d, &primaryEntry{})
	e := v.(*primaryEntry)
	e.once.Do(func() {
		h, err := d.handle()
		if err != nil {
			e.err = err
			return
		}
		// Blocking sync keeps long waits off the CPU; short ones are polled first
		// (see wait). It can only be set before the primary context is active.
		var flags uint32
		var active int32
		if err := cudaraw.DevicePrimaryCtxGetState(h, &flags, &active); err == nil && active == 0 {
			_ = cudaraw.DevicePrimaryCtxSetFlags(h, uint32(cudaraw.CU_CTX_SCHED_BLOCKING_SYNC))
		}
		var c cudaraw.CUcontext
		if err := cudaraw.DevicePrimaryCtxRetain(&c, h); err != nil {
			e.err = fmt.Errorf("cuda: device %d primary context: %w", int(d), err)
			return
		}
		cs := newCtxState(c, d, true)
		e.ctx = &Context{ctxState: cs}
		contexts.Store(c, cs)
	})
	if e.err != nil {
		// Keep nothing for a device that has no context (a bad ordinal), and let a
		// later call try again.
		primaries.CompareAndDelete(d, e)
		return nil, e.err
	}
	return e.ctx.live(d)
}

// live returns the primary context c of d, or the error that says why it cannot be
// used: the fault that ended it, or a reset by a raw call (cuDevicePrimaryCtxReset)
// that destroyed it behind the package's back — never a destroyed context.
func (c *Context) live(d Device) (*Context, error) {
	if f := c.faultErr(); f != nil {
		return nil, f
	}
	h, err := d.handle()
	if err != nil {
		return nil, err
	}
	var flags uint32
	var active int32
	if err := cudaraw.DevicePrimaryCtxGetState(h, &flags, &active); err != nil {
		return nil, c.faulted(fmt.Errorf("cuda: device %d primary context: %w", int(d), err), "Device.Context", nil)
	}
	if active == 0 {
		return nil, fmt.Errorf("cuda: device %d: the primary context was reset outside this package (cuDevicePrimaryCtxReset): %w", int(d), ErrClosed)
	}
	return c, nil
}

// ContextFlags are a new context's flags: a scheduling policy and options, ORed.
type ContextFlags = cudaraw.CUctx_flags

// Context flags, for NewContext.
const (
	SchedAuto         ContextFlags = cudaraw.CU_CTX_SCHED_AUTO          // the driver's choice (the default, 0)
	SchedSpin         ContextFlags = cudaraw.CU_CTX_SCHED_SPIN          // waits spin on the CPU
	SchedYield        ContextFlags = cudaraw.CU_CTX_SCHED_YIELD         // waits yield the CPU
	SchedBlockingSync ContextFlags = cudaraw.CU_CTX_SCHED_BLOCKING_SYNC // waits block on a primitive
	MapHost           ContextFlags = cudaraw.CU_CTX_MAP_HOST            // pinned host memory mappable by the device
	LmemResizeToMax   ContextFlags = cudaraw.CU_CTX_LMEM_RESIZE_TO_MAX  // keep local memory grown for a kernel
	SyncMemops        ContextFlags = cudaraw.CU_CTX_SYNC_MEMOPS         // synchronous memory operations stay so
)

// NewContext creates a context of its own on the device (cuCtxCreate) with flags (0,
// or ContextFlags ORed). Close
// destroys it; one dropped without Close is destroyed in resource.Reclaim
// (cuCtxDestroy waits for the context's work, so never on the way of the program).
// Most programs want the device's primary context instead.
func NewContext(d Device, flags ContextFlags) (*Context, error) {
	h, err := d.handle()
	if err != nil {
		return nil, err
	}
	var c cudaraw.CUcontext
	// cuCtxCreate pushes the new context on this thread's stack of current contexts:
	// keep the thread for the call, and pop it (the driver restores what was current;
	// setting that back ourselves could name a context destroyed since).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := ctxCreate(&c, uint32(flags), h); err != nil {
		return nil, fmt.Errorf("cuda: creating a context on device %d: %w", int(d), err)
	}
	var popped cudaraw.CUcontext
	_ = cudaraw.CtxPopCurrent(&popped)
	cs := newCtxState(c, d, false)
	deadContexts.Delete(c) // the driver may reuse a destroyed context's handle
	contexts.Store(c, cs)
	ctx := &Context{ctxState: cs}
	ctx.reg = resource.ResourceFinalizer((*Context).destroy, ctx, true,
		resource.Kind("cuCtxDestroy"), resource.WithContext(nil), resource.CallerSkip(1))
	return ctx, nil
}

func newCtxState(h cudaraw.CUcontext, d Device, primary bool) *ctxState {
	c := &ctxState{h: h, dev: d, primary: primary}
	c.limits.init()
	return c
}

// Handle returns the raw context (0 for a nil or zero Context).
func (c *Context) Handle() cudaraw.CUcontext {
	if c == nil || c.ctxState == nil {
		return 0
	}
	return c.h
}

// Device returns the context's device (-1 for a nil or zero Context, which no
// device call accepts).
func (c *Context) Device() Device {
	if c == nil || c.ctxState == nil {
		return -1
	}
	return c.dev
}

// check returns ErrInvalidArgument for a nil or zero Context and ErrClosed for a
// destroyed one.
func (c *Context) check() error {
	if c == nil || c.ctxState == nil {
		return errNilContext
	}
	return c.ctxState.check()
}

// check returns ErrClosed for a destroyed context.
func (c *ctxState) check() error {
	if c.hold.closed() {
		return errContextClosed
	}
	return nil
}

// enter keeps the context from being destroyed until exit, or returns ErrClosed.
// Every call that passes the context (or an object of it) to the driver enters
// first. Primary contexts are never destroyed: entering costs a field load.
func (c *ctxState) enter() error {
	if f := c.fault.err.Load(); f != nil {
		return f
	}
	if c.primary || c.hold.enter() {
		return nil
	}
	return errContextClosed
}

// exit ends an enter.
func (c *ctxState) exit() {
	if !c.primary {
		c.hold.exit()
	}
}

// Synchronize waits for all work in the context. A concurrent Close of a context
// made by NewContext waits for it.
func (c *Context) Synchronize() error {
	if err := c.check(); err != nil {
		return err
	}
	resource.Drain()
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	return c.faulted(cudaraw.CtxSynchronizeIn(c.h), "Context.Synchronize", nil)
}

// SynchronizeContext is Synchronize, returning early with ctx's error (wrapped) once
// ctx is done; the GPU work goes on, and so does the driver's wait for it, on a
// goroutine of its own that a Close of the context waits for.
func (c *Context) SynchronizeContext(ctx context.Context) error {
	if ctx.Done() == nil {
		return c.Synchronize()
	}
	if err := c.check(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- c.Synchronize() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("cuda: waiting for the GPU: %w", context.Cause(ctx))
	}
}

// Close destroys a context made by NewContext: it waits for the calls in progress in
// it and for its work, and frees the memory of its buffers still open; objects of
// the context are destroyed with it (their Close then returns nil, later uses
// ErrClosed). Closing again, or closing a nil Context, returns an error matching
// ErrClosed and resource.ErrReleased. Closing a primary context does nothing: it
// lives as long as the process.
func (c *Context) Close() error {
	if c == nil || c.ctxState == nil {
		return errs.Closed("cuda: context")
	}
	if c.primary {
		return nil
	}
	// Run what is queued for it while it still exists.
	resource.Drain()
	err := c.reg.Release()
	runtime.KeepAlive(c) // the finalizer must not run while Release does
	return closeError("cuda: context", err)
}

// destroy is a NewContext's release, from Close or from resource.Reclaim.
func (c *Context) destroy() error { return c.ctxState.destroy() }

func (c *ctxState) destroy() error {
	c.hold.close() // no call is in the context from here on
	ms := c.mem.Load()
	if ms != nil {
		ms.teardown()
	}
	c.dead.Store(true)
	deadContexts.Store(c.h, struct{}{})
	contexts.Delete(c.h)
	memContexts.Delete(c)
	// What the libraries keep for the context goes with it, before the driver may
	// give its handle to another one.
	rescore.RunContextDestroy(uintptr(c.h))
	// The context's own streams go with it.
	c.mu.Lock()
	own := []*stream{c.disposal, c.waiter}
	c.mu.Unlock()
	if ms != nil {
		own = append(own, ms.defStream, ms.hostStream)
	}
	for _, s := range own {
		if s != nil {
			s.mu.Lock()
			s.closed.Store(true)
			s.mu.Unlock()
		}
	}
	return cudaraw.CtxDestroy(c.h)
}

// disposalStream returns the context's stream for releases whose own stream has been
// destroyed: a non-blocking stream, never the legacy default stream.
func (c *ctxState) disposalStream() (*stream, error) { return c.ownStream(&c.disposal) }

// waitStream returns the context's stream for sleepOn.
func (c *ctxState) waitStream() (*stream, error) { return c.ownStream(&c.waiter) }

// ownStream returns *p, one of the context's own non-blocking streams, creating it
// on first use. The caller is in the context.
func (c *ctxState) ownStream(p **stream) (*stream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if *p != nil {
		return *p, nil
	}
	s, err := newStream(c, true, 0, false)
	if err != nil {
		return nil, err
	}
	*p = s
	return s, nil
}

// sleepOn blocks the calling thread, without spinning, until the GPU has done the
// work that s or ev stands for: the work queued on s so far or, with s nil, the work
// before ev's latest record. It records one of the context's blocking-sync events
// there (on s, or after ev on the context's wait stream) and synchronizes on it,
// holding no lock meanwhile. A blocking-sync event sleeps whatever the context's
// scheduling flags, so streams and user events need not be blocking-sync themselves
// (which would make handing work between streams slower). The caller is in the
// context, and holds ev.
func (c *ctxState) sleepOn(s *stream, ev cudaraw.CUevent) error {
	return c.faulted(c.sleepOnEvent(s, ev), "a host wait", s)
}

// sleepOnEvent is sleepOn before its error is checked for a fault.
func (c *ctxState) sleepOnEvent(s *stream, ev cudaraw.CUevent) error {
	ms, err := c.memory()
	if err != nil {
		return err
	}
	be, err := ms.getEvent()
	if err != nil {
		return err
	}
	defer ms.putEvent(be)
	if s != nil {
		err = s.use(func(h cudaraw.CUstream) error { return cudaraw.EventRecordIn(c.h, be, h) })
	} else {
		var w *stream
		if w, err = c.waitStream(); err == nil {
			err = w.use(func(h cudaraw.CUstream) error {
				if err := cudaraw.StreamWaitEventIn(c.h, h, ev, 0); err != nil {
					return err
				}
				return cudaraw.EventRecordIn(c.h, be, h)
			})
		}
	}
	if err != nil {
		return err
	}
	return cudaraw.EventSynchronizeIn(c.h, be)
}
