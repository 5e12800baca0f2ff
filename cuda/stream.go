package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocuda/gocuda/resource"
)

// Stream is a CUDA stream: an ordered queue of GPU work. Streams are non-blocking
// (they do not synchronize with the legacy default stream). A Stream is safe for
// concurrent use; Close waits for nothing and returns at once.
type Stream struct {
	*stream
}

// stream is the part of Stream that buffers point at and the finalizer watches.
type stream struct {
	ctx *Context
	h   CUstream

	// mu guards h against Close while work is being queued: enqueuing takes the read
	// lock (never while waiting for the GPU), Close the write lock.
	mu     sync.RWMutex
	closed bool
	// gen counts the stream's lives: buffers remember the generation they were last
	// used in, and a buffer whose generation is past finds the stream's final event.
	gen atomic.Uint64
	// final is recorded when the stream is destroyed: work queued on it before then
	// is complete once final is.
	final *Event
	// cache holds device blocks freed on the stream, for its next allocations.
	cache devCache

	reg *resource.Registration
}

// StreamOption configures NewStream.
type StreamOption func(*streamConfig)

type streamConfig struct {
	priority int
	blocking bool
}

// WithPriority sets the stream's priority: lower numbers are higher priorities; see
// Context.StreamPriorityRange. Values outside the range are clamped by the driver.
func WithPriority(p int) StreamOption { return func(c *streamConfig) { c.priority = p } }

// WithLegacySync makes the stream synchronize with the legacy default stream (it is
// created without CU_STREAM_NON_BLOCKING). Few programs want this.
func WithLegacySync() StreamOption { return func(c *streamConfig) { c.blocking = true } }

// NewStream creates a stream in the context.
func (c *Context) NewStream(opts ...StreamOption) (*Stream, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	cfg := streamConfig{}
	for _, o := range opts {
		o(&cfg)
	}
	s, err := newStream(c, !cfg.blocking, cfg.priority)
	if err != nil {
		return nil, err
	}
	return &Stream{s}, nil
}

// NewStream creates a stream in the primary context of device 0.
func NewStream(opts ...StreamOption) (*Stream, error) {
	c, err := Device(0).Context()
	if err != nil {
		return nil, err
	}
	return c.NewStream(opts...)
}

func newStream(c *Context, nonBlocking bool, priority int) (*stream, error) {
	resource.Drain()
	var flags uint32
	if nonBlocking {
		flags = uint32(CU_STREAM_NON_BLOCKING)
	}
	s := &stream{ctx: c}
	if err := inStreamCreateWithPriority(c.h, &s.h, flags, int32(priority)); err != nil {
		return nil, fmt.Errorf("cuda: creating a stream: %w", err)
	}
	s.reg = resource.ResourceFinalizerErr((*stream).destroy, s, false,
		resource.Kind("cuStreamDestroy"), resource.WithContext(c.res()), resource.CallerSkip(2))
	return s, nil
}

// StreamPriorityRange returns the context's stream priorities: least (the default)
// and greatest.
func (c *Context) StreamPriorityRange() (least, greatest int, err error) {
	if err := c.check(); err != nil {
		return 0, 0, err
	}
	var l, g int32
	if err := inCtxGetStreamPriorityRange(c.h, &l, &g); err != nil {
		return 0, 0, err
	}
	return int(l), int(g), nil
}

// Handle returns the raw stream, for the raw layer and the other libraries
// (cublas.SetStream). Keep the Stream reachable while the handle is in use.
func (s *Stream) Handle() CUstream {
	if s == nil || s.stream == nil {
		return 0
	}
	return s.h
}

// Context returns the stream's context.
func (s *Stream) Context() *Context { return s.ctx }

// use runs f with the stream's handle under the read lock: f must only enqueue work.
func (s *stream) use(f func(h CUstream) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return fmt.Errorf("cuda: stream: %w", ErrClosed)
	}
	return f(s.h)
}

func checkStream(s *Stream) error {
	if s == nil || s.stream == nil {
		return fmt.Errorf("%w: nil *cuda.Stream", ErrInvalidArgument)
	}
	return s.ctx.check()
}

// Query reports whether all work queued on the stream has finished.
func (s *Stream) Query() (bool, error) {
	if err := checkStream(s); err != nil {
		return false, err
	}
	var done bool
	err := s.use(func(h CUstream) error {
		var err error
		done, err = ready(inStreamQuery(s.ctx.h, h))
		return err
	})
	return done, err
}

// Synchronize waits until all work queued on the stream has finished. It polls
// briefly, then yields, then blocks its thread, so short waits do not pay a blocking
// wake-up and long ones do not burn a core; other goroutines keep launching
// meanwhile, and no lock of this package is held.
func (s *Stream) Synchronize() error {
	if err := checkStream(s); err != nil {
		return err
	}
	resource.Drain()
	// Short waits: poll the stream. Long ones: sleep on an event recorded on it, so
	// that the wait holds no lock (waiting on the stream itself would keep Close
	// out and, behind it, other goroutines' launches).
	var slow bool
	err := wait(s.Query, func() error { slow = true; return nil })
	if err != nil || !slow {
		return err
	}
	return s.ctx.sleepOn(s.stream, 0)
}

// WaitEvent makes work queued on the stream after this call wait until e completes
// on the GPU, without blocking the host: the cheap way to hand work between streams.
func (s *Stream) WaitEvent(e *Event) error {
	if err := checkStream(s); err != nil {
		return err
	}
	if err := checkEvent(e); err != nil {
		return err
	}
	if e.ctx != s.ctx {
		return ErrWrongContext
	}
	return s.use(func(h CUstream) error { return inStreamWaitEvent(s.ctx.h, h, e.h, 0) })
}

// Close destroys the stream. Work already queued still runs; buffers last used on
// the stream are freed after that work, through the final event recorded here. It
// returns at once (cuStreamDestroy does not wait). Closing again returns ErrClosed.
func (s *Stream) Close() error {
	if s == nil || s.stream == nil {
		return fmt.Errorf("%w: nil *cuda.Stream", ErrInvalidArgument)
	}
	err := s.reg.Release()
	runtime.KeepAlive(s.stream) // the finalizer must not run while Release does
	if errors.Is(err, resource.ErrReleased) {
		return fmt.Errorf("cuda: stream: %w", ErrClosed)
	}
	return err
}

// destroy records the final event and destroys the stream; it runs once, from Close
// or after the Stream became unreachable (then no buffer refers to it either).
func (s *stream) destroy() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.dropCache()
	s.gen.Add(1)
	if e, err := newEventIn(s.ctx, false); err == nil {
		if inEventRecord(s.ctx.h, e.h, s.h) == nil {
			s.final = e
		} else {
			e.Close()
		}
	}
	return inStreamDestroy(s.ctx.h, s.h)
}

// ready turns CUDA_ERROR_NOT_READY into false and success into true.
func ready(err error) (bool, error) {
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrNotReady):
		return false, nil
	}
	return false, err
}

// Waiting strategy: poll for pollFor, then yield between polls until yieldFor, then
// block the thread in the driver (the primary context uses blocking sync).
const (
	pollFor  = 20 * time.Microsecond
	yieldFor = 500 * time.Microsecond
)

// wait waits until query reports done, polling, yielding, then calling block.
func wait(query func() (bool, error), block func() error) error {
	start := time.Now()
	for {
		done, err := query()
		if err != nil || done {
			return err
		}
		el := time.Since(start)
		switch {
		case el < pollFor:
		case el < yieldFor:
			runtime.Gosched()
		default:
			return block()
		}
	}
}
