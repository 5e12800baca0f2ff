package cuda

import (
	"errors"
	"fmt"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"runtime"
	"unsafe"
)

// Graphs built by hand: Context.NewGraph makes an empty graph, the Add methods add
// nodes after the nodes they depend on, and CaptureInto captures a function's work
// into the graph. The memory and modules the nodes use are leased as for a capture
// (see Capture). Adding nodes to one graph is serialized; a graph still takes nodes
// after Instantiate (executables made before do not see them).

// Node is a node of a Graph: what later nodes depend on, and for a kernel node what
// Exec.SetKernelArgs names. The zero Node is no node.
type Node struct {
	h     cudaraw.CUgraphNode
	g     *graphState
	f     *Function   // the kernel of a kernel node
	shape launchShape // its grid, block and shared memory
}

// NewGraph returns an empty graph of c, for the Add methods and CaptureInto.
func (c *Context) NewGraph() (*Graph, error) {
	var g cudaraw.CUgraph
	if err := c.Locked(func() error { return cudaraw.GraphCreate(&g, 0) }); err != nil {
		return nil, fmt.Errorf("cuda: creating a graph: %w", err)
	}
	return &Graph{g: &graphState{ctx: c, own: cudaraw.OwnGraph(g), lease: new(leaseSet).register()}}, nil
}

// add adds one node through addNode, after deps, holding g open and its context
// entered; addNode returns the leases it took for the node (held memory, modules).
func (g *Graph) add(what string, deps []Node, addNode func(c *Context, gh cudaraw.CUgraph, deps *cudaraw.CUgraphNode, n uint64) (cudaraw.CUgraphNode, error)) (Node, error) {
	st, err := g.enter()
	if err != nil {
		return Node{}, err
	}
	defer st.top().hold.exit()
	hs := make([]cudaraw.CUgraphNode, len(deps))
	for i, d := range deps {
		if d.g != st || d.h == 0 {
			return Node{}, fmt.Errorf("%w: adding a %s node: dependency %d is not a node of this graph", ErrInvalidArgument, what, i)
		}
		hs[i] = d.h
	}
	var dp *cudaraw.CUgraphNode
	if len(hs) > 0 {
		dp = &hs[0]
	}
	c := st.ctx
	st.top().mu.Lock()
	defer st.top().mu.Unlock()
	var h cudaraw.CUgraphNode
	err = c.Locked(func() error {
		var err error
		h, err = addNode(c, st.handle(), dp, uint64(len(hs)))
		return err
	})
	if err != nil {
		return Node{}, fmt.Errorf("cuda: adding a %s node: %w", what, err)
	}
	return Node{h: h, g: st}, nil
}

// holdFor holds m (of g's context) while a node that uses it is added, and leases it
// to g; the caller calls leave.
func (g *Graph) holdFor(m *memBase) error {
	if err := m.check(); err != nil {
		return err
	}
	if m.ctx.ctxState != g.g.ctx.ctxState {
		return fmt.Errorf("cuda: memory of another context than the graph's: %w", ErrWrongContext)
	}
	return m.acquire()
}

// AddEmpty adds a node that does nothing: a join of deps for the nodes after it.
func (g *Graph) AddEmpty(deps ...Node) (Node, error) {
	return g.add("empty", deps, func(c *Context, gh cudaraw.CUgraph, dp *cudaraw.CUgraphNode, n uint64) (cudaraw.CUgraphNode, error) {
		var h cudaraw.CUgraphNode
		return h, cudaraw.GraphAddEmptyNode(&h, gh, dp, n)
	})
}

// AddMemset adds a node that sets every 32-bit word of b to v, after deps.
func (g *Graph) AddMemset(b *DeviceBuffer, v uint32, deps ...Node) (Node, error) {
	m := b.base()
	if m != nil && m.size%4 != 0 {
		return Node{}, fmt.Errorf("%w: 32-bit memset of a %d-byte buffer", ErrInvalidArgument, m.size)
	}
	if g == nil || g.g == nil {
		return Node{}, fmt.Errorf("%w: nil graph", ErrInvalidArgument)
	}
	if err := g.holdFor(m); err != nil {
		return Node{}, err
	}
	defer m.leave()
	return g.add("memset", deps, func(c *Context, gh cudaraw.CUgraph, dp *cudaraw.CUgraphNode, n uint64) (cudaraw.CUgraphNode, error) {
		p := cudaraw.CUDA_MEMSET_NODE_PARAMS{Dst: m.ptr, Value: v, ElementSize: 4, Width: uint64(m.size / 4), Height: 1}
		var h cudaraw.CUgraphNode
		if err := cudaraw.GraphAddMemsetNode(&h, gh, dp, n, &p, c.h); err != nil {
			return 0, err
		}
		g.g.lease.add(m.owner(), true)
		return h, nil
	})
}

