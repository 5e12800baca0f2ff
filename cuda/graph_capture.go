package cuda

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/internal/rescore"
)

// Capture: Context.Capture (and Graph.CaptureInto) runs a function with a stream in
// capture mode behind the resource package's capture gate. Operations on a capturing
// stream lease what they use to the capture (captureSet), which the graph takes
// over, or are refused with a *CaptureError when a replay could not repeat them.

// Capture records the work f queues on s, a stream made for the capture, into a
// Graph, without running it. Operations on s are captured (kernel launches, copies
// and memsets between buffers, library calls through Enqueue); memory that f
// allocates on s comes from the context's pool, outside the graph, and is leased by
// the graph like every buffer its operations use, so that f may Close temporaries.
// Work queued on other streams during the capture runs as usual: other goroutines
// keep using the GPU.
//
// Operations that cannot be captured fail with a *CaptureError, and so does the
// capture: synchronizing or querying s, copying from a Go slice or into one on s
// (copy through a HostBuffer), launching an Exec on s. An error from f, or a capture
// the driver invalidated, also fails the capture with a *CaptureError wrapping it.
//
// Nothing is released while a capture is in progress (see the resource package's
// capture gate); Capture fails with resource.ErrReclaimInProgress wrapped in a
// *CaptureError while Reclaim runs.
func (c *Context) Capture(f func(s *Stream) error) (*Graph, error) {
	g, cs, err := c.runCapture(captureTarget{}, f)
	if err != nil {
		return nil, err
	}
	return &Graph{g: &graphState{ctx: c, own: cudaraw.OwnGraph(g), lease: cs.set.register()}}, nil
}

// captureTarget is where a capture goes: a new graph (into 0), or into an existing
// graph after deps, reporting the capture's last nodes in leaves.
type captureTarget struct {
	into   cudaraw.CUgraph
	deps   []cudaraw.CUgraphNode
	leaves []cudaraw.CUgraphNode
}

// runCapture captures f on a stream of its own behind the resource capture gate and
// returns the graph and what the capture leased (the caller takes the leases over).
func (c *Context) runCapture(t captureTarget, f func(s *Stream) error) (cudaraw.CUgraph, *captureSet, error) {
	if f == nil {
		return 0, nil, fmt.Errorf("%w: nil capture function", ErrInvalidArgument)
	}
	if err := c.check(); err != nil {
		return 0, nil, err
	}
	s, err := c.NewStream()
	if err != nil {
		return 0, nil, err
	}
	defer s.Close()
	if err := rescore.BeginCapture(); err != nil {
		return 0, nil, &CaptureError{Op: "capture", Err: err}
	}
	// Ended however f returns: the deferred releases run (those of leased memory are
	// postponed again: the capture's leases are counted already).
	defer rescore.EndCapture()
	cs := new(captureSet)
	g, err := c.capture(s, cs, &t, f)
	if err != nil {
		_ = cs.set.end() // a capture that failed owns nothing
		return 0, nil, err
	}
	if t.into != 0 {
		cs.leaves = t.leaves
	}
	return g, cs, nil
}

// capture runs f between the driver's begin and end of capture on s.
func (c *Context) capture(s *Stream, cs *captureSet, t *captureTarget, f func(s *Stream) error) (g cudaraw.CUgraph, err error) {
	// The context stays entered for the capture: closing it waits for the end.
	if err := c.enter(); err != nil {
		return 0, err
	}
	defer c.exit()
	s.capture.Store(cs)
	defer s.capture.Store(nil)
	var begin error
	if t.into == 0 {
		begin = cudaraw.StreamBeginCaptureIn(c.h, s.h, cudaraw.CU_STREAM_CAPTURE_MODE_RELAXED)
	} else {
		var deps *cudaraw.CUgraphNode
		if len(t.deps) > 0 {
			deps = &t.deps[0]
		}
		begin = c.Locked(func() error {
			return cudaraw.StreamBeginCaptureToGraph(s.h, t.into, deps, nil, uint64(len(t.deps)), cudaraw.CU_STREAM_CAPTURE_MODE_RELAXED)
		})
	}
	if begin != nil {
		return 0, &CaptureError{Op: "capture", Err: begin}
	}
	// A graph of the caller's (into) is never destroyed here.
	destroy := func() {
		if g != 0 && t.into == 0 {
			_ = cudaraw.GraphDestroyIn(c.h, g)
		}
	}
	ended := false
	end := func() error {
		ended = true
		return cudaraw.StreamEndCaptureIn(c.h, s.h, &g)
	}
	defer func() {
		if !ended { // f panicked: end the capture before the panic goes on
			if end() == nil {
				destroy()
			}
		}
	}()
	ferr := f(s)
	if ferr == nil && t.into != 0 {
		ferr = captureLeaves(c, s, t)
	}
	endErr := end()
	cs.mu.Lock()
	refused := cs.err
	cs.mu.Unlock()
	if ferr == nil && endErr == nil && refused == nil {
		return g, nil
	}
	if endErr == nil {
		destroy()
	}
	var ce *CaptureError
	switch {
	case ferr != nil && errors.As(ferr, &ce):
		return 0, ferr
	case ferr != nil:
		return 0, &CaptureError{Op: "capture", Err: ferr}
	case refused != nil:
		return 0, refused
	}
	return 0, &CaptureError{Op: "capture", Err: endErr}
}

