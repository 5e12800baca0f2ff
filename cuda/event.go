package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/gocuda/gocuda/resource"
)

// Event is a CUDA event: a marker recorded on a stream, completed when the GPU
// reaches it. Use it to time work, to wait for part of a stream, and to make another
// stream wait (Stream.WaitEvent) without blocking the host.
type Event struct {
	*event
}

type event struct {
	ctx    *Context
	h      CUevent
	timing bool
	closed atomic.Bool
	reg    *resource.Registration
}

// NewEvent creates an event in the context; timing events can be measured with
// Elapsed, others are cheaper to record. Events are made without
// CU_EVENT_BLOCKING_SYNC, which slows streams waiting for them; Synchronize sleeps
// through long waits all the same.
func (c *Context) NewEvent(timing bool) (*Event, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	return newEventIn(c, timing)
}

// NewEvent creates an event in the primary context of device 0.
func NewEvent(timing bool) (*Event, error) {
	c, err := Device(0).Context()
	if err != nil {
		return nil, err
	}
	return c.NewEvent(timing)
}

func newEventIn(c *Context, timing bool) (*Event, error) {
	// Not CU_EVENT_BLOCKING_SYNC: it makes a stream's wait for the event slower
	// (about 1 µs per hand-off on an H200); Synchronize sleeps through sleepOn.
	var flags uint32
	if !timing {
		flags = uint32(CU_EVENT_DISABLE_TIMING)
	}
	e := &event{ctx: c, timing: timing}
	if err := inEventCreate(c.h, &e.h, flags); err != nil {
		return nil, fmt.Errorf("cuda: creating an event: %w", err)
	}
	e.reg = resource.ResourceFinalizerErr(func(e *event) error { return inEventDestroy(e.ctx.h, e.h) }, e, false,
		resource.Kind("cuEventDestroy"), resource.WithContext(c.res()), resource.CallerSkip(2))
	return &Event{e}, nil
}

func checkEvent(e *Event) error {
	if e == nil || e.event == nil {
		return fmt.Errorf("%w: nil *cuda.Event", ErrInvalidArgument)
	}
	if e.closed.Load() {
		return fmt.Errorf("cuda: event: %w", ErrClosed)
	}
	return e.ctx.check()
}

// Handle returns the raw event.
func (e *Event) Handle() CUevent {
	if e == nil || e.event == nil {
		return 0
	}
	return e.h
}

// Record marks the event at the current end of the stream.
func (e *Event) Record(s *Stream) error {
	if err := checkEvent(e); err != nil {
		return err
	}
	if err := checkStream(s); err != nil {
		return err
	}
	if s.ctx != e.ctx {
		return ErrWrongContext
	}
	return s.use(func(h CUstream) error { return inEventRecord(e.ctx.h, e.h, h) })
}

// Query reports whether the GPU has reached the event.
func (e *Event) Query() (bool, error) {
	if err := checkEvent(e); err != nil {
		return false, err
	}
	return ready(inEventQuery(e.ctx.h, e.h))
}

// Synchronize waits until the GPU reaches the event: it polls briefly, then yields,
// then blocks the thread, holding no lock meanwhile.
func (e *Event) Synchronize() error {
	if err := checkEvent(e); err != nil {
		return err
	}
	resource.Drain()
	return wait(func() (bool, error) { return ready(inEventQuery(e.ctx.h, e.h)) },
		func() error { return e.ctx.sleepOn(nil, e.h) })
}

// Elapsed returns the GPU time from start to end; both must be timing events that
// have completed.
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
	var ms float32
	if err := EventElapsedTime(&ms, start.h, end.h); err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// Close destroys the event (it does not wait). Closing again returns ErrClosed.
func (e *Event) Close() error {
	if e == nil || e.event == nil {
		return fmt.Errorf("%w: nil *cuda.Event", ErrInvalidArgument)
	}
	e.closed.Store(true)
	err := e.reg.Release()
	runtime.KeepAlive(e.event) // the finalizer must not run while Release does
	if errors.Is(err, resource.ErrReleased) {
		return fmt.Errorf("cuda: event: %w", ErrClosed)
	}
	return err
}
