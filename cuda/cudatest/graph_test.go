package cudatest_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"reflect"
	"regexp"
	"testing"
	"unicode"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/internal/layouttest"
)

// The structs the fake mirrors from cuda.h have the header's layout: checked against
// the cuda package's types (generated from the header, and checked against it by
// cuda.TestLayout) always, and against cuda.h itself where the headers are installed.
func TestLayout(t *testing.T) {
	if !cudatest.FakeLoaded() {
		t.Skip("needs the fake driver")
	}
	items := cudatest.Layout()
	require.NotEmpty(t, items)
	types := map[string]reflect.Type{}
	for _, v := range []any{cudaraw.CUmemLocation{}, cudaraw.CUmemPoolProps{}, cudaraw.CUmemAccessDesc{},
		cudaraw.CUDA_MEMSET_NODE_PARAMS{}, cudaraw.CUDA_MEMCPY3D{}, cudaraw.CUDA_KERNEL_NODE_PARAMS{},
		cudaraw.CUDA_KERNEL_NODE_PARAMS_v1{}, cudaraw.CUgraphEdgeData{}, cudaraw.CUgraphExecUpdateResultInfo{},
		cudaraw.CUDA_CONDITIONAL_NODE_PARAMS{}, cudaraw.CUgraphNodeParams{}} {
		types[reflect.TypeOf(v).Name()] = reflect.TypeOf(v)
	}
	consts := map[string]uint64{
		"CU_MEMORYTYPE_HOST": uint64(cudaraw.CU_MEMORYTYPE_HOST), "CU_MEMORYTYPE_DEVICE": uint64(cudaraw.CU_MEMORYTYPE_DEVICE),
		"CU_MEMORYTYPE_ARRAY": uint64(cudaraw.CU_MEMORYTYPE_ARRAY), "CU_MEMORYTYPE_UNIFIED": uint64(cudaraw.CU_MEMORYTYPE_UNIFIED),
		"CU_GRAPH_NODE_TYPE_KERNEL":                    uint64(cudaraw.CU_GRAPH_NODE_TYPE_KERNEL),
		"CU_GRAPH_NODE_TYPE_MEMCPY":                    uint64(cudaraw.CU_GRAPH_NODE_TYPE_MEMCPY),
		"CU_GRAPH_NODE_TYPE_MEMSET":                    uint64(cudaraw.CU_GRAPH_NODE_TYPE_MEMSET),
		"CU_GRAPH_NODE_TYPE_HOST":                      uint64(cudaraw.CU_GRAPH_NODE_TYPE_HOST),
		"CU_GRAPH_NODE_TYPE_GRAPH":                     uint64(cudaraw.CU_GRAPH_NODE_TYPE_GRAPH),
		"CU_GRAPH_NODE_TYPE_EMPTY":                     uint64(cudaraw.CU_GRAPH_NODE_TYPE_EMPTY),
		"CU_GRAPH_NODE_TYPE_WAIT_EVENT":                uint64(cudaraw.CU_GRAPH_NODE_TYPE_WAIT_EVENT),
		"CU_GRAPH_NODE_TYPE_EVENT_RECORD":              uint64(cudaraw.CU_GRAPH_NODE_TYPE_EVENT_RECORD),
		"CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC":        uint64(cudaraw.CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC),
		"CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER":       uint64(cudaraw.CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER),
		"CU_STREAM_CAPTURE_STATUS_NONE":                uint64(cudaraw.CU_STREAM_CAPTURE_STATUS_NONE),
		"CU_STREAM_CAPTURE_STATUS_ACTIVE":              uint64(cudaraw.CU_STREAM_CAPTURE_STATUS_ACTIVE),
		"CU_STREAM_CAPTURE_STATUS_INVALIDATED":         uint64(cudaraw.CU_STREAM_CAPTURE_STATUS_INVALIDATED),
		"CU_STREAM_CAPTURE_MODE_RELAXED":               uint64(cudaraw.CU_STREAM_CAPTURE_MODE_RELAXED),
		"CU_LAUNCH_PARAM_END":                          uint64(cudaraw.CU_LAUNCH_PARAM_END),
		"CU_LAUNCH_PARAM_BUFFER_POINTER":               uint64(cudaraw.CU_LAUNCH_PARAM_BUFFER_POINTER),
		"CU_LAUNCH_PARAM_BUFFER_SIZE":                  uint64(cudaraw.CU_LAUNCH_PARAM_BUFFER_SIZE),
		"CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED":  uint64(cudaraw.CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED),
		"CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED": uint64(cudaraw.CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED),
		"CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED":  uint64(cudaraw.CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED),
		"CUDA_ERROR_LOSSY_QUERY":                       uint64(cudaraw.CUDA_ERROR_LOSSY_QUERY),
		"CUDA_ERROR_ILLEGAL_STATE":                     uint64(cudaraw.CUDA_ERROR_ILLEGAL_STATE),
		"CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED":        uint64(cudaraw.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED),
		"CUDA_ERROR_STREAM_CAPTURE_INVALIDATED":        uint64(cudaraw.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED),
		"CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE":         uint64(cudaraw.CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE),
		"CU_GRAPH_NODE_TYPE_CONDITIONAL":               uint64(cudaraw.CU_GRAPH_NODE_TYPE_CONDITIONAL),
		"CU_GRAPH_COND_TYPE_IF":                        uint64(cudaraw.CU_GRAPH_COND_TYPE_IF),
		"CU_GRAPH_COND_TYPE_WHILE":                     uint64(cudaraw.CU_GRAPH_COND_TYPE_WHILE),
		"CU_GRAPH_COND_TYPE_SWITCH":                    uint64(cudaraw.CU_GRAPH_COND_TYPE_SWITCH),
		"CU_GRAPH_COND_ASSIGN_DEFAULT":                 uint64(cudaraw.CU_GRAPH_COND_ASSIGN_DEFAULT),
	}
	var (
		sizeRe  = regexp.MustCompile(`^(sizeof|_Alignof)\((\w+)\)$`)
		offRe   = regexp.MustCompile(`^offsetof\((\w+), (\w+)\)$`)
		fsizeRe = regexp.MustCompile(`^sizeof\(\(\((\w+) \*\)0\)->(\w+)\)$`)
		field   = func(typ, name string) reflect.StructField {
			ty, ok := types[typ]
			require.True(t, ok, "no Go type for %s", typ)
			r := []rune(name)
			r[0] = unicode.ToUpper(r[0])
			f, ok := ty.FieldByName(string(r))
			require.True(t, ok, "%s has no field %s", typ, string(r))
			return f
		}
		checks []layouttest.Item
	)
	for _, it := range items {
		var goValue uint64
		if m := sizeRe.FindStringSubmatch(it.Expr); m != nil {
			ty, ok := types[m[2]]
			require.True(t, ok, "no Go type for %s", m[2])
			if m[1] == "sizeof" {
				goValue = uint64(ty.Size())
			} else {
				goValue = uint64(ty.Align())
			}
		} else if m := offRe.FindStringSubmatch(it.Expr); m != nil {
			goValue = uint64(field(m[1], m[2]).Offset)
		} else if m := fsizeRe.FindStringSubmatch(it.Expr); m != nil {
			goValue = uint64(field(m[1], m[2]).Type.Size())
		} else {
			v, ok := consts[it.Expr]
			require.True(t, ok, "no Go constant for %s", it.Expr)
			goValue = v
		}
		assert.Equal(t, goValue, it.Value, "%s: the fake says %d, package cuda %d", it.Expr, it.Value, goValue)
		checks = append(checks, layouttest.Item{Expr: it.Expr, U: it.Value})
	}
	layouttest.Check(t, []string{"cuda.h"}, checks)
}

