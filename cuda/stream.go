package cuda

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/internal/errs"
	"github.com/gocuda/gocuda/internal/streamslot"
	"github.com/gocuda/gocuda/resource"
)

// Stream is a CUDA stream: an ordered queue of GPU work. Streams are non-blocking
// (they do not synchronize with the legacy default stream).
//
// A Stream is safe for concurrent use. Calls hold it while they queue work on it:
// Close waits for them (never for the GPU) and returns at once; calls after Close
// fail with ErrClosed. The Stream keeps its Context alive. A Stream of
// Context.AcquireStream or Context.WithStream is lent by the context's pool: Close
// gives it back, and the Stream is closed from then on, whoever holds the stream
// next.
type Stream struct {
	*stream
	ctx *Context
	// lease is the generation of stream that this Stream holds, for a stream of a
	// pool (AcquireStream); 0 for NewStream's. Once the holder releases it, the
	// stream moves on and this Stream is closed. tok is the lease's token until
	// Close (see leaseToken).
	lease uint64
	tok   atomic.Pointer[leaseToken]
}

// stream is the part of Stream that buffers point at and the finalizer watches.
type stream struct {
	cs *ctxState
	h  cudaraw.CUstream

	// mu guards h against Close while work is being queued: enqueuing takes the read
	// lock (never while waiting for the GPU), Close the write lock.
	mu sync.RWMutex
	// closed is written under mu's write lock; it is atomic so that checks that
	// need no lock (CheckEnqueue) read it without one.
	closed atomic.Bool
	// gen counts the stream's lives (from 1): a pooled stream moves to a new
	// generation when its holder releases it, any stream when it is destroyed.
	// Memory remembers the generation of its uses: a use in a generation up to
	// doneGen is known complete (a pooled stream is handed out again only once its
	// work is done), one in a past generation of a destroyed stream is waited for
	// through the stream's final event.
	gen     atomic.Uint64
	doneGen atomic.Uint64
	// final is recorded when the stream is destroyed: work queued on it before then
	// is complete once final is.
	final *event
	// cache holds device blocks freed on the stream, for its next allocations.
	cache devCache

	// waits counts the hand-off waits queued on the stream (tests).
	waits atomic.Int64

	// kernel is the last kernel launched on the stream, which a fault seen there
	// names (FaultError.Kernel).
	kernel atomic.Pointer[Function]

	// dirty is set when work is queued through a pooled stream's lease (or its
	// handle is taken): the pool queries a stream for completion before lending
	// it again only then.
	dirty atomic.Bool

	priority int         // as created (resolved for the context's range)
	nonBlock bool        // created with CU_STREAM_NON_BLOCKING
	pool     *streamPool // the pool that lends it; nil for NewStream's

	reg *resource.Registration // nil for the context's own streams

	// capture is set while Context.Capture records the stream's work (graph_capture.go).
	capture atomic.Pointer[captureSet]

	// Home holds the library handles the stream keeps for its next library call
	// (internal/streamslot, whose Of finds them from a *Stream through it);
	// destroy gives them back to their caches.
	streamslot.Home
}

// StreamOption configures a stream: one made by NewStream, or, for AcquireStream and
// WithStream, the pool it is taken from (a pool per priority and sync mode).
type StreamOption func(*streamConfig)

type streamConfig struct {
	priority Priority
	blocking bool
}

// configOf applies opts. Without options nothing escapes: the common call
// allocates nothing.
func configOf(opts []StreamOption) streamConfig {
	if len(opts) == 0 {
		return streamConfig{}
	}
	return applyOptions(opts)
}

func applyOptions(opts []StreamOption) streamConfig {
	cfg := new(streamConfig)
	for _, o := range opts {
		o(cfg)
	}
	return *cfg
}

// WithPriority sets the stream's priority: High, Normal (the default), Low, or a
// number in Context.StreamPriorityRange (lower numbers are higher priorities);
// numbers outside the range are clamped to it.
func WithPriority(p Priority) StreamOption { return func(c *streamConfig) { c.priority = p } }

// WithLegacySync makes the stream synchronize with the legacy default stream (it is
// created without CU_STREAM_NON_BLOCKING). Few programs want this.
func WithLegacySync() StreamOption { return func(c *streamConfig) { c.blocking = true } }