// AddCopy adds a node that copies all of src into the start of dst (any kinds of
// memory, through unified addressing), after deps. src must not be larger than dst.
func (g *Graph) AddCopy(dst, src Memory, deps ...Node) (Node, error) {
	if dst == nil || src == nil {
		return Node{}, fmt.Errorf("%w: nil memory", ErrInvalidArgument)
	}
	if g == nil || g.g == nil {
		return Node{}, fmt.Errorf("%w: nil graph", ErrInvalidArgument)
	}
	d, o := dst.base(), src.base()
	if err := d.check(); err != nil {
		return Node{}, err
	}
	if err := o.check(); err != nil {
		return Node{}, err
	}
	if o.size > d.size {
		return Node{}, fmt.Errorf("%w: copying %d bytes into a %d-byte buffer", ErrInvalidArgument, o.size, d.size)
	}
	if d.ctx.ctxState != g.g.ctx.ctxState || o.ctx.ctxState != g.g.ctx.ctxState {
		return Node{}, fmt.Errorf("cuda: memory of another context than the graph's: %w", ErrWrongContext)
	}
	if d == o {
		if err := d.acquire(); err != nil {
			return Node{}, err
		}
		defer d.leave()
	} else {
		if err := acquirePair(d, o); err != nil {
			return Node{}, err
		}
		defer d.leave()
		defer o.leave()
	}
	return g.add("copy", deps, func(c *Context, gh cudaraw.CUgraph, dp *cudaraw.CUgraphNode, n uint64) (cudaraw.CUgraphNode, error) {
		p := cudaraw.CUDA_MEMCPY3D{SrcMemoryType: cudaraw.CU_MEMORYTYPE_UNIFIED, SrcDevice: o.ptr, DstMemoryType: cudaraw.CU_MEMORYTYPE_UNIFIED,
			DstDevice: d.ptr, WidthInBytes: uint64(o.size), Height: 1, Depth: 1}
		var h cudaraw.CUgraphNode
		if err := cudaraw.GraphAddMemcpyNode(&h, gh, dp, n, &p, c.h); err != nil {
			return 0, err
		}
		g.g.lease.add(o.owner(), false)
		g.g.lease.add(d.owner(), true)
		return h, nil
	})
}

// AddKernel adds a launch of f with args (as Function.Launch takes them), after deps.
// The arguments are packed now: the node keeps their values, and the graph leases the
// memory they name and f's module.
func (g *Graph) AddKernel(f *Function, grid, block Dim3, sharedMem int, deps []Node, args ...any) (Node, error) {
	if g == nil || g.g == nil {
		return Node{}, fmt.Errorf("%w: nil graph", ErrInvalidArgument)
	}
	if f == nil || f.mod == nil {
		return Node{}, fmt.Errorf("%w: nil function", ErrInvalidArgument)
	}
	d, err := f.launchDims(grid, block, sharedMem)
	if err != nil {
		return Node{}, err
	}
	m := f.mod
	if m.ctx.ctxState != g.g.ctx.ctxState {
		return Node{}, fmt.Errorf("cuda: adding a kernel of another context than the graph's: %w", ErrWrongContext)
	}
	k, err := packNode(f, args)
	if err != nil {
		return Node{}, err
	}
	defer k.release()
	if err := m.rlock(); err != nil {
		return Node{}, fmt.Errorf("cuda: adding %s: %w", f.name, err)
	}
	defer m.runlock()
	node, err := g.add("kernel", deps, func(c *Context, gh cudaraw.CUgraph, dp *cudaraw.CUgraphNode, n uint64) (cudaraw.CUgraphNode, error) {
		var h cudaraw.CUgraphNode
		err := k.params(c, f, d, func(p *cudaraw.CUDA_KERNEL_NODE_PARAMS) error { return cudaraw.GraphAddKernelNode(&h, gh, dp, n, p) })
		if err != nil {
			return 0, err
		}
		k.lease(g.g.lease)
		g.g.lease.addModule(m)
		if streamCheck.on.Load() {
			g.g.lease.raw = rawArgs(g.g.lease.raw, args, callSite()+" (Graph.AddKernel of "+f.name+")", h)
		}
		return h, nil
	})
	node.f, node.shape = f, d
	return node, err
}

// kernelArgs is a kernel node's packed arguments, with their memory held.
type kernelArgs struct {
	buf  []byte
	size uintptr
	held opPlan // the memory arguments, held
}

// packNode packs args for f into a buffer of their own, holding their memory.
func packNode(f *Function, args []any) (*kernelArgs, error) {
	n := f.argSize
	if !f.known {
		n = inlineParams
	}
	k := &kernelArgs{buf: make([]byte, max(n, 8))}
	var err error
	k.size, err = packArgs(k.buf, f.params, f.known, f.mod.ctx, f.name, args, &k.held)
	if err != nil && errors.Is(err, errParamsTooLarge) {
		k.buf = make([]byte, k.size)
		k.size, err = packArgs(k.buf, f.params, f.known, f.mod.ctx, f.name, args, &k.held)
	}
	if err != nil {
		return nil, fmt.Errorf("cuda: kernel node of %s: %w", f.name, err)
	}
	return k, nil
}

