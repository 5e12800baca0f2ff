package cuda

import (
	"errors"
	"fmt"
	"sync"

	"github.com/gocuda/gocuda/cuda/cudaraw"
)

// Executable graphs: Exec (Graph.Instantiate), its Launch, which takes part in the
// hand-off for every buffer it leases, Update, and ExecCache, which keeps an Exec per
// key and updates it from a new capture at each call.

// Exec is an executable graph (Graph.Instantiate). It keeps the memory its graph
// uses until Close, or until it is unreachable.
//
// An Exec is safe for concurrent use: Launch may be called from several goroutines
// at once (the replays are ordered as their streams order them); Close waits for
// Launch calls in progress, and later calls fail with ErrClosed. Work already queued
// still runs.
type Exec struct {
	e *execState
}

type execState struct {
	ctx *Context
	own *cudaraw.OwnedGraphExec
	// cs and h are ctx.ctxState and own's handle, for Launch (which holds mu's read
	// lock, so own is not destroyed meanwhile) to reach without following pointers.
	cs *ctxState
	h  cudaraw.CUgraphExec
	// mu: Launch holds the read lock (and reads closed and lease under it); Close
	// and Update take the write lock, so they wait for the launches in progress.
	// One lock for both keeps a launch at two atomic operations of its own.
	mu     sync.RWMutex
	closed bool
	lease  *leaseSet
}

// Launch replays the graph on s (cuGraphLaunch), ordered with the other uses of the
// memory it uses: it waits on the GPU for their conflicting uses on other streams,
// and is recorded as their use on s (a write for the memory any captured operation
// wrote). It fails with ErrWrongContext for a stream of another context, and with a
// *CaptureError on a capturing stream.
func (e *Exec) Launch(s *Stream) error {
	if e == nil || e.e == nil {
		return fmt.Errorf("%w: nil executable graph", ErrInvalidArgument)
	}
	if err := checkStream(s); err != nil {
		return err
	}
	x := e.e
	c := s.cs
	if c != x.cs {
		return fmt.Errorf("cuda: launching a graph on a stream of another context: %w", ErrWrongContext)
	}
	if err := refuseIfCapturing(s.stream, "launching a graph"); err != nil {
		return err
	}
	if err := c.enter(); err != nil {
		return err
	}
	x.mu.RLock()
	err := x.launch(s)
	x.mu.RUnlock()
	c.exit()
	return err
}

// launch is Launch inside the context's hold and the executable's read lock.
func (x *execState) launch(s *Stream) error {
	if x.closed {
		return fmt.Errorf("cuda: executable graph: %w", ErrClosed)
	}
	// The leases keep the memory from being freed, as a hold would. The launch still
	// counts itself among each buffer's users (its hold's count, shut or not) from
	// before it plans until it has recorded: so that an operation on another stream
	// that plans before this launch and records after it does not take itself for
	// the buffer's only user and replace this replay's use with its own, which would
	// let the buffer be freed before the replay ran; and so that this launch can
	// tell when it is the only user and replace the uses of other streams (the
	// allocation's, say) instead of waiting for them again at every launch.
	items := x.lease.items
	for _, l := range items {
		l.m.hold.users.Add(enterTick)
	}
	defer func() {
		for _, l := range items {
			l.m.hold.users.Add(exitTick)
		}
	}()
	var p opPlan
	for _, l := range items {
		p.add(l.m, l.write)
	}
	p.plan(s.stream)
	if err := p.handOff(s.stream); err != nil {
		return err
	}
	if err := lockOpen(s, s.stream); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	hosts := len(x.lease.fns) > 0 // most graphs have no host nodes: no map iteration
	if hosts {
		x.lease.queueHost(1) // before the launch: its host nodes may run before it returns
	}
	if err := cudaraw.GraphLaunchIn(x.cs.h, x.h, s.h); err != nil {
		if hosts {
			x.lease.queueHost(-1)
		}
		return fmt.Errorf("cuda: launching a graph: %w", x.cs.faulted(err, "Exec.Launch", s.stream))
	}
	p.record(s.stream)
	if streamCheck.on.Load() && len(x.lease.raw) > 0 {
		checkRaw(x.lease.raw, s.stream, callSite()+" (Exec.Launch)")
	}
	return nil
}

// Close releases the executable graph (after the replays already queued) and its
// leases on memory. Closing again returns an error that matches ErrClosed.
func (e *Exec) Close() error {
	if e == nil || e.e == nil {
		return fmt.Errorf("cuda: executable graph: %w", ErrClosed)
	}
	x := e.e
	lockCounting(&x.mu)
	first := !x.closed
	x.closed = true
	x.mu.Unlock()
	if !first {
		return fmt.Errorf("cuda: executable graph: %w", ErrClosed)
	}
	return errors.Join(x.own.Close(), x.lease.reg.Release())
}

