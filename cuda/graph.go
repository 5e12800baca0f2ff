package cuda

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/internal/rescore"
	"github.com/gocuda/gocuda/resource"
)

// Graphs: Context.Capture records the work a function queues on a stream into a
// Graph; Graph.Instantiate makes an Exec, which Exec.Launch replays on any stream of
// the context.
//
// Leases. A graph's operations name memory by address, so the memory must outlive
// every replay. While capturing, every buffer an operation on the capture stream
// uses is leased: the Graph, and every Exec made from it, keep the buffer reachable
// and hold a lease on it. Releasing leased memory (Close, or the release after it
// becomes unreachable) shuts it for new operations at once — they fail with
// ErrClosed — but postpones freeing it until the last lease ends (Graph.Close,
// Exec.Close, or their own release once they are unreachable). The free is then
// ordered after the last replay by the hand-off, as after any other use.
//
// Hand-off. A capture queues nothing to run, so it neither waits for nor records
// uses; Exec.Launch does, for every leased buffer, as a kernel launch does for its
// arguments: a replay waits on the GPU for the buffers' conflicting uses on other
// streams, and later work waits for the replay.
//
// During a capture nothing is released (the resource package's capture gate):
// releases, including explicit ones on other goroutines, wait until it ends, so that
// no free invalidates it.

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

// leased is memory a capture used, and whether any of its uses wrote it.
type leased struct {
	m     *memBase
	write bool
}

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

// leaseState counts the leases on an allocation or a module and keeps its release
// while there are any.
type leaseState struct {
	mu       sync.Mutex
	n        int
	pending  func() error // the postponed release
	blocking bool         // pending may wait for the GPU
}

// add adds a lease; the caller holds the object (it is not released).
func (ls *leaseState) add() {
	ls.mu.Lock()
	ls.n++
	ls.mu.Unlock()
}

// postpone keeps release (of the blocking class if blocking) for the end of the last
// lease and reports true, if there are leases.
func (ls *leaseState) postpone(release func() error, blocking bool) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.n == 0 {
		return false
	}
	ls.pending, ls.blocking = release, blocking
	return true
}

// end ends a lease. When it was the last, the postponed release runs: a
// non-blocking one now, a blocking one (which may wait for the GPU) through a
// registration of its own, dropped at once, so that it runs in resource.Reclaim as
// that class does.
func (ls *leaseState) end() error {
	ls.mu.Lock()
	ls.n--
	var release func() error
	if ls.n == 0 {
		release, ls.pending = ls.pending, nil
	}
	blocking := ls.blocking
	ls.mu.Unlock()
	switch {
	case release == nil:
		return nil
	case blocking:
		resource.ResourceFinalizerErr(func(p *postponed) error { return p.release() }, &postponed{release}, true,
			resource.Kind("postponed release"))
		return nil
	}
	return release()
}

// addLease adds a lease on m, an allocation held by the caller (it is not freed).
func (m *memBase) addLease() {
	ls := m.lease.Load()
	if ls == nil {
		m.lease.CompareAndSwap(nil, new(leaseState))
		ls = m.lease.Load()
	}
	ls.add()
}

// postpone is called first by m's release, free (of the blocking class if
// blocking): it shuts m's hold, waiting for the operations queuing work on it (one
// of which may be leasing it), and then, if m is leased, keeps free for the end of
// the last lease and reports true.
func (m *memBase) postpone(free func() error, blocking bool) bool {
	m.hold.close()
	ls := m.lease.Load()
	return ls != nil && ls.postpone(free, blocking)
}

// endLease ends a lease on m.
func (m *memBase) endLease() error { return m.lease.Load().end() }

// postponed carries a blocking release past the end of the last lease.
type postponed struct{ release func() error }

// leaseSet is the leases of one Graph or Exec (or of a capture in progress, not
// registered). A registered set ends them through its own release registration: at
// Close, or, once unreachable, in the non-blocking lane (the postponed releases are
// stream-ordered frees and event destroys, which do not wait for the GPU, or go to
// Reclaim).
type leaseSet struct {
	items  []leased
	index  map[*memBase]int // items by memory, once add is used
	mods   []*Module
	events []*event
	fns    map[*hostFunc]int // host node functions, by how many nodes call them
	reg    *resource.Registration
}

// addHost leases hf to ls for n more nodes.
func (ls *leaseSet) addHost(hf *hostFunc, n int) {
	if ls.fns == nil {
		ls.fns = map[*hostFunc]int{}
	}
	if ls.fns[hf] == 0 {
		hf.update(1, 0)
	}
	ls.fns[hf] += n
}

// queueHost counts the calls a launch of ls's graph queues (n = 1), or takes them
// back when the launch failed (n = -1).
func (ls *leaseSet) queueHost(n int) {
	for hf, k := range ls.fns {
		hf.update(0, n*k)
	}
}

// add leases m (an allocation held by the caller) to ls, unless ls has it already
// (then a write is remembered).
func (ls *leaseSet) add(m *memBase, write bool) {
	if ls.index == nil {
		ls.index = make(map[*memBase]int, len(ls.items))
		for i, l := range ls.items {
			ls.index[l.m] = i
		}
	}
	if i, ok := ls.index[m]; ok {
		ls.items[i].write = ls.items[i].write || write
		return
	}
	m.addLease()
	ls.index[m] = len(ls.items)
	ls.items = append(ls.items, leased{m, write})
}

// addModule leases m (held open by the caller) to ls, unless ls has it already.
func (ls *leaseSet) addModule(m *Module) { addOnce(&ls.mods, m, &m.lease) }

// addEvent leases e (held by the caller) to ls, unless ls has it already.
func (ls *leaseSet) addEvent(e *event) { addOnce(&ls.events, e, &e.lease) }

