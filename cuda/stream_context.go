package cuda

import (
	"context"

	"github.com/gocuda/gocuda/cuda/cudaraw"
)

// Streams carried in a context.Context: ContextWithStream and StreamFromContext, and
// WithStream, which runs a function with a stream of the context's pool and orders
// that stream's work with its caller's on the device.

// streamKey is the key of the streams a context.Context carries: a *streamNode.
type streamKey struct{}

// streamNode is a stream carried in a context.Context, above the streams that the
// callers further up carried (the streams they switched away from).
type streamNode struct {
	s    *Stream
	prev *streamNode
}

// ContextWithStream returns a copy of ctx that carries s: library calls deep in a
// call tree that take a context.Context queue their work on the caller's stream
// (StreamFromContext). WithStream sets it for the function it runs.
func ContextWithStream(ctx context.Context, s *Stream) context.Context {
	prev, _ := ctx.Value(streamKey{}).(*streamNode)
	return context.WithValue(ctx, streamKey{}, &streamNode{s, prev})
}

// StreamFromContext returns the stream that ctx carries, or nil.
func StreamFromContext(ctx context.Context) *Stream {
	if n, _ := ctx.Value(streamKey{}).(*streamNode); n != nil {
		return n.s
	}
	return nil
}

// WithStream runs f with a stream of the context's pool for the options' priority
// and kind, carried in f's context.Context, and returns the stream to the pool
// after f returns (or panics). If ctx carries a stream of this context with that
// priority and kind, f runs with it instead: nested calls share their caller's
// stream, and switching back to a priority that a caller further up had reuses that
// caller's stream.
//
// A switch (another stream than the one ctx carries) is ordered both ways on the
// device: the stream f gets first waits for the work queued on the caller's, and
// when f returns nil the caller's stream waits for f's work, so that work after
// WithStream runs after it. When f fails or panics, the caller's stream is not
// ordered after the failed work, and f's error (or panic) is what WithStream
// reports.
//
// The context.Context given to f carries the stream for the duration of f only.
// Waiting for a stream at the pool's limit honours ctx (see AcquireStream).
func (c *Context) WithStream(ctx context.Context, f func(ctx context.Context, s *Stream) error, opts ...StreamOption) error {
	if err := c.check(); err != nil {
		return err
	}
	p, err := c.streamPool(configOf(opts))
	if err != nil {
		return err
	}
	// prev is the caller's stream (nil if none, or another context's: nothing to
	// order with); found is a stream of this pool's priority and kind that the
	// caller or a caller further up carries.
	var prev, found *Stream
	if n, _ := ctx.Value(streamKey{}).(*streamNode); n != nil {
		if n.s != nil && n.s.stream != nil && n.s.cs == c.ctxState {
			prev = n.s
		}
		for ; n != nil && prev != nil; n = n.prev {
			x := n.s
			if x != nil && x.stream != nil && x.cs == c.ctxState && x.priority == p.priority && x.nonBlock == p.nonBlock {
				found = x
				break
			}
		}
	}
	if found != nil && found == prev {
		return f(ctx, prev)
	}
	s := found
	if s == nil {
		if s, err = p.acquire(ctx, c); err != nil {
			return err
		}
		defer s.Close()
	}
	if prev != nil {
		if err := c.orderStreams(s, prev); err != nil {
			return err
		}
	}
	if err := f(ContextWithStream(ctx, s), s); err != nil {
		return err
	}
	if prev != nil {
		return c.orderStreams(prev, s)
	}
	return nil
}

// orderStreams makes work queued on t from now on wait for the work queued on s so
// far, on the device.
func (c *Context) orderStreams(t, s *Stream) error {
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	ms, err := c.memory()
	if err != nil {
		return err
	}
	ev, err := ms.getHandoffEvent()
	if err != nil {
		return err
	}
	defer ms.putHandoffEvent(ev)
	if err := s.use(func(h cudaraw.CUstream) error { return cudaraw.EventRecordIn(c.h, ev, h) }); err != nil {
		return err
	}
	return t.use(func(h cudaraw.CUstream) error { return cudaraw.StreamWaitEventIn(c.h, h, ev, 0) })
}