// captureLeaves sets t.leaves to the nodes the capture on s ended with (the
// dependencies of whatever s would queue next).
func captureLeaves(c *Context, s *Stream, t *captureTarget) error {
	return c.Locked(func() error {
		var status cudaraw.CUstreamCaptureStatus
		var deps *cudaraw.CUgraphNode
		var n uint64
		if err := cudaraw.StreamGetCaptureInfo(s.h, &status, nil, nil, &deps, nil, &n); err != nil {
			return err
		}
		if n > 0 {
			t.leaves = append([]cudaraw.CUgraphNode(nil), unsafe.Slice(deps, n)...)
		}
		return nil
	})
}

// CaptureError is the error of an operation refused during a capture, because
// queuing it on a capturing stream would invalidate the capture or make replays
// unsafe (a host synchronization, a copy into Go memory), or of a capture that
// failed as a whole. It wraps the cause, if any.
type CaptureError struct {
	Op  string // the operation refused, or "capture"
	Err error  // the cause, or nil
}

// Error describes the refused operation and its cause.
func (e *CaptureError) Error() string {
	msg := "cuda: capture: " + e.Op
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the cause.
func (e *CaptureError) Unwrap() error { return e.Err }

// errNotCapturable is the cause of refusals of operations that cannot be replayed.
var errNotCapturable = errors.New("not allowed while the stream is capturing")

// captureSet is what a capture in progress collected (stream.capture): its leases,
// without a registration until the capture becomes a graph's.
type captureSet struct {
	mu     sync.Mutex
	set    leaseSet
	err    error                 // the first operation refused
	leaves []cudaraw.CUgraphNode // the last nodes of a capture into a graph
}

// add leases m (an allocation, not a view) for the capture; the caller holds m.
func (cs *captureSet) add(m *memBase, write bool) {
	cs.mu.Lock()
	cs.set.add(m, write)
	cs.mu.Unlock()
}

// leaseIfCapturing runs add with the set of the capture t records, if any.
func leaseIfCapturing(t *stream, add func(*leaseSet)) {
	if cs := t.capture.Load(); cs != nil {
		cs.mu.Lock()
		add(&cs.set)
		cs.mu.Unlock()
	}
}

// leaseEventIfCapturing leases e for the capture t records, if any; the caller
// holds e.
func leaseEventIfCapturing(t *stream, e *event) {
	leaseIfCapturing(t, func(ls *leaseSet) { ls.addEvent(e) })
}

// leaseModuleIfCapturing leases m for the capture t records, if any; the caller
// holds m's read lock, m open.
func leaseModuleIfCapturing(t *stream, m *Module) {
	leaseIfCapturing(t, func(ls *leaseSet) { ls.addModule(m) })
}

// refuse records and returns the refusal of op: the capture fails with it too,
// even if the capturing function ignores it.
func (cs *captureSet) refuse(op string) error {
	err := &CaptureError{Op: op, Err: errNotCapturable}
	cs.mu.Lock()
	if cs.err == nil {
		cs.err = err
	}
	cs.mu.Unlock()
	return err
}

// refuseIfCapturing returns the refusal of op if t is capturing.
func refuseIfCapturing(t *stream, op string) error {
	if cs := t.capture.Load(); cs != nil {
		return cs.refuse(op)
	}
	return nil
}