// addOnce appends x to *list and adds a lease on it, unless the list has it.
func addOnce[T comparable](list *[]T, x T, lease *leaseState) {
	for _, y := range *list {
		if y == x {
			return
		}
	}
	lease.add()
	*list = append(*list, x)
}

// merge leases to ls what o leases (o's own leases are untouched).
func (ls *leaseSet) merge(o *leaseSet) {
	for _, l := range o.items {
		ls.add(l.m, l.write)
	}
	for _, m := range o.mods {
		ls.addModule(m)
	}
	for _, e := range o.events {
		ls.addEvent(e)
	}
	for hf, n := range o.fns {
		ls.addHost(hf, n)
	}
}

// register makes a registered set of what ls leases, taking its leases over.
func (ls *leaseSet) register() *leaseSet {
	out := &leaseSet{items: ls.items, index: ls.index, mods: ls.mods, events: ls.events, fns: ls.fns}
	out.reg = resource.ResourceFinalizerErr((*leaseSet).end, out, false, resource.Kind("graph lease"))
	return out
}

// clone returns a registered set with leases of its own on what ls leases (which
// the caller holds: ls's leases keep it all).
func (ls *leaseSet) clone() *leaseSet {
	var out leaseSet
	out.merge(ls)
	return out.register()
}

// end ends every lease of ls.
func (ls *leaseSet) end() error {
	var errs []error
	for _, l := range ls.items {
		if err := l.m.endLease(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, m := range ls.mods {
		if err := m.lease.end(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, e := range ls.events {
		if err := e.lease.end(); err != nil {
			errs = append(errs, err)
		}
	}
	for hf := range ls.fns {
		hf.update(-1, 0)
	}
	ls.items, ls.index, ls.mods, ls.events, ls.fns = nil, nil, nil, nil, nil
	return errors.Join(errs...)
}

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

// Graph is captured work (Context.Capture), to be instantiated and replayed. It keeps
// the memory its operations use (see Capture) until Close, or until it is
// unreachable, and then releases the CUgraph in the non-blocking lane.
//
// A Graph is safe for concurrent use: Instantiate may be called from several
// goroutines; Close waits for Instantiate calls in progress, and later calls fail
// with ErrClosed.
type Graph struct {
	g *graphState
}

type graphState struct {
	ctx  *Context
	own  *cudaraw.OwnedGraph
	hold hold
	// mu serializes changes to the graph (nodes added by hand) and its leases
	// with Instantiate and Update, which copy them.
	mu    sync.Mutex
	lease *leaseSet
}

// Context returns the context the graph was captured in.
func (g *Graph) Context() *Context {
	if g == nil || g.g == nil {
		return nil
	}
	return g.g.ctx
}

// Buffers returns the number of allocations the graph keeps (the memory its
// operations use).
func (g *Graph) Buffers() int {
	if g == nil || g.g == nil {
		return 0
	}
	g.g.mu.Lock() // nodes may be being added
	defer g.g.mu.Unlock()
	return len(g.g.lease.items)
}

// enter holds g open (until st.hold.exit), or fails for a nil or closed graph.
func (g *Graph) enter() (st *graphState, err error) {
	if g == nil || g.g == nil {
		return nil, fmt.Errorf("%w: nil graph", ErrInvalidArgument)
	}
	if !g.g.hold.enter() {
		return nil, fmt.Errorf("cuda: graph: %w", ErrClosed)
	}
	return g.g, nil
}

// Instantiate makes an executable graph of g (cuGraphInstantiateWithFlags, freeing
// the graph's own allocations at each launch so that it can be launched again). The
// Exec keeps the memory g uses for itself: it may outlive g.
func (g *Graph) Instantiate() (*Exec, error) {
	st, err := g.enter()
	if err != nil {
		return nil, err
	}
	defer st.hold.exit()
	st.mu.Lock()
	defer st.mu.Unlock()
	var e cudaraw.CUgraphExec
	if err := st.ctx.enter(); err != nil {
		return nil, err
	}
	err = cudaraw.GraphInstantiateWithFlagsIn(st.ctx.h, &e, st.own.Handle(), uint64(cudaraw.CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH))
	st.ctx.exit()
	if err != nil {
		return nil, fmt.Errorf("cuda: instantiating a graph: %w", err)
	}
	// g's leases keep what it uses: none was released.
	return &Exec{e: &execState{ctx: st.ctx, cs: st.ctx.ctxState, own: cudaraw.OwnGraphExec(e), h: e, lease: st.lease.clone()}}, nil
}

// Close releases the graph: its CUgraph now, and its leases on memory (memory closed
// meanwhile is freed once no Exec holds it either). Closing again returns an error
// that matches ErrClosed.
func (g *Graph) Close() error {
	if g == nil || g.g == nil || !g.g.hold.close() {
		return fmt.Errorf("cuda: graph: %w", ErrClosed)
	}
	st := g.g
	return errors.Join(st.own.Close(), st.lease.reg.Release())
}

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

// maxInlinePlans is how many leased buffers a Launch plans without allocating.
const maxInlinePlans = 16

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
	var inline [maxInlinePlans]planned
	plans := inline[:0]
	if len(items) > len(inline) {
		plans = make([]planned, 0, len(items))
	}
	var wait deps
	for _, l := range items {
		plans = append(plans, l.m.plan(s.stream, l.write, &wait))
	}
	if wait.n > 0 {
		if err := items[0].m.ms.handOff(&wait, s.stream); err != nil {
			return errHandOff(err)
		}
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
		return fmt.Errorf("cuda: launching a graph: %w", err)
	}
	for i, l := range items {
		l.m.record(s.stream, l.write, plans[i])
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
