package cuda

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/gocuda/gocuda/resource"
)

// Context is a CUDA context: the primary context of a device (Device.Context), or one
// made with NewContext. Every call of this package runs with its object's context
// current on whatever thread the goroutine is on, so callers never need
// runtime.LockOSThread.
type Context struct {
	h       CUcontext
	dev     Device
	primary bool
	dead    atomic.Bool

	mu       sync.Mutex
	disposal *stream // non-blocking stream for releases whose stream is gone
	waiter   *stream // non-blocking stream for host waits on events (sleepOn)
	closed   bool
}

var (
	primaries sync.Map // Device → *primaryEntry
	contexts  sync.Map // CUcontext → *Context, for the resource hooks
)

type primaryEntry struct {
	once sync.Once
	ctx  *Context
	err  error
}

// Context returns the device's primary context, retained once for the life of the
// process (as the CUDA runtime does). Synchronization in it blocks the thread rather
// than spinning once a short poll has not seen the work finish.
func (d Device) Context() (*Context, error) {
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
		if err := DevicePrimaryCtxGetState(h, &flags, &active); err == nil && active == 0 {
			_ = DevicePrimaryCtxSetFlags(h, uint32(CU_CTX_SCHED_BLOCKING_SYNC))
		}
		var c CUcontext
		if err := DevicePrimaryCtxRetain(&c, h); err != nil {
			e.err = fmt.Errorf("cuda: device %d primary context: %w", int(d), err)
			return
		}
		e.ctx = &Context{h: c, dev: d, primary: true}
		contexts.Store(c, e.ctx)
	})
	return e.ctx, e.err
}

// NewContext creates a context of its own on the device (cuCtxCreate); Close destroys
// it. Most programs want the device's primary context instead.
func NewContext(d Device, flags CUctx_flags) (*Context, error) {
	h, err := d.handle()
	if err != nil {
		return nil, err
	}
	var c CUcontext
	// cuCtxCreate makes the new context current on this thread; keep the thread for
	// the call and restore what was current.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var prev CUcontext
	_ = CtxGetCurrent(&prev)
	if err := CtxCreate(&c, nil, uint32(flags), h); err != nil {
		return nil, fmt.Errorf("cuda: creating a context on device %d: %w", int(d), err)
	}
	_ = CtxSetCurrent(prev)
	ctx := &Context{h: c, dev: d}
	contexts.Store(c, ctx)
	return ctx, nil
}

// Handle returns the raw context.
func (c *Context) Handle() CUcontext { return c.h }

// Device returns the context's device.
func (c *Context) Device() Device { return c.dev }

// check returns ErrClosed for a destroyed context and ErrInvalidArgument for nil.
func (c *Context) check() error {
	if c == nil {
		return fmt.Errorf("%w: nil *cuda.Context", ErrInvalidArgument)
	}
	if c.dead.Load() {
		return fmt.Errorf("cuda: context: %w", ErrClosed)
	}
	return nil
}

// Synchronize waits for all work in the context.
func (c *Context) Synchronize() error {
	if err := c.check(); err != nil {
		return err
	}
	resource.Drain()
	return inCtxSynchronize(c.h)
}

// Close destroys a context made by NewContext: it waits for its work, and releases
// still queued for it are dropped (the driver frees everything the context owned).
// Closing a primary context does nothing: it lives as long as the process.
func (c *Context) Close() error {
	if c == nil || c.primary {
		return nil
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return fmt.Errorf("cuda: context: %w", ErrClosed)
	}
	c.closed = true
	c.mu.Unlock()
	// Run what is queued for it while it still exists.
	resource.Drain()
	c.dead.Store(true)
	contexts.Delete(c.h)
	return CtxDestroy(c.h)
}

// disposalStream returns the context's stream for releases whose own stream has been
// destroyed: a non-blocking stream, never the legacy default stream.
func (c *Context) disposalStream() (*stream, error) { return c.ownStream(&c.disposal) }

// waitStream returns the context's stream for sleepOn.
func (c *Context) waitStream() (*stream, error) { return c.ownStream(&c.waiter) }

// ownStream returns *p, one of the context's own non-blocking streams, creating it
// on first use.
func (c *Context) ownStream(p **stream) (*stream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if *p != nil {
		return *p, nil
	}
	s, err := newStream(c, true, 0)
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
// (which would make handing work between streams slower).
func (c *Context) sleepOn(s *stream, ev CUevent) error {
	ms, err := memFor(c)
	if err != nil {
		return err
	}
	be, err := ms.getEvent()
	if err != nil {
		return err
	}
	defer ms.putEvent(be)
	if s != nil {
		err = s.use(func(h CUstream) error { return inEventRecord(c.h, be, h) })
	} else {
		var w *stream
		if w, err = c.waitStream(); err == nil {
			err = w.use(func(h CUstream) error {
				if err := inStreamWaitEvent(c.h, h, ev, 0); err != nil {
					return err
				}
				return inEventRecord(c.h, be, h)
			})
		}
	}
	if err != nil {
		return err
	}
	return inEventSynchronize(c.h, be)
}

// selfSwitching is the resource context of this package's own releases: they make
// their context current themselves, inside their cgo calls (the in* functions), so
// running them needs no thread lock and no context switch, only the check that the
// context still exists.
type selfSwitching struct{ c *Context }

// res returns the resource context for a release of this package in c.
func (c *Context) res() resource.Context { return selfSwitching{c} }

// currentContext maps the thread's current context to its *Context.
func currentContext() resource.Context {
	var h CUcontext
	if CtxGetCurrent(&h) != nil || h == 0 {
		return nil
	}
	if v, ok := contexts.Load(h); ok {
		return v.(*Context)
	}
	return nil
}

// installHooks connects resource to contexts: releases run with their context
// current, and releases of a destroyed context are dropped.
func installHooks() {
	resource.SetContextHooks(resource.ContextHooks{
		Current: currentContext,
		Alive: func(ctx resource.Context) bool {
			switch c := ctx.(type) {
			case *Context:
				return !c.dead.Load()
			case selfSwitching:
				return !c.c.dead.Load()
			}
			return true
		},
		Run: func(ctx resource.Context, f func()) error {
			if sc, ok := ctx.(selfSwitching); ok {
				if sc.c.dead.Load() {
					return resource.ErrContextDestroyed
				}
				f()
				return nil
			}
			c, ok := ctx.(*Context)
			if !ok || c == nil {
				f()
				return nil
			}
			if c.dead.Load() {
				return resource.ErrContextDestroyed
			}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var prev CUcontext
			if err := CtxGetCurrent(&prev); err != nil {
				return err
			}
			if prev != c.h {
				if err := CtxSetCurrent(c.h); err != nil {
					return err
				}
				defer CtxSetCurrent(prev)
			}
			f()
			return nil
		},
	})
}