// nodes returns the dependency array arguments of a cuGraphAdd*Node call.
func nodes(ns ...cudaraw.CUgraphNode) (*cudaraw.CUgraphNode, uint64) {
	if len(ns) == 0 {
		return nil, 0
	}
	return &ns[0], uint64(len(ns))
}

// kernelNode returns node parameters for f, passing params as an extra buffer (the
// way the cuda package launches) built in scratch, C memory.
func kernelNode(scratch unsafe.Pointer, f cudaraw.CUfunction, grid, block [3]uint32, params []byte) *cudaraw.CUDA_KERNEL_NODE_PARAMS {
	p := &cudaraw.CUDA_KERNEL_NODE_PARAMS{Func: f, GridDimX: grid[0], GridDimY: grid[1], GridDimZ: grid[2],
		BlockDimX: block[0], BlockDimY: block[1], BlockDimZ: block[2]}
	if len(params) == 0 {
		return p
	}
	extra := unsafe.Slice((*uintptr)(scratch), 6)
	size := (*uint64)(unsafe.Add(scratch, 48))
	buf := unsafe.Slice((*byte)(unsafe.Add(scratch, 64)), len(params))
	copy(buf, params)
	*size = uint64(len(params))
	extra[0], extra[1], extra[2], extra[3], extra[4] = 1, uintptr(unsafe.Pointer(&buf[0])), 2, uintptr(unsafe.Pointer(size)), 0
	p.Extra = (*unsafe.Pointer)(scratch)
	return p
}

// axpyParams is the parameter buffer of testPTX's axpy(u64 ptr, f32, u64, u32).
func axpyParams(p cudaraw.CUdeviceptr, a float32, q cudaraw.CUdeviceptr, n uint32) []byte {
	b := make([]byte, 28)
	binary.NativeEndian.PutUint64(b[0:], uint64(p))
	binary.NativeEndian.PutUint32(b[8:], math.Float32bits(a))
	binary.NativeEndian.PutUint64(b[16:], uint64(q))
	binary.NativeEndian.PutUint32(b[24:], n)
	return b
}

