package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocuda/gocuda/internal/errs"
	"github.com/gocuda/gocuda/resource"
)

// Stream is a CUDA stream: an ordered queue of GPU work. Streams are non-blocking
// (they do not synchronize with the legacy default stream).
//
// A Stream is safe for concurrent use. Calls hold it while they queue work on it:
// Close waits for them (never for the GPU) and returns at once; calls after Close
// fail with ErrClosed. The Stream keeps its Context alive.
type Stream struct {
	*stream
	ctx *Context
}

// stream is the part of Stream that buffers point at and the finalizer watches.
type stream struct {
	cs *ctxState
	h  CUstream

	// mu guards h against Close while work is being queued: enqueuing takes the read
	// lock (never while waiting for the GPU), Close the write lock.
	mu     sync.RWMutex
	closed bool
	// gen counts the stream's lives: buffers remember the generation they were last
	// used in, and a buffer whose generation is past finds the stream's final event.
	gen atomic.Uint64
	// final is recorded when the stream is destroyed: work queued on it before then
	// is complete once final is.
	final *event
	// cache holds device blocks freed on the stream, for its next allocations.
	cache devCache

	reg *resource.Registration // nil for the context's own streams
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
	resource.Drain()
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.exit()
	s, err := newStream(c.ctxState, !cfg.blocking, cfg.priority, true)
	if err != nil {
		return nil, err
	}
	return &Stream{stream: s, ctx: c}, nil
}

// newStream creates a stream in c, which the caller has entered. The context's own
// streams (register false) get no release: they are destroyed with the context.
func newStream(c *ctxState, nonBlocking bool, priority int, register bool) (*stream, error) {
	var flags uint32
	if nonBlocking {
		flags = uint32(CU_STREAM_NON_BLOCKING)
	}
	s := &stream{cs: c}
	if err := inStreamCreateWithPriority(c.h, &s.h, flags, int32(priority)); err != nil {
		return nil, fmt.Errorf("cuda: creating a stream: %w", err)
	}
	if register {
		s.reg = resource.ResourceFinalizerErr((*stream).destroy, s, false,
			resource.Kind("cuStreamDestroy"), resource.WithContext(c.res()), resource.CallerSkip(2))
	}
	return s, nil
}

// StreamPriorityRange returns the context's stream priorities: least (the default)
// and greatest.
func (c *Context) StreamPriorityRange() (least, greatest int, err error) {
	if err := c.check(); err != nil {
		return 0, 0, err
	}
	if err := c.enter(); err != nil {
		return 0, 0, err
	}
	defer c.exit()
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

// Context returns the stream's context (nil for a nil or zero Stream).
func (s *Stream) Context() *Context {
	if s == nil {
		return nil
	}
	return s.ctx
}

// use runs f with the stream's handle under the read lock: f must only enqueue work.
// The caller is in the stream's context.
func (s *stream) use(f func(h CUstream) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return fmt.Errorf("cuda: stream: %w", ErrClosed)
	}
	return f(s.h)
}

func checkStream(s *Stream) error {
	if s == nil || s.stream == nil || s.ctx == nil {
		return fmt.Errorf("%w: nil or zero *cuda.Stream", ErrInvalidArgument)
	}
	return s.cs.check()
}

// Query reports whether all work queued on the stream has finished.
func (s *Stream) Query() (bool, error) {
	if err := checkStream(s); err != nil {
		return false, err
	}
	if err := s.cs.enter(); err != nil {
		return false, err
	}
	defer s.cs.exit()
	var done bool
	err := s.use(func(h CUstream) error {
		var err error
		done, err = ready(inStreamQuery(s.cs.h, h))
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
	if err := s.cs.enter(); err != nil {
		return err
	}
	defer s.cs.exit()
	return s.cs.sleepOn(s.stream, 0)
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
	if e.cs != s.cs {
		return fmt.Errorf("cuda: stream waiting for an event of another context: %w", ErrWrongContext)
	}
	if err := e.acquire(); err != nil {
		return err
	}
	defer e.leave()
	return s.use(func(h CUstream) error { return inStreamWaitEvent(s.cs.h, h, e.h, 0) })
}

// Close destroys the stream. Work already queued still runs; buffers last used on
// the stream are freed after that work, through the final event recorded here. It
// returns at once (cuStreamDestroy does not wait). Closing again, or closing a nil
// Stream, returns an error matching ErrClosed and resource.ErrReleased.
func (s *Stream) Close() error {
	if s == nil || s.stream == nil || s.reg == nil {
		return errs.Closed("cuda: stream")
	}
	err := s.reg.Release()
	runtime.KeepAlive(s.stream) // the finalizer must not run while Release does
	return closeError("cuda: stream", err)
}

// closeError maps the outcome of the release of the object named what to Close's:
// a second Close is errs.Closed, and an object whose context was destroyed went
// with it (nil). Every Close of the package goes through it.
func closeError(what string, err error) error {
	switch {
	case err == nil, errors.Is(err, resource.ErrContextDestroyed):
		return nil
	case errors.Is(err, resource.ErrReleased):
		return errs.Closed(what)
	}
	return err
}

// destroy records the final event and destroys the stream; it runs once, from Close
// or after the Stream became unreachable (then no buffer refers to it either).
func (s *stream) destroy() error {
	lockCounting(&s.mu)
	defer s.mu.Unlock()
	s.closed = true
	if err := s.cs.enter(); err != nil {
		return resource.ErrContextDestroyed // destroyed with its context
	}
	defer s.cs.exit()
	s.dropCache()
	s.gen.Add(1)
	if e, err := newEvent(s.cs, false); err == nil {
		if inEventRecord(s.cs.h, e.h, s.h) == nil {
			s.final = e
		} else {
			_ = e.reg.Release()
		}
	}
	return inStreamDestroy(s.cs.h, s.h)
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