// Update makes e replay g instead of the graph it was made from, without
// instantiating again (cuGraphExecUpdate): g must have the same operations in the
// same order (a capture of the same code); their arguments — buffers, scalars,
// sizes of copies — may differ. e then holds g's memory instead of the memory of its
// former graph, which is freed (if closed) after the replays already queued. When the
// driver refuses the update the error wraps a *GraphUpdateError, and e is unchanged.
// Update waits for Launch calls in progress on other goroutines.
func (e *Exec) Update(g *Graph) error {
	if e == nil || e.e == nil || g == nil || g.g == nil {
		return fmt.Errorf("%w: nil graph", ErrInvalidArgument)
	}
	if err := g.refuseBody("updating an executable to"); err != nil {
		return err
	}
	x, st := e.e, g.g
	if x.ctx.ctxState != st.ctx.ctxState {
		return fmt.Errorf("cuda: updating a graph: %w", ErrWrongContext)
	}
	if !st.hold.enter() {
		return fmt.Errorf("cuda: graph: %w", ErrClosed)
	}
	defer st.hold.exit()
	st.mu.Lock()
	defer st.mu.Unlock()
	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		return fmt.Errorf("cuda: executable graph: %w", ErrClosed)
	}
	var info cudaraw.CUgraphExecUpdateResultInfo
	err := x.ctx.Locked(func() error { return cudaraw.GraphExecUpdate(x.own.Handle(), st.own.Handle(), &info) })
	if err != nil {
		x.mu.Unlock()
		if errors.Is(err, cudaraw.CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE) {
			err = &GraphUpdateError{Result: info.Result, Err: err}
		}
		return fmt.Errorf("cuda: updating a graph: %w", err)
	}
	old := x.lease
	x.lease = st.lease.clone() // st's leases keep what it uses: none was released
	x.mu.Unlock()
	return old.reg.Release()
}

// GraphUpdateError is the driver's refusal of Exec.Update: why (Result, e.g.
// CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED when the operations differ) and the
// error of cuGraphExecUpdate.
type GraphUpdateError struct {
	Result cudaraw.CUgraphExecUpdateResult
	Err    error
}

// Error names the driver's reason.
func (e *GraphUpdateError) Error() string {
	return fmt.Sprintf("graph update refused (%v): %v", e.Result, e.Err)
}

// Unwrap returns the error of cuGraphExecUpdate.
func (e *GraphUpdateError) Unwrap() error { return e.Err }

// ExecCache replays captured work through executables kept per key, so that code
// whose buffers or scalars change from call to call — but not its operations — pays
// a capture and an update (cuGraphExecUpdate) per call instead of an instantiation.
// The key names the captured function and whatever decides its operations (the
// shapes of its arguments, typically): captures under one key must queue the same
// operations in the same order, or each call instantiates anew.
//
// An ExecCache is safe for concurrent use; calls with the same key are serialized.
// Close releases its executables.
type ExecCache[K comparable] struct {
	ctx    *Context
	mu     sync.Mutex
	execs  map[K]*Exec
	closed bool
	stats  ExecCacheStats
}

// ExecCacheStats counts what an ExecCache did.
type ExecCacheStats struct {
	Captures       int // Launch calls that captured
	Instantiations int // executables made (first use of a key, or an update refused)
	Updates        int // executables updated in place
}

// NewExecCache returns an empty cache of executables of ctx.
func NewExecCache[K comparable](ctx *Context) *ExecCache[K] {
	return &ExecCache[K]{ctx: ctx, execs: map[K]*Exec{}}
}

// Launch captures f (Context.Capture) and replays it on s through the executable
// cached under key: updated in place when the driver accepts the new graph,
// instantiated anew otherwise.
func (c *ExecCache[K]) Launch(s *Stream, key K, f func(s *Stream) error) error {
	g, err := c.ctx.Capture(f)
	if err != nil {
		return err
	}
	defer g.Close() // the executable keeps what it needs
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("cuda: executable cache: %w", ErrClosed)
	}
	c.stats.Captures++
	e := c.execs[key]
	if e != nil {
		var ue *GraphUpdateError
		switch err := e.Update(g); {
		case err == nil:
			c.stats.Updates++
			return e.Launch(s)
		case !errors.As(err, &ue):
			return err
		}
		delete(c.execs, key)
		if err := e.Close(); err != nil {
			return err
		}
	}
	if e, err = g.Instantiate(); err != nil {
		return err
	}
	c.stats.Instantiations++
	c.execs[key] = e
	return e.Launch(s)
}

// Stats returns what the cache did so far.
func (c *ExecCache[K]) Stats() ExecCacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// Close releases the cached executables (after their queued replays). Closing again
// returns an error that matches ErrClosed.
func (c *ExecCache[K]) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("cuda: executable cache: %w", ErrClosed)
	}
	c.closed = true
	var errs []error
	for k, e := range c.execs {
		errs = append(errs, e.Close())
		delete(c.execs, k)
	}
	return errors.Join(errs...)
}