func memsetNode(t *testing.T, g cudaraw.CUgraph, d cudaraw.CUdeviceptr, value, elem uint32, width, height, pitch uint64, deps ...cudaraw.CUgraphNode) cudaraw.CUgraphNode {
	t.Helper()
	var n cudaraw.CUgraphNode
	p := cudaraw.CUDA_MEMSET_NODE_PARAMS{Dst: d, Value: value, ElementSize: elem, Width: width, Height: height, Pitch: pitch}
	dp, nd := nodes(deps...)
	require.NoError(t, cudaraw.GraphAddMemsetNode(&n, g, dp, nd, &p, 0))
	return n
}

func graphNodes(t *testing.T, g cudaraw.CUgraph) []cudaraw.CUgraphNode {
	t.Helper()
	var n uint64
	require.NoError(t, cudaraw.GraphGetNodes(g, nil, &n))
	if n == 0 {
		return nil
	}
	ns := make([]cudaraw.CUgraphNode, n)
	require.NoError(t, cudaraw.GraphGetNodes(g, &ns[0], &n))
	require.Equal(t, uint64(len(ns)), n)
	return ns
}

func nodeType(t *testing.T, n cudaraw.CUgraphNode) cudaraw.CUgraphNodeType {
	t.Helper()
	var ty cudaraw.CUgraphNodeType
	require.NoError(t, cudaraw.GraphNodeGetType(n, &ty))
	return ty
}