// params calls add with the node parameters of a launch of f with the packed
// arguments, passed as one buffer through the extra array (pinned while add runs:
// the driver copies the parameters).
func (k *kernelArgs) params(c *Context, f *Function, d launchShape, add func(*cudaraw.CUDA_KERNEL_NODE_PARAMS) error) error {
	p := cudaraw.CUDA_KERNEL_NODE_PARAMS{Func: f.h, GridDimX: d.gx, GridDimY: d.gy, GridDimZ: d.gz, BlockDimX: d.bx,
		BlockDimY: d.by, BlockDimZ: d.bz, SharedMemBytes: d.shm, Ctx: c.h}
	var pin runtime.Pinner
	defer pin.Unpin()
	if k.size > 0 {
		size := new(uint64)
		*size = uint64(k.size)
		extra := &[5]unsafe.Pointer{hostPointer(1), unsafe.Pointer(&k.buf[0]), hostPointer(2), unsafe.Pointer(size), nil}
		pin.Pin(&k.buf[0])
		pin.Pin(size)
		pin.Pin(extra)
		p.Extra = &extra[0]
	}
	return add(&p)
}

// lease leases the held memory of the arguments to ls.
func (k *kernelArgs) lease(ls *leaseSet) {
	k.held.each(func(m *memBase, write bool) { ls.add(m.owner(), write) })
}

// release ends the holds of packNode.
func (k *kernelArgs) release() { k.held.release() }

// AddChild adds child's nodes as one node, after deps (the driver copies child: later
// changes to child do not show). g leases what child uses.
func (g *Graph) AddChild(child *Graph, deps ...Node) (Node, error) {
	if child == nil || child.g == nil || g == nil || g.g == nil {
		return Node{}, fmt.Errorf("%w: nil graph", ErrInvalidArgument)
	}
	cg := child.g
	if cg.top() == g.g.top() {
		return Node{}, fmt.Errorf("%w: a graph as its own child", ErrInvalidArgument)
	}
	if cg.ctx.ctxState != g.g.ctx.ctxState {
		return Node{}, fmt.Errorf("cuda: adding a graph of another context: %w", ErrWrongContext)
	}
	if !cg.top().hold.enter() {
		return Node{}, fmt.Errorf("cuda: child graph: %w", ErrClosed)
	}
	defer cg.top().hold.exit()
	cg.top().mu.Lock()
	defer cg.top().mu.Unlock()
	return g.add("child graph", deps, func(c *Context, gh cudaraw.CUgraph, dp *cudaraw.CUgraphNode, n uint64) (cudaraw.CUgraphNode, error) {
		var h cudaraw.CUgraphNode
		if err := cudaraw.GraphAddChildGraphNode(&h, gh, dp, n, cg.handle()); err != nil {
			return 0, err
		}
		g.g.lease.merge(cg.lease)
		return h, nil
	})
}

// CaptureInto captures the work f queues on a stream of its own into g, after deps
// (as Context.Capture does into a new graph), and returns the nodes the captured
// work ends with: what later nodes that depend on it name.
func (g *Graph) CaptureInto(deps []Node, f func(s *Stream) error) ([]Node, error) {
	st, err := g.enter()
	if err != nil {
		return nil, err
	}
	defer st.top().hold.exit()
	t := captureTarget{into: st.handle()}
	for i, d := range deps {
		if d.g != st || d.h == 0 {
			return nil, fmt.Errorf("%w: capturing into a graph: dependency %d is not a node of this graph", ErrInvalidArgument, i)
		}
		t.deps = append(t.deps, d.h)
	}
	st.top().mu.Lock()
	defer st.top().mu.Unlock()
	_, cs, err := st.ctx.runCapture(t, f)
	if err != nil {
		return nil, err
	}
	// The capture's leases become the graph's (one per buffer and module).
	st.lease.merge(&cs.set)
	_ = cs.set.end()
	nodes := make([]Node, len(cs.leaves))
	for i, h := range cs.leaves {
		nodes[i] = Node{h: h, g: st}
	}
	return nodes, nil
}