// NewStream creates a stream in the context.
func (c *Context) NewStream(opts ...StreamOption) (*Stream, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	cfg := configOf(opts)
	prio, err := c.resolvePriority(cfg.priority)
	if err != nil {
		return nil, err
	}
	resource.Drain()
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.exit()
	s, err := newStream(c.ctxState, !cfg.blocking, prio, true)
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
		flags = uint32(cudaraw.CU_STREAM_NON_BLOCKING)
	}
	s := &stream{cs: c, priority: priority, nonBlock: nonBlocking}
	s.gen.Store(1)
	if err := cudaraw.StreamCreateWithPriorityIn(c.h, &s.h, flags, int32(priority)); err != nil {
		return nil, fmt.Errorf("cuda: creating a stream: %w", err)
	}
	if register {
		s.reg = resource.ResourceFinalizer((*stream).destroy, s, false,
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
	if err := cudaraw.CtxGetStreamPriorityRangeIn(c.h, &l, &g); err != nil {
		return 0, 0, err
	}
	return int(l), int(g), nil
}

// Handle returns the raw stream, for the raw layer and the other libraries
// (cublasraw.SetStream); raw work with the package's memory goes through Enqueue,
// which hands f the same handle. Keep the Stream open while the handle is in use: as
// os.File.Fd, Handle returns no live handle after Close — 0, for a nil, zero or
// closed stream and for a pooled stream given back (whose handle may be lent to
// another holder by then); the raw layer reads 0 as the legacy default stream. On a
// pooled stream (AcquireStream, WithStream) it marks the stream as having work the
// package does not see: the pool lends it again only once that work is done.
func (s *Stream) Handle() cudaraw.CUstream {
	if s == nil || s.stream == nil {
		return 0
	}
	t := s.stream
	if t.closed.Load() || s.lease != 0 && t.gen.Load() != s.lease {
		return 0
	}
	if s.lease != 0 {
		s.dirty.Store(true) // work may be queued through the handle
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

// use runs f with the stream's handle under the read lock, unless the stream is
// closed or, for a pooled stream, released: f must only enqueue work. The caller is
// in the stream's context.
func (s *Stream) use(f func(h cudaraw.CUstream) error) error {
	if err := lockOpen(s, s.stream); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	return f(s.h)
}

// use runs f with the stream's handle under the read lock: f must only enqueue work.
// The caller is in the stream's context.
func (s *stream) use(f func(h cudaraw.CUstream) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return fmt.Errorf("cuda: stream: %w", ErrClosed)
	}
	return f(s.h)
}

// lockOpen takes t's read lock for queuing work on it, or fails with ErrClosed if t
// is closed or, with s, if s is a released pooled stream (t is s's stream, or any of
// the package's streams with s nil). On success the caller unlocks t.mu.
func lockOpen(s *Stream, t *stream) error {
	t.mu.RLock()
	if s != nil && s.lease != 0 {
		if t.closed.Load() || t.gen.Load() != s.lease {
			t.mu.RUnlock()
			return errStreamClosed
		}
		if !t.dirty.Load() {
			t.dirty.Store(true)
		}
		return nil
	}
	if t.closed.Load() {
		t.mu.RUnlock()
		return errStreamClosed
	}
	return nil
}

func checkStream(s *Stream) error {
	if s == nil || s.stream == nil || s.ctx == nil {
		return errNilStream
	}
	return s.cs.check()
}

// Query reports whether all work queued on the stream has finished.
func (s *Stream) Query() (bool, error) {
	if err := checkStream(s); err != nil {
		return false, err
	}
	if err := refuseIfCapturing(s.stream, "querying or synchronizing the capturing stream"); err != nil {
		return false, err
	}
	if err := s.cs.enter(); err != nil {
		return false, err
	}
	defer s.cs.exit()
	var done bool
	err := s.use(func(h cudaraw.CUstream) error {
		var err error
		done, err = ready(cudaraw.StreamQueryIn(s.cs.h, h))
		return err
	})
	return done, s.cs.faulted(err, "a stream's query or wait", s.stream)
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
	leaseEventIfCapturing(s.stream, e.event)
	err := s.use(func(h cudaraw.CUstream) error { return cudaraw.StreamWaitEventIn(s.cs.h, h, e.h, 0) })
	if err == nil && streamCheck.on.Load() {
		checkWait(s.stream, e.event)
	}
	return err
}

// Close destroys the stream, or gives a pooled stream back to its pool. Work already
// queued still runs; buffers last used on the stream are freed after that work,
// through the final event recorded here (a pooled stream is lent again only once its
// work is done). It returns at once (cuStreamDestroy does not wait). Closing again,
// or closing a nil Stream, returns an error matching ErrClosed and
// resource.ErrReleased.
func (s *Stream) Close() error {
	if s != nil && s.lease != 0 {
		return s.closeLease()
	}
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
	s.closed.Store(true)
	streamslot.Of(s).Close()
	if err := s.cs.enter(); err != nil {
		return resource.ErrContextDestroyed // destroyed with its context
	}
	defer s.cs.exit()
	s.dropCache()
	s.gen.Add(1)
	if e, err := newEvent(s.cs, false); err == nil {
		if cudaraw.EventRecordIn(s.cs.h, e.h, s.h) == nil {
			s.final = e
		} else {
			_ = e.reg.Release()
		}
	}
	return cudaraw.StreamDestroyIn(s.cs.h, s.h)
}

// ready turns CUDA_ERROR_NOT_READY into false and success into true.
func ready(err error) (bool, error) {
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, cudaraw.ErrNotReady):
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
	return waitContext(context.Background(), query, block)
}

// waitContext waits until query reports done, as wait does, but returns early with
// ctx's error once ctx is done. With a ctx that can be done, it sleeps between
// queries past the yielding phase (50 µs growing to 1 ms) instead of blocking in
// the driver (block), so that it notices ctx.
func waitContext(ctx context.Context, query func() (bool, error), block func() error) error {
	start := time.Now()
	sleep := 50 * time.Microsecond
	var timer *time.Timer
	for {
		done, err := query()
		if err != nil || done {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("cuda: waiting for the GPU: %w", context.Cause(ctx))
		}
		el := time.Since(start)
		switch {
		case el < pollFor:
		case el < yieldFor:
			runtime.Gosched()
		case ctx.Done() == nil:
			return block()
		default:
			if timer == nil {
				timer = time.NewTimer(sleep)
				defer timer.Stop()
			} else {
				timer.Reset(sleep)
			}
			select {
			case <-timer.C:
			case <-ctx.Done():
				return fmt.Errorf("cuda: waiting for the GPU: %w", context.Cause(ctx))
			}
			sleep = min(2*sleep, time.Millisecond)
		}
	}
}

// SynchronizeContext is Synchronize, returning early with ctx's error (wrapped) once
// ctx is done; the GPU work goes on.
func (s *Stream) SynchronizeContext(ctx context.Context) error {
	if ctx.Done() == nil {
		return s.Synchronize()
	}
	if err := checkStream(s); err != nil {
		return err
	}
	resource.Drain()
	return waitContext(ctx, s.Query, nil)
}
