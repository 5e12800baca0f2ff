package cuda

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/internal/errs"
	"github.com/gocuda/gocuda/resource"
)

// Event is a CUDA event: a marker recorded on a stream, completed when the GPU
// reaches it. Use it to time work, to wait for part of a stream, and to make another
// stream wait (Stream.WaitEvent) without blocking the host.
//
// An Event is safe for concurrent use. Calls hold it while they pass it to the
// driver: Close waits for them (never for the GPU) and later calls fail with
// ErrClosed. The Event keeps its Context alive.
type Event struct {
	*event
	ctx *Context
}

type event struct {
	cs     *ctxState
	h      cudaraw.CUevent
	timing bool
	hold   hold
	reg    *resource.Registration
	// lease counts the graphs that record or wait for the event (graph_lease.go):
	// its destroy waits for the last.
	lease leaseState
}

// SynchronizeContext is Synchronize, returning early with ctx's error (wrapped) once
// ctx is done.
func (e *Event) SynchronizeContext(ctx context.Context) error {
	if ctx.Done() == nil {
		return e.Synchronize()
	}
	if err := checkEvent(e); err != nil {
		return err
	}
	resource.Drain()
	return waitContext(ctx, e.query, nil)
}

// NewEvent creates an event in the context; timing events can be measured with
// Elapsed, others are cheaper to record. Events are made without
// CU_EVENT_BLOCKING_SYNC, which slows streams waiting for them; Synchronize sleeps
// through long waits all the same.
func (c *Context) NewEvent(timing bool) (*Event, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.exit()
	e, err := newEvent(c.ctxState, timing)
	if err != nil {
		return nil, err
	}
	return &Event{event: e, ctx: c}, nil
}

// newEvent creates an event in c, which the caller has entered.
func newEvent(c *ctxState, timing bool) (*event, error) {
	// Not CU_EVENT_BLOCKING_SYNC: it makes a stream's wait for the event slower
	// (about 1 µs per hand-off on an H200); Synchronize sleeps through sleepOn.
	var flags uint32
	if !timing {
		flags = uint32(cudaraw.CU_EVENT_DISABLE_TIMING)
	}
	e := &event{cs: c, timing: timing}
	if err := cudaraw.EventCreateIn(c.h, &e.h, flags); err != nil {
		return nil, fmt.Errorf("cuda: creating an event: %w", err)
	}
	e.reg = resource.ResourceFinalizer((*event).destroy, e, false,
		resource.Kind("cuEventDestroy"), resource.WithContext(c.res()), resource.CallerSkip(2))
	return e, nil
}

// destroy is the event's release: it waits for the calls holding the event, then
// destroys it (cuEventDestroy does not wait for the GPU).
func (e *event) destroy() error {
	e.hold.close()
	if e.lease.postpone(e.destroyNow, false) {
		return nil // a graph records or waits for it: destroyed after it
	}
	return e.destroyNow()
}

// destroyNow destroys the event.
func (e *event) destroyNow() error {
	if err := e.cs.enter(); err != nil {
		return resource.ErrContextDestroyed // destroyed with its context
	}
	defer e.cs.exit()
	return cudaraw.EventDestroyIn(e.cs.h, e.h)
}

func checkEvent(e *Event) error {
	if e == nil || e.event == nil || e.ctx == nil {
		return fmt.Errorf("%w: nil or zero *cuda.Event", ErrInvalidArgument)
	}
	if e.hold.closed() {
		return errEventClosed
	}
	return e.cs.check()
}

var errEventClosed = fmt.Errorf("cuda: event: %w", ErrClosed)

// acquire enters the event's context and holds the event until leave.
func (e *event) acquire() error {
	if err := e.cs.enter(); err != nil {
		return err
	}
	if !e.hold.enter() {
		e.cs.exit()
		return errEventClosed
	}
	return nil
}

// leave ends an acquire.
func (e *event) leave() {
	e.hold.exit()
	e.cs.exit()
}

// Handle returns the raw event, or 0 for a nil, zero or closed Event (as
// os.File.Fd, no live handle after Close). Keep the Event open while the handle is
// in use.
func (e *Event) Handle() cudaraw.CUevent {
	if e == nil || e.event == nil || e.hold.closed() {
		return 0
	}
	return e.h
}

// Context returns the event's context (nil for a nil or zero Event).
func (e *Event) Context() *Context {
	if e == nil {
		return nil
	}
	return e.ctx
}

// Record marks the event at the current end of the stream.
func (e *Event) Record(s *Stream) error {
	if err := checkEvent(e); err != nil {
		return err
	}
	if err := checkStream(s); err != nil {
		return err
	}
	if s.cs != e.cs {
		return fmt.Errorf("cuda: recording an event on a stream of another context: %w", ErrWrongContext)
	}
	if err := e.acquire(); err != nil {
		return err
	}
	defer e.leave()
	leaseEventIfCapturing(s.stream, e.event)
	err := s.use(func(h cudaraw.CUstream) error { return cudaraw.EventRecordIn(e.cs.h, e.h, h) })
	if err == nil && streamCheck.on.Load() {
		checkRecord(e.event, s.stream)
	}
	return err
}

// Query reports whether the GPU has reached the event.
func (e *Event) Query() (bool, error) {
	if err := checkEvent(e); err != nil {
		return false, err
	}
	return e.query()
}

func (e *event) query() (bool, error) {
	if err := e.acquire(); err != nil {
		return false, err
	}
	defer e.leave()
	done, err := ready(cudaraw.EventQueryIn(e.cs.h, e.h))
	return done, e.cs.faulted(err, "an event's query or wait", nil)
}

// Synchronize waits until the GPU reaches the event: it polls briefly, then yields,
// then blocks the thread, holding no lock meanwhile (a concurrent Close does not
// wait for it, and the wait ends at the record it started with).
func (e *Event) Synchronize() error {
	if err := checkEvent(e); err != nil {
		return err
	}
	resource.Drain()
	return wait(e.query, func() error {
		if err := e.acquire(); err != nil {
			return err
		}
		defer e.leave()
		return e.cs.sleepOn(nil, e.h)
	})
}

// Elapsed returns the GPU time from start to end; both must be timing events of one
// context that have completed.
func Elapsed(start, end *Event) (time.Duration, error) {
	if err := checkEvent(start); err != nil {
		return 0, err
	}
	if err := checkEvent(end); err != nil {
		return 0, err
	}
	if !start.timing || !end.timing {
		return 0, fmt.Errorf("%w: Elapsed needs timing events", ErrInvalidArgument)
	}
	if start.cs != end.cs {
		return 0, fmt.Errorf("cuda: Elapsed between events of two contexts: %w", ErrWrongContext)
	}
	if err := start.acquire(); err != nil {
		return 0, err
	}
	defer start.leave()
	if err := end.acquire(); err != nil {
		return 0, err
	}
	defer end.leave()
	var ms float32
	if err := inEventElapsed(start.cs.h, &ms, start.h, end.h); err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// Close destroys the event once the calls using it have queued their work (it does
// not wait for the GPU). Closing again, or closing a nil Event, returns an error
// matching ErrClosed and resource.ErrReleased.
func (e *Event) Close() error {
	if e == nil || e.event == nil || e.reg == nil {
		return errs.Closed("cuda: event")
	}
	err := e.reg.Release()
	runtime.KeepAlive(e.event) // the finalizer must not run while Release does
	return closeError("cuda: event", err)
}