// A graph built node by node runs its memsets and copies (1-D and 2-D, in a child
// graph too), records its kernel's parameters, and takes new ones for an exec's copy
// of a kernel node.
func TestGraphBuild(t *testing.T) {
	e := setup(t)
	m := e.module(testPTX)
	axpy, empty := e.function(m, "axpy"), e.function(m, "empty")
	s := e.stream(true)
	d, d2, d3 := e.alloc(256), e.alloc(256), e.alloc(256)
	h, h2 := e.host(64), e.host(24)
	ev := e.event(false)

	var g, child cudaraw.CUgraph
	require.NoError(t, cudaraw.GraphCreate(&g, 0))
	require.NoError(t, cudaraw.GraphCreate(&child, 0))

	a := memsetNode(t, g, d, 0x11223344, 4, 64, 1, 0)
	m2 := memsetNode(t, g, d3+1, 0xab, 1, 5, 3, 32) // 2-D: rows 32 bytes apart
	var b, p, c, k, em, rec, wait cudaraw.CUgraphNode
	cp := cudaraw.CUDA_MEMCPY3D{SrcMemoryType: cudaraw.CU_MEMORYTYPE_DEVICE, SrcDevice: d, DstMemoryType: cudaraw.CU_MEMORYTYPE_DEVICE,
		DstDevice: d2, WidthInBytes: 128, Height: 1, Depth: 1}
	dp, nd := nodes(a)
	require.NoError(t, cudaraw.GraphAddMemcpyNode(&b, g, dp, nd, &cp, e.ctx))
	// 2-D, from d3 (from byte 1, pitch 32) to pinned host memory (pitch 8).
	cp2 := cudaraw.CUDA_MEMCPY3D{SrcXInBytes: 1, SrcMemoryType: cudaraw.CU_MEMORYTYPE_DEVICE, SrcDevice: d3, SrcPitch: 32,
		DstMemoryType: cudaraw.CU_MEMORYTYPE_HOST, DstHost: unsafe.Pointer(&h2[0]), DstPitch: 8, WidthInBytes: 5, Height: 3, Depth: 1}
	dp, nd = nodes(m2)
	require.NoError(t, cudaraw.GraphAddMemcpyNode(&p, g, dp, nd, &cp2, 0))

	// The child: a 16-bit memset of d2[128:192], and d[0:64] to pinned host memory.
	cm := memsetNode(t, child, d2+128, 0xbeef, 2, 32, 1, 0)
	var cc cudaraw.CUgraphNode
	cp3 := cudaraw.CUDA_MEMCPY3D{SrcMemoryType: cudaraw.CU_MEMORYTYPE_UNIFIED, SrcDevice: d, DstMemoryType: cudaraw.CU_MEMORYTYPE_HOST,
		DstHost: unsafe.Pointer(&h[0]), WidthInBytes: 64, Height: 1, Depth: 1}
	dp, nd = nodes(cm)
	require.NoError(t, cudaraw.GraphAddMemcpyNode(&cc, child, dp, nd, &cp3, 0))
	dp, nd = nodes(b)
	require.NoError(t, cudaraw.GraphAddChildGraphNode(&c, g, dp, nd, child))
	// The node copied the child: what the child gets later, or its destruction, does
	// not change g.
	memsetNode(t, child, d2+192, 0x77, 1, 64, 1, 0)
	require.NoError(t, cudaraw.GraphDestroy(child))

	params := axpyParams(d, 2.5, d2, 256)
	dp, nd = nodes(c)
	require.NoError(t, cudaraw.GraphAddKernelNode(&k, g, dp, nd, kernelNode(e.scratch, axpy, [3]uint32{4, 1, 1}, [3]uint32{64, 1, 1}, params)))
	dp, nd = nodes(k, p)
	require.NoError(t, cudaraw.GraphAddEmptyNode(&em, g, dp, nd))
	dp, nd = nodes(em)
	require.NoError(t, cudaraw.GraphAddEventRecordNode(&rec, g, dp, nd, ev))
	dp, nd = nodes(rec)
	require.NoError(t, cudaraw.GraphAddEventWaitNode(&wait, g, dp, nd, ev))

	all := []cudaraw.CUgraphNode{a, m2, b, p, c, k, em, rec, wait}
	require.Equal(t, all, graphNodes(t, g))
	var types []cudaraw.CUgraphNodeType
	for _, n := range all {
		types = append(types, nodeType(t, n))
	}
	assert.Equal(t, []cudaraw.CUgraphNodeType{cudaraw.CU_GRAPH_NODE_TYPE_MEMSET, cudaraw.CU_GRAPH_NODE_TYPE_MEMSET,
		cudaraw.CU_GRAPH_NODE_TYPE_MEMCPY, cudaraw.CU_GRAPH_NODE_TYPE_MEMCPY, cudaraw.CU_GRAPH_NODE_TYPE_GRAPH,
		cudaraw.CU_GRAPH_NODE_TYPE_KERNEL, cudaraw.CU_GRAPH_NODE_TYPE_EMPTY, cudaraw.CU_GRAPH_NODE_TYPE_EVENT_RECORD,
		cudaraw.CU_GRAPH_NODE_TYPE_WAIT_EVENT}, types)
	// A longer array: the rest is NULL; a shorter one: the first nodes.
	more := make([]cudaraw.CUgraphNode, 12)
	for i := range more {
		more[i] = 1
	}
	n := uint64(len(more))
	require.NoError(t, cudaraw.GraphGetNodes(g, &more[0], &n))
	assert.Equal(t, uint64(9), n)
	assert.Equal(t, append(all[:9:9], 0, 0, 0), more)
	n = 2
	require.NoError(t, cudaraw.GraphGetNodes(g, &more[0], &n))
	assert.Equal(t, uint64(2), n)
	assert.Equal(t, all[:2], more[:2])

	var x cudaraw.CUgraphExec
	require.NoError(t, cudaraw.GraphInstantiateWithFlags(&x, g, 0))
	require.Equal(t, fill(256, 0), e.download(d, 256)) // nothing ran yet
	since := cudatest.LaunchCount()
	require.NoError(t, cudaraw.GraphLaunch(x, s))
	require.NoError(t, cudaraw.StreamSynchronize(s))
	require.NoError(t, cudaraw.EventQuery(ev))

	pattern := bytes.Repeat([]byte{0x44, 0x33, 0x22, 0x11}, 64)
	assert.Equal(t, pattern, e.download(d, 256))
	want2 := append(append(append([]byte{}, pattern[:128]...), bytes.Repeat([]byte{0xef, 0xbe}, 32)...), fill(64, 0)...)
	assert.Equal(t, want2, e.download(d2, 256))
	assert.Equal(t, pattern[:64], h)
	row := append(fill(5, 0xab), 0, 0, 0)
	assert.Equal(t, bytes.Repeat(row, 3), h2)
	want3 := fill(256, 0)
	for r := range 3 {
		copy(want3[1+32*r:], fill(5, 0xab))
	}
	assert.Equal(t, want3, e.download(d3, 256))
	ls := cudatest.Launches(since)
	require.Len(t, ls, 1)
	assert.Equal(t, "axpy", ls[0].Func)
	assert.Equal(t, [3]uint32{4, 1, 1}, ls[0].Grid)
	assert.Equal(t, [3]uint32{64, 1, 1}, ls[0].Block)
	assert.Equal(t, uintptr(s), ls[0].Stream)
	assert.Equal(t, params, ls[0].Params)

	// New parameters for the exec's kernel node, given as kernelParams this time.
	params2 := axpyParams(d2, 4, d, 7)
	arr := unsafe.Slice((*unsafe.Pointer)(unsafe.Add(e.scratch, 1024)), 4)
	vals := unsafe.Slice((*byte)(unsafe.Add(e.scratch, 2048)), 32)
	copy(vals, params2)
	for i, off := range []int{0, 8, 16, 24} {
		arr[i] = unsafe.Pointer(&vals[off])
	}
	np := cudaraw.CUDA_KERNEL_NODE_PARAMS{Func: axpy, GridDimX: 3, GridDimY: 1, GridDimZ: 1, BlockDimX: 32, BlockDimY: 1, BlockDimZ: 1,
		SharedMemBytes: 256, KernelParams: (*unsafe.Pointer)(unsafe.Add(e.scratch, 1024))}
	require.NoError(t, cudaraw.GraphExecKernelNodeSetParams(x, k, &np))
	// Refused: another kernel, a node of another type or of another graph.
	other := np
	other.Func, other.KernelParams = empty, nil
	require.ErrorIs(t, cudaraw.GraphExecKernelNodeSetParams(x, k, &other), cudaraw.CUDA_ERROR_INVALID_VALUE)
	require.ErrorIs(t, cudaraw.GraphExecKernelNodeSetParams(x, a, &np), cudaraw.CUDA_ERROR_INVALID_VALUE)
	var g2 cudaraw.CUgraph
	require.NoError(t, cudaraw.GraphCreate(&g2, 0))
	var k2 cudaraw.CUgraphNode
	require.NoError(t, cudaraw.GraphAddKernelNode(&k2, g2, nil, 0, kernelNode(e.scratch, axpy, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, params)))
	require.ErrorIs(t, cudaraw.GraphExecKernelNodeSetParams(x, k2, &np), cudaraw.CUDA_ERROR_INVALID_VALUE)
	// Dependencies must be nodes of the graph.
	dp, nd = nodes(a)
	require.ErrorIs(t, cudaraw.GraphAddEmptyNode(&em, g2, dp, nd), cudaraw.CUDA_ERROR_INVALID_VALUE)
	require.NoError(t, cudaraw.GraphDestroy(g2))

	// A second exec of g keeps the graph's parameters.
	var x2 cudaraw.CUgraphExec
	require.NoError(t, cudaraw.GraphInstantiateWithFlags(&x2, g, 0))
	since = cudatest.LaunchCount()
	require.NoError(t, cudaraw.GraphLaunch(x, s))
	require.NoError(t, cudaraw.GraphLaunch(x2, s))
	require.NoError(t, cudaraw.StreamSynchronize(s))
	ls = cudatest.Launches(since)
	require.Len(t, ls, 2)
	assert.Equal(t, params2, ls[0].Params)
	assert.Equal(t, [3]uint32{3, 1, 1}, ls[0].Grid)
	assert.Equal(t, [3]uint32{32, 1, 1}, ls[0].Block)
	assert.Equal(t, uint32(256), ls[0].SharedMem)
	assert.Equal(t, params, ls[1].Params)
	assert.Equal(t, [3]uint32{4, 1, 1}, ls[1].Grid)

	// An update from a graph of the same shape keeps the exec's nodes those of g.
	var g3 cudaraw.CUgraph
	require.NoError(t, cudaraw.GraphCreate(&g3, 0))
	memsetNode(t, g3, d, 0, 1, 1, 1, 0)
	var info cudaraw.CUgraphExecUpdateResultInfo
	require.ErrorIs(t, cudaraw.GraphExecUpdate(x2, g3, &info), cudaraw.CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE)
	assert.Equal(t, cudaraw.CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, info.Result)
	require.NoError(t, cudaraw.GraphExecUpdate(x2, g, &info))
	require.NoError(t, cudaraw.GraphExecKernelNodeSetParams(x2, k, &np))
	require.NoError(t, cudaraw.GraphDestroy(g3))

	require.NoError(t, cudaraw.GraphExecDestroy(x))
	require.NoError(t, cudaraw.GraphExecDestroy(x2))
	require.NoError(t, cudaraw.GraphDestroy(g))
}

