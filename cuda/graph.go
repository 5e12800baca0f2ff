package cuda

import (
	"errors"
	"fmt"
	"sync"

	"github.com/gocuda/gocuda/cuda/cudaraw"
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
//
// The files: graph.go holds the Graph, graph_capture.go the capture,
// graph_build.go the graphs built node by node, graph_lease.go the leases,
// graph_exec.go the executables, graph_host.go the host nodes' Go functions,
// graph_cond.go the conditional nodes and their bodies.

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
	// The body graphs of conditional nodes (graph_cond.go): root is the graph that
	// owns the body (which shares its hold, lock and leases), body the CUgraph,
	// owned by its node; own is nil. conds are a root's conditions.
	root  *graphState
	body  cudaraw.CUgraph
	conds map[Condition]bool
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
	g.g.top().mu.Lock() // nodes may be being added
	defer g.g.top().mu.Unlock()
	return len(g.g.lease.items)
}

// enter holds g open (until st.hold.exit), or fails for a nil or closed graph.
func (g *Graph) enter() (st *graphState, err error) {
	if g == nil || g.g == nil {
		return nil, fmt.Errorf("%w: nil graph", ErrInvalidArgument)
	}
	if !g.g.top().hold.enter() {
		return nil, fmt.Errorf("cuda: graph: %w", ErrClosed)
	}
	return g.g, nil
}

// Instantiate makes an executable graph of g (cuGraphInstantiateWithFlags, freeing
// the graph's own allocations at each launch so that it can be launched again). The
// Exec keeps the memory g uses for itself: it may outlive g.
func (g *Graph) Instantiate() (*Exec, error) {
	if err := g.refuseBody("instantiating"); err != nil {
		return nil, err
	}
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
	if err := g.refuseBody("closing"); err != nil {
		return err
	}
	if g == nil || g.g == nil || !g.g.hold.close() {
		return fmt.Errorf("cuda: graph: %w", ErrClosed)
	}
	st := g.g
	return errors.Join(st.own.Close(), st.lease.reg.Release())
}