// SetKernelArgs sets the arguments of kernel node n (of the graph e was made from)
// for e's later replays (cuGraphExecKernelNodeSetParams), without instantiating
// again: the same kernel and shape, other buffers or scalars. e leases the memory
// they name. n is a node Graph.AddKernel returned: a captured graph's nodes are not
// named, and its executable is re-targeted with Exec.Update (or an ExecCache) instead.
func (e *Exec) SetKernelArgs(n Node, args ...any) error {
	if e == nil || e.e == nil {
		return fmt.Errorf("%w: nil executable graph", ErrInvalidArgument)
	}
	if n.h == 0 || n.f == nil {
		return fmt.Errorf("%w: not a kernel node added by AddKernel", ErrInvalidArgument)
	}
	x := e.e
	f := n.f
	if f.mod.ctx.ctxState != x.ctx.ctxState {
		return fmt.Errorf("cuda: setting kernel arguments: %w", ErrWrongContext)
	}
	k, err := packNode(f, args)
	if err != nil {
		return err
	}
	defer k.release()
	c := x.ctx
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return fmt.Errorf("cuda: executable graph: %w", ErrClosed)
	}
	err = c.Locked(func() error {
		return k.params(c, f, n.shape, func(p *cudaraw.CUDA_KERNEL_NODE_PARAMS) error {
			return cudaraw.GraphExecKernelNodeSetParams(x.own.Handle(), n.h, p)
		})
	})
	if err != nil {
		return fmt.Errorf("cuda: setting the arguments of %s: %w", f.name, err)
	}
	k.lease(x.lease)
	if streamCheck.on.Load() {
		x.lease.raw = rawNodeArgs(x.lease.raw, n.h, args, callSite()+" (Exec.SetKernelArgs of "+f.name+")")
	}
	return nil
}

// AddHost adds a node that calls f on a thread of the driver, after deps: in each
// replay, the nodes after it wait until f returns. f must not use the GPU (no call of
// this package or of a library package: CUDA forbids API calls in host functions, and
// they may deadlock) and should return quickly, as it holds up the replay and the
// driver's callback thread; a panic in f ends the program, as in a goroutine. f stays
// referenced while g or an executable made from it has the node, and until the calls
// of the replays already queued have run.
func (g *Graph) AddHost(f func(), deps ...Node) (Node, error) {
	if f == nil {
		return Node{}, fmt.Errorf("%w: nil host function", ErrInvalidArgument)
	}
	if g == nil || g.g == nil {
		return Node{}, fmt.Errorf("%w: nil graph", ErrInvalidArgument)
	}
	hf, err := newHostFunc(f)
	if err != nil {
		return Node{}, fmt.Errorf("cuda: adding a host node: %w", err)
	}
	hf.update(1, 0) // held while the node is added
	defer hf.update(-1, 0)
	return g.add("host", deps, func(c *Context, gh cudaraw.CUgraph, dp *cudaraw.CUgraphNode, n uint64) (cudaraw.CUgraphNode, error) {
		p := cudaraw.CUDA_HOST_NODE_PARAMS{Fn: hostFnAddr, UserData: hf.arg}
		var h cudaraw.CUgraphNode
		if err := cudaraw.GraphAddHostNode(&h, gh, dp, n, &p); err != nil {
			return 0, err
		}
		g.g.lease.addHost(hf, 1)
		return h, nil
	})
}

// AddEventRecord adds a node that records e, after deps: work on streams that wait
// for e (Stream.WaitEvent) waits for the nodes before it in each replay. g leases e:
// its Close is postponed until g and its executables let go of it.
func (g *Graph) AddEventRecord(e *Event, deps ...Node) (Node, error) {
	return g.addEvent("event record", e, deps, cudaraw.GraphAddEventRecordNode)
}

// AddEventWait adds a node that waits for e (recorded by another stream or graph),
// after deps. g leases e.
func (g *Graph) AddEventWait(e *Event, deps ...Node) (Node, error) {
	return g.addEvent("event wait", e, deps, cudaraw.GraphAddEventWaitNode)
}

// addEvent adds an event node with addNode.
func (g *Graph) addEvent(what string, e *Event, deps []Node, addNode func(*cudaraw.CUgraphNode, cudaraw.CUgraph, *cudaraw.CUgraphNode, uint64, cudaraw.CUevent) error) (Node, error) {
	if g == nil || g.g == nil {
		return Node{}, fmt.Errorf("%w: nil graph", ErrInvalidArgument)
	}
	if err := checkEvent(e); err != nil {
		return Node{}, err
	}
	if e.cs != g.g.ctx.ctxState {
		return Node{}, fmt.Errorf("cuda: an event of another context than the graph's: %w", ErrWrongContext)
	}
	if err := e.acquire(); err != nil {
		return Node{}, err
	}
	defer e.leave()
	return g.add(what, deps, func(c *Context, gh cudaraw.CUgraph, dp *cudaraw.CUgraphNode, n uint64) (cudaraw.CUgraphNode, error) {
		var h cudaraw.CUgraphNode
		if err := addNode(&h, gh, dp, n, e.h); err != nil {
			return 0, err
		}
		g.g.lease.addEvent(e.event)
		return h, nil
	})
}