// cuStreamBeginCaptureToGraph appends to the caller's graph, after the nodes it
// names; cuStreamGetCaptureInfo_v3 reports the capture's graph and its last node.
func TestCaptureToGraph(t *testing.T) {
	e := setup(t)
	m := e.module(testPTX)
	empty := e.function(m, "empty")
	s := e.stream(true)
	d := e.alloc(64)

	var st cudaraw.CUstreamCaptureStatus
	var id cudaraw.Cuuint64
	var cg cudaraw.CUgraph
	var deps *cudaraw.CUgraphNode
	var edges *cudaraw.CUgraphEdgeData
	var nd uint64
	info := func() []cudaraw.CUgraphNode {
		t.Helper()
		deps, edges, nd = nil, nil, 99
		require.NoError(t, cudaraw.StreamGetCaptureInfo(s, &st, &id, &cg, &deps, &edges, &nd))
		if deps == nil {
			return nil
		}
		return unsafe.Slice(deps, nd)
	}
	require.Nil(t, info())
	assert.Equal(t, cudaraw.CU_STREAM_CAPTURE_STATUS_NONE, st)
	require.ErrorIs(t, cudaraw.StreamGetCaptureInfo(s, nil, nil, nil, nil, nil, nil), cudaraw.CUDA_ERROR_INVALID_VALUE)

	var g cudaraw.CUgraph
	require.NoError(t, cudaraw.GraphCreate(&g, 0))
	a := memsetNode(t, g, d, 1, 1, 16, 1, 0)
	dp, n := nodes(a)
	require.NoError(t, cudaraw.StreamBeginCaptureToGraph(s, g, dp, nil, n, cudaraw.CU_STREAM_CAPTURE_MODE_GLOBAL))
	assert.Equal(t, []cudaraw.CUgraphNode{a}, info())
	assert.Equal(t, cudaraw.CU_STREAM_CAPTURE_STATUS_ACTIVE, st)
	assert.Equal(t, g, cg)
	assert.NotZero(t, id)
	require.NotNil(t, edges)
	assert.Equal(t, cudaraw.CUgraphEdgeData{}, *edges)
	firstID := id

	require.NoError(t, cudaraw.MemsetD8Async(d+16, 2, 16, s))
	last := info()
	require.Len(t, last, 1)
	assert.Equal(t, cudaraw.CU_GRAPH_NODE_TYPE_MEMSET, nodeType(t, last[0]))
	ms := last[0]
	require.NoError(t, e.launch(empty, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, s, nil))
	last = info()
	require.Len(t, last, 1)
	kn := last[0]
	assert.Equal(t, cudaraw.CU_GRAPH_NODE_TYPE_KERNEL, nodeType(t, kn))
	// Every output but the status may be NULL.
	st = 0
	require.NoError(t, cudaraw.StreamGetCaptureInfo(s, &st, nil, nil, nil, nil, nil))
	assert.Equal(t, cudaraw.CU_STREAM_CAPTURE_STATUS_ACTIVE, st)
	require.ErrorIs(t, cudaraw.StreamGetCaptureInfo(s, &st, nil, nil, nil, &edges, nil), cudaraw.CUDA_ERROR_INVALID_VALUE)
	// A node added by hand during the capture comes after the captured ones.
	var em cudaraw.CUgraphNode
	dp, n = nodes(kn)
	require.NoError(t, cudaraw.GraphAddEmptyNode(&em, g, dp, n))
	require.Equal(t, []cudaraw.CUgraphNode{em}, info())

	var out cudaraw.CUgraph
	require.NoError(t, cudaraw.StreamEndCapture(s, &out))
	require.Equal(t, g, out)
	require.Nil(t, info())
	assert.Equal(t, cudaraw.CU_STREAM_CAPTURE_STATUS_NONE, st)
	require.Equal(t, []cudaraw.CUgraphNode{a, ms, kn, em}, graphNodes(t, g))

	var x cudaraw.CUgraphExec
	require.NoError(t, cudaraw.GraphInstantiateWithFlags(&x, g, 0))
	since := cudatest.LaunchCount()
	require.NoError(t, cudaraw.GraphLaunch(x, s))
	require.NoError(t, cudaraw.StreamSynchronize(s))
	assert.Equal(t, append(append(fill(16, 1), fill(16, 2)...), fill(32, 0)...), e.download(d, 64))
	assert.Equal(t, since+1, cudatest.LaunchCount())
	require.NoError(t, cudaraw.GraphExecDestroy(x))

	// A capture that is invalidated leaves the graph as it was.
	dp, n = nodes(em)
	require.NoError(t, cudaraw.StreamBeginCaptureToGraph(s, g, dp, nil, n, cudaraw.CU_STREAM_CAPTURE_MODE_RELAXED))
	info()
	assert.NotEqual(t, firstID, id)
	require.NoError(t, cudaraw.MemsetD8Async(d+32, 3, 16, s))
	require.ErrorIs(t, cudaraw.StreamSynchronize(s), cudaraw.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
	info()
	assert.Equal(t, cudaraw.CU_STREAM_CAPTURE_STATUS_INVALIDATED, st)
	require.ErrorIs(t, cudaraw.StreamEndCapture(s, &out), cudaraw.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
	assert.Zero(t, out)
	require.Equal(t, []cudaraw.CUgraphNode{a, ms, kn, em}, graphNodes(t, g))

	// Edge data: ports and programmatic edges only from kernel nodes; a query without
	// edge data would lose them.
	prog := []cudaraw.CUgraphEdgeData{{Type: uint8(cudaraw.CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC)}}
	dp, n = nodes(a)
	require.ErrorIs(t, cudaraw.StreamBeginCaptureToGraph(s, g, dp, &prog[0], n, cudaraw.CU_STREAM_CAPTURE_MODE_GLOBAL),
		cudaraw.CUDA_ERROR_INVALID_VALUE)
	dp, n = nodes(kn)
	require.NoError(t, cudaraw.StreamBeginCaptureToGraph(s, g, dp, &prog[0], n, cudaraw.CU_STREAM_CAPTURE_MODE_GLOBAL))
	require.Equal(t, []cudaraw.CUgraphNode{kn}, info())
	assert.Equal(t, prog[0], *edges)
	require.ErrorIs(t, cudaraw.StreamGetCaptureInfo(s, &st, nil, nil, &deps, nil, nil), cudaraw.CUDA_ERROR_LOSSY_QUERY)
	// The graph cannot be destroyed while it is captured into.
	violation(t, "while stream", cudaraw.CUDA_ERROR_ILLEGAL_STATE, func() error { return cudaraw.GraphDestroy(g) })
	require.NoError(t, cudaraw.StreamEndCapture(s, &out))

	// A capture into a graph of its own: no dependencies, then the last node.
	require.NoError(t, cudaraw.StreamBeginCapture(s, cudaraw.CU_STREAM_CAPTURE_MODE_GLOBAL))
	require.Nil(t, info())
	assert.Equal(t, uint64(0), nd)
	assert.NotEqual(t, g, cg)
	own := cg
	require.NoError(t, cudaraw.MemsetD8Async(d, 4, 8, s))
	require.Len(t, info(), 1)
	require.NoError(t, cudaraw.StreamEndCapture(s, &out))
	require.Equal(t, own, out)
	require.Len(t, graphNodes(t, out), 1)
	require.NoError(t, cudaraw.GraphDestroy(out))
	require.NoError(t, cudaraw.GraphDestroy(g))
}

// Misuse of the graph-building calls, and a launch of a graph whose memory was freed.
func TestGraphViolations(t *testing.T) {
	e := setup(t)
	m := e.module(testPTX)
	axpy := e.function(m, "axpy")
	one := [3]uint32{1, 1, 1}

	e.run("launch after free", func(t *testing.T) {
		s := e.stream(true)
		d, keep := e.alloc(64), e.alloc(64)
		var g cudaraw.CUgraph
		require.NoError(t, cudaraw.GraphCreate(&g, 0))
		a := memsetNode(t, g, keep, 5, 1, 64, 1, 0)
		memsetNode(t, g, d, 6, 1, 64, 1, 0, a)
		var x cudaraw.CUgraphExec
		require.NoError(t, cudaraw.GraphInstantiateWithFlags(&x, g, 0))
		require.NoError(t, cudaraw.MemFree(d))
		violation(t, "cuGraphLaunch: graph launch uses freed memory (a memset from cuGraphAddMemsetNode)", 0,
			func() error { return cudaraw.GraphLaunch(x, s) })
		require.NoError(t, cudaraw.StreamSynchronize(s))
		assert.Equal(t, fill(64, 5), e.download(keep, 64)) // the rest ran
		require.NoError(t, cudaraw.GraphExecDestroy(x))
		require.NoError(t, cudaraw.GraphDestroy(g))
	})
	e.run("nodes", func(t *testing.T) {
		var g cudaraw.CUgraph
		require.NoError(t, cudaraw.GraphCreate(&g, 0))
		d := e.alloc(64)
		var n cudaraw.CUgraphNode
		bogus := []cudaraw.CUgraphNode{cudaraw.CUgraphNode(d)}
		violation(t, "invalid graph node handle", cudaraw.CUDA_ERROR_INVALID_HANDLE,
			func() error { return cudaraw.GraphAddEmptyNode(&n, g, &bogus[0], 1) })
		p := cudaraw.CUDA_MEMSET_NODE_PARAMS{Dst: d, Value: 1, ElementSize: 4, Width: 17, Height: 1}
		violation(t, "out-of-bounds destination", cudaraw.CUDA_ERROR_INVALID_VALUE,
			func() error { return cudaraw.GraphAddMemsetNode(&n, g, nil, 0, &p, 0) })
		p.Width, p.ElementSize = 16, 3
		require.ErrorIs(t, cudaraw.GraphAddMemsetNode(&n, g, nil, 0, &p, 0), cudaraw.CUDA_ERROR_INVALID_VALUE)
		p.ElementSize, p.Height, p.Pitch = 1, 2, 8 // pitch < width
		require.ErrorIs(t, cudaraw.GraphAddMemsetNode(&n, g, nil, 0, &p, 0), cudaraw.CUDA_ERROR_INVALID_VALUE)
		cp := cudaraw.CUDA_MEMCPY3D{SrcMemoryType: cudaraw.CU_MEMORYTYPE_DEVICE, SrcDevice: d + 32, DstMemoryType: cudaraw.CU_MEMORYTYPE_DEVICE,
			DstDevice: d, WidthInBytes: 64, Height: 1, Depth: 1}
		violation(t, "out-of-bounds source", cudaraw.CUDA_ERROR_INVALID_VALUE,
			func() error { return cudaraw.GraphAddMemcpyNode(&n, g, nil, 0, &cp, 0) })
		cp.SrcDevice, cp.Depth = d, 0
		require.ErrorIs(t, cudaraw.GraphAddMemcpyNode(&n, g, nil, 0, &cp, 0), cudaraw.CUDA_ERROR_INVALID_VALUE)
		cp.Depth, cp.SrcMemoryType = 1, cudaraw.CU_MEMORYTYPE_ARRAY
		require.ErrorIs(t, cudaraw.GraphAddMemcpyNode(&n, g, nil, 0, &cp, 0), cudaraw.CUDA_ERROR_NOT_SUPPORTED)
		violation(t, "malformed kernel node of axpy: no parameters given", cudaraw.CUDA_ERROR_INVALID_VALUE,
			func() error {
				return cudaraw.GraphAddKernelNode(&n, g, nil, 0, kernelNode(e.scratch, axpy, one, one, nil))
			})
		freed := e.alloc(8)
		require.NoError(t, cudaraw.MemFree(freed))
		violation(t, "kernel node with freed memory: axpy parameter 0", 0, func() error {
			return cudaraw.GraphAddKernelNode(&n, g, nil, 0, kernelNode(e.scratch, axpy, one, one, axpyParams(freed, 1, d, 1)))
		})
		violation(t, "use of freed memory", cudaraw.CUDA_ERROR_INVALID_VALUE, func() error {
			p := cudaraw.CUDA_MEMSET_NODE_PARAMS{Dst: freed, Value: 1, ElementSize: 1, Width: 8, Height: 1}
			return cudaraw.GraphAddMemsetNode(&n, g, nil, 0, &p, 0)
		})
		require.NoError(t, cudaraw.GraphDestroy(g))
		violation(t, "use of destroyed graph", cudaraw.CUDA_ERROR_INVALID_HANDLE,
			func() error { return cudaraw.GraphAddEmptyNode(&n, g, nil, 0) })
		var ty cudaraw.CUgraphNodeType
		violation(t, "use of destroyed graph node", cudaraw.CUDA_ERROR_INVALID_HANDLE,
			func() error { return cudaraw.GraphNodeGetType(n, &ty) })
	})
	e.run("unloaded kernel", func(t *testing.T) {
		m2 := e.module(testPTX)
		f := e.function(m2, "empty")
		var g cudaraw.CUgraph
		require.NoError(t, cudaraw.GraphCreate(&g, 0))
		var n cudaraw.CUgraphNode
		require.NoError(t, cudaraw.GraphAddKernelNode(&n, g, nil, 0, kernelNode(e.scratch, f, one, one, nil)))
		var x cudaraw.CUgraphExec
		require.NoError(t, cudaraw.GraphInstantiateWithFlags(&x, g, 0))
		require.NoError(t, cudaraw.ModuleUnload(m2))
		violation(t, "graph launch of kernel empty of unloaded module", 0, func() error { return cudaraw.GraphLaunch(x, 0) })
		require.NoError(t, cudaraw.GraphExecDestroy(x))
		require.NoError(t, cudaraw.GraphDestroy(g))
	})
}

// In fast mode the graph-building calls succeed with fake handles that know their type.
func TestFastGraphs(t *testing.T) {
	if !child(t, map[string]string{"FAKECUDA_MODE": "fast"}) {
		return
	}
	require.NoError(t, cudaraw.Init(0))
	var g cudaraw.CUgraph
	require.NoError(t, cudaraw.GraphCreate(&g, 0))
	var n, k cudaraw.CUgraphNode
	require.NoError(t, cudaraw.GraphAddEmptyNode(&n, g, nil, 0))
	p := cudaraw.CUDA_KERNEL_NODE_PARAMS{GridDimX: 1, GridDimY: 1, GridDimZ: 1, BlockDimX: 1, BlockDimY: 1, BlockDimZ: 1}
	dp, nd := nodes(n)
	require.NoError(t, cudaraw.GraphAddKernelNode(&k, g, dp, nd, &p))
	require.NotEqual(t, n, k)
	var ty cudaraw.CUgraphNodeType
	require.NoError(t, cudaraw.GraphNodeGetType(n, &ty))
	assert.Equal(t, cudaraw.CU_GRAPH_NODE_TYPE_EMPTY, ty)
	require.NoError(t, cudaraw.GraphNodeGetType(k, &ty))
	assert.Equal(t, cudaraw.CU_GRAPH_NODE_TYPE_KERNEL, ty)
	var st cudaraw.CUstreamCaptureStatus
	require.NoError(t, cudaraw.StreamGetCaptureInfo(0, &st, nil, nil, nil, nil, nil))
	assert.Equal(t, cudaraw.CU_STREAM_CAPTURE_STATUS_NONE, st)
	var count uint64
	require.NoError(t, cudaraw.GraphGetNodes(g, nil, &count))
	assert.Zero(t, count)
	var x cudaraw.CUgraphExec
	require.NoError(t, cudaraw.GraphInstantiateWithFlags(&x, g, 0))
	require.NoError(t, cudaraw.GraphExecKernelNodeSetParams(x, k, &p))
	nv, _ := cudatest.Violations()
	assert.Zero(t, nv)
}
