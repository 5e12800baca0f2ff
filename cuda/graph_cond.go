package cuda

import (
	"fmt"
	"unsafe"

	"github.com/gocuda/gocuda/cuda/cudaraw"
)

// Conditional nodes (CUDA 12.4 and later; switch nodes 12.8): a node that runs one of
// its body graphs, or one repeatedly, as a condition that kernels set on the GPU
// decides, so that a loop or a branch never returns to the host. Graph.NewCondition
// makes a condition, Graph.AddConditional the node and its bodies. A body is a
// *Graph that takes nodes as any graph does (the Add methods, CaptureInto), but it
// belongs to its node: it shares the hold, lock and leases of the graph that owns the
// node (its root), so the memory and modules its nodes use are leased as for the
// root's own nodes, and it is released with the root (its own Close, Instantiate and
// Update are refused).

// Condition is the condition of conditional nodes: a 64-bit handle made by
// Graph.NewCondition, which a kernel of the same graph takes as an argument (C type
// cudaGraphConditionalHandle, an unsigned long long) and sets on the GPU with
//
//	cudaGraphSetConditional(handle, value);
//
// The device function is a builtin of the CUDA compilers: with NVRTC, declare it
// before use (no header is needed, and none is linked):
//
//	extern "C" __device__ __cudart_builtin__ void CUDARTAPI cudaGraphSetConditional(
//		cudaGraphConditionalHandle handle, unsigned int value);
//
// (with nvcc, cuda_runtime.h declares it). Concurrent calls that set one condition
// are undefined: let one thread set it.
type Condition uint64

// ConditionalType is the kind of a conditional node.
type ConditionalType int

const (
	// If runs its first body once when the condition is non-zero, and its second
	// body (when it has two) when it is zero.
	If ConditionalType = ConditionalType(cudaraw.CU_GRAPH_COND_TYPE_IF)
	// While runs its one body as long as the condition is non-zero, testing it
	// before each iteration: a kernel of the body clears it to end the loop.
	While ConditionalType = ConditionalType(cudaraw.CU_GRAPH_COND_TYPE_WHILE)
	// Switch runs body n when the condition is n, and none when it is past the
	// last body (CUDA 12.8 and later).
	Switch ConditionalType = ConditionalType(cudaraw.CU_GRAPH_COND_TYPE_SWITCH)
)

// String returns the type's name.
func (t ConditionalType) String() string {
	switch t {
	case If:
		return "if"
	case While:
		return "while"
	case Switch:
		return "switch"
	}
	return fmt.Sprintf("ConditionalType(%d)", int(t))
}

// top returns the graph that holds st: st, or the root of a conditional body.
func (st *graphState) top() *graphState {
	if st.root != nil {
		return st.root
	}
	return st
}

// handle returns st's CUgraph: its own, or a body's (owned by its node).
func (st *graphState) handle() cudaraw.CUgraph {
	if st.root != nil {
		return st.body
	}
	return st.own.Handle()
}

// refuseBody returns an error for what (closing, instantiating ...) a conditional
// body, which is released and instantiated with the graph that holds it.
func (g *Graph) refuseBody(what string) error {
	if g != nil && g.g != nil && g.g.root != nil {
		return fmt.Errorf("%w: %s the body of a conditional node: it belongs to its graph", ErrInvalidArgument, what)
	}
	return nil
}

// NewCondition makes a condition for conditional nodes of g (or of bodies inside g).
// With assignDefault, every launch of an executable sets it to defaultValue before
// the graph runs; without, it keeps the value of the launch before, and a kernel
// must set it before the node that tests it. It fails with a *dl.SymbolError
// (dl.ErrSymbolNotFound) on a driver older than CUDA 12.4, which has no conditional
// nodes.
func (g *Graph) NewCondition(defaultValue uint32, assignDefault bool) (Condition, error) {
	st, err := g.enter()
	if err != nil {
		return 0, err
	}
	defer st.top().hold.exit()
	var flags uint32
	if assignDefault {
		flags = cudaraw.CU_GRAPH_COND_ASSIGN_DEFAULT
	}
	c := st.ctx
	top := st.top()
	top.mu.Lock()
	defer top.mu.Unlock()
	var h cudaraw.Cuuint64
	err = c.Locked(func() error {
		return cudaraw.GraphConditionalHandleCreate(&h, st.handle(), c.h, defaultValue, flags)
	})
	if err != nil {
		return 0, fmt.Errorf("cuda: creating a graph condition: %w", err)
	}
	if top.conds == nil {
		top.conds = map[Condition]bool{}
	}
	top.conds[Condition(h)] = true
	return Condition(h), nil
}

// AddConditional adds a conditional node of type t, tested by cond (a condition of
// g's), after deps, with n body graphs: 1 for While, 1 or 2 for If (then and else),
// at least 1 for Switch. It returns the node and its bodies, empty graphs to fill
// with the Add methods or CaptureInto (bodies take kernel, copy, memset, empty,
// child-graph and conditional nodes, all of g's context). The bodies belong to the
// node: see Condition for the kernels that set cond, and the package's graph
// documentation for the leases, which cover the bodies' nodes as g's own.
func (g *Graph) AddConditional(t ConditionalType, cond Condition, n int, deps ...Node) (Node, []*Graph, error) {
	if g == nil || g.g == nil {
		return Node{}, nil, fmt.Errorf("%w: nil graph", ErrInvalidArgument)
	}
	switch {
	case t != If && t != While && t != Switch:
		return Node{}, nil, fmt.Errorf("%w: conditional node type %d", ErrInvalidArgument, int(t))
	case n < 1 || t == While && n != 1 || t == If && n > 2 || n > 1<<20:
		return Node{}, nil, fmt.Errorf("%w: a %v node with %d bodies", ErrInvalidArgument, t, n)
	}
	top := g.g.top()
	var bodies []cudaraw.CUgraph
	node, err := g.add(t.String(), deps, func(c *Context, gh cudaraw.CUgraph, dp *cudaraw.CUgraphNode, k uint64) (cudaraw.CUgraphNode, error) {
		if !top.conds[cond] {
			return 0, fmt.Errorf("%w: not a condition of this graph", ErrInvalidArgument)
		}
		var p cudaraw.CUgraphNodeParams
		p.Type = cudaraw.CU_GRAPH_NODE_TYPE_CONDITIONAL
		cp := p.Anon2.Conditional()
		cp.Handle = cudaraw.Cuuint64(cond)
		cp.Type = cudaraw.CUgraphConditionalNodeType(t)
		cp.Size = uint32(n)
		cp.Ctx = c.h
		var h cudaraw.CUgraphNode
		if err := cudaraw.GraphAddNode(&h, gh, dp, nil, k, &p); err != nil {
			return 0, err
		}
		// The driver's array of bodies, valid while the node lives.
		bodies = append(bodies, unsafe.Slice(cp.PhGraph_out, n)...)
		return h, nil
	})
	if err != nil {
		return Node{}, nil, err
	}
	out := make([]*Graph, n)
	for i, b := range bodies {
		out[i] = &Graph{g: &graphState{ctx: top.ctx, root: top, body: b, lease: top.lease}}
	}
	return node, out, nil
}
