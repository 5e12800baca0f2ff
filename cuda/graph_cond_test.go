package cuda_test

import (
	"sync"
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// condBuffers makes k device buffers of n uint32, zeroed, closed when the test ends
// (closing again is harmless).
func condBuffers(t *testing.T, s *cuda.Stream, n, k int) []*cuda.DeviceBuffer {
	t.Helper()
	out := make([]*cuda.DeviceBuffer, k)
	for i := range out {
		b, err := cuda.AllocFor[uint32](s, n)
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		require.NoError(t, b.Memset32Async(s, 0))
		out[i] = b
	}
	return out
}

// firstWord reads b's first uint32.
func firstWord(t *testing.T, b *cuda.DeviceBuffer, n int) uint32 {
	t.Helper()
	got := make([]uint32, n)
	require.NoError(t, cuda.CopyFromDevice(got, b))
	return got[0]
}

// condGraph builds a graph with an if/else, a switch of three bodies, a while whose
// body is captured and holds a kernel, and an if nested in the while's body, with the
// conditions' defaults assigned at each launch. It returns the graph and the
// while's body.
func condGraph(t *testing.T, ctx *cuda.Context, fill *cuda.Function, bufs []*cuda.DeviceBuffer, n int, ifv, swv, whv uint32) (*cuda.Graph, *cuda.Graph) {
	t.Helper()
	g, err := ctx.NewGraph()
	require.NoError(t, err)
	t.Cleanup(func() { g.Close() })
	cIf, err := g.NewCondition(ifv, true)
	require.NoError(t, err)
	nIf, ifBodies, err := g.AddConditional(cuda.If, cIf, 2)
	require.NoError(t, err)
	require.Len(t, ifBodies, 2)
	_, err = ifBodies[0].AddMemset(bufs[0], 1)
	require.NoError(t, err)
	_, err = ifBodies[1].AddMemset(bufs[0], 2)
	require.NoError(t, err)

	cSw, err := g.NewCondition(swv, true)
	require.NoError(t, err)
	nSw, swBodies, err := g.AddConditional(cuda.Switch, cSw, 3, nIf)
	require.NoError(t, err)
	for i, b := range swBodies {
		_, err = b.AddMemset(bufs[1], uint32(10+i))
		require.NoError(t, err)
	}

	cW, err := g.NewCondition(whv, true)
	require.NoError(t, err)
	_, wBody, err := g.AddConditional(cuda.While, cW, 1, nSw)
	require.NoError(t, err)
	leaves, err := wBody[0].CaptureInto(nil, func(cs *cuda.Stream) error {
		if err := fill.Launch(cs, cuda.D1(16), cuda.D1(256), 0, bufs[2], uint32(7), uint64(n)); err != nil {
			return err
		}
		return bufs[3].Memset32Async(cs, 5)
	})
	require.NoError(t, err)
	// An if inside the while's body, its condition made on the body.
	cIn, err := wBody[0].NewCondition(1, true)
	require.NoError(t, err)
	_, inBodies, err := wBody[0].AddConditional(cuda.If, cIn, 1, leaves...)
	require.NoError(t, err)
	_, err = inBodies[0].AddMemset(bufs[4], 6)
	require.NoError(t, err)
	return g, wBody[0]
}

// Conditional nodes built by hand and by capture into their bodies: the strict fake
// runs the bodies the conditions' defaults select (no kernel runs there, so none
// changes a condition, and a while's body runs once), checks them at every launch,
// and reports any use of memory the leases failed to keep. The bodies' memory and
// modules are leased to the graph that holds them, and the bodies are released with
// it.
func TestGraphConditional(t *testing.T) {
	cudatest.Check(t)
	_, m, s := loadKernels(t)
	ctx := s.Context()
	fill := function(t, m, "fill_u32")
	const n = 1 << 12
	bufs := condBuffers(t, s, n, 5)

	g, body := condGraph(t, ctx, fill, bufs, n, 1, 2, 1)
	assert.Equal(t, 5, g.Buffers(), "the bodies' memory is leased to the graph")
	assert.Equal(t, 5, body.Buffers(), "a body reports its graph's leases")
	x, err := g.Instantiate()
	require.NoError(t, err)
	defer x.Close()
	require.NoError(t, x.Launch(s))
	if cudatest.FakeLoaded() {
		assert.Equal(t, uint32(1), firstWord(t, bufs[0], n), "if: the then body")
		assert.Equal(t, uint32(12), firstWord(t, bufs[1], n), "switch: body 2")
		assert.Equal(t, uint32(5), firstWord(t, bufs[3], n), "while: the captured body")
		assert.Equal(t, uint32(6), firstWord(t, bufs[4], n), "the if nested in the while")
		launches := cudatest.Launches(0)
		require.NotEmpty(t, launches)
		assert.Equal(t, "fill_u32", launches[len(launches)-1].Func, "the while's kernel")
	}

	// The other branches: defaults 0 (else), 5 (past the switch's bodies: none) and
	// 0 (the while's body does not run).
	for _, b := range bufs {
		require.NoError(t, b.Memset32Async(s, 0))
	}
	g2, _ := condGraph(t, ctx, fill, bufs, n, 0, 5, 0)
	x2, err := g2.Instantiate()
	require.NoError(t, err)
	defer x2.Close()
	require.NoError(t, x2.Launch(s))
	if cudatest.FakeLoaded() {
		assert.Equal(t, uint32(2), firstWord(t, bufs[0], n), "if: the else body")
		assert.Zero(t, firstWord(t, bufs[1], n), "switch: no body")
		assert.Zero(t, firstWord(t, bufs[3], n), "while: no iteration")
	}

	// A graph with conditional nodes as a child of another: the driver copies the
	// bodies with it.
	outer, err := ctx.NewGraph()
	require.NoError(t, err)
	defer outer.Close()
	_, err = outer.AddChild(g)
	require.NoError(t, err)
	assert.Equal(t, 5, outer.Buffers())

	// Bodies belong to their node.
	require.ErrorIs(t, body.Close(), cuda.ErrInvalidArgument)
	_, err = body.Instantiate()
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)
	require.ErrorIs(t, x.Update(body), cuda.ErrInvalidArgument)
	_, err = g.AddChild(body)
	require.ErrorIs(t, err, cuda.ErrInvalidArgument, "a body inside its own graph")

	// Refused before the driver: a node of the graph as a body's dependency, a
	// condition of another graph, impossible numbers of bodies, a bad type.
	root, err := g.AddEmpty()
	require.NoError(t, err)
	_, err = body.AddEmpty(root)
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)
	cOther, err := g2.NewCondition(0, false)
	require.NoError(t, err)
	_, _, err = g.AddConditional(cuda.If, cOther, 1)
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)
	cOwn, err := g.NewCondition(0, false)
	require.NoError(t, err)
	for _, bad := range []struct {
		t cuda.ConditionalType
		n int
	}{{cuda.While, 2}, {cuda.If, 3}, {cuda.Switch, 0}, {cuda.ConditionalType(7), 1}} {
		_, _, err = g.AddConditional(bad.t, cOwn, bad.n)
		require.ErrorIs(t, err, cuda.ErrInvalidArgument, "%v with %d bodies", bad.t, bad.n)
	}

	// Leases: the memory and the module the bodies use outlive their Close while an
	// executable holds them (the strict fake reports any launch on freed memory or
	// an unloaded module).
	require.NoError(t, g.Close())
	require.NoError(t, g2.Close())
	require.NoError(t, outer.Close())
	_, err = body.AddMemset(bufs[0], 1)
	require.ErrorIs(t, err, cuda.ErrClosed, "a body is closed with its graph")
	_, err = body.NewCondition(0, false)
	require.ErrorIs(t, err, cuda.ErrClosed)
	for _, b := range bufs {
		require.NoError(t, b.Close())
	}
	require.NoError(t, m.Close())
	require.NoError(t, x.Launch(s))
	require.NoError(t, s.Synchronize())
	postponed, leases := cuda.ReleasePostponedForTest(bufs[2])
	assert.True(t, postponed, "the while body's kernel argument is leased")
	assert.Equal(t, 2, leases, "x and x2")
	require.NoError(t, x.Close())
	require.NoError(t, x2.Close())
	postponed, _ = cuda.ReleasePostponedForTest(bufs[2])
	assert.False(t, postponed, "freed after the last lease")
}

// Nodes added concurrently to a graph and to its bodies, while another goroutine
// closes the graph: each add succeeds or fails with ErrClosed, and the strict fake
// sees no call on a destroyed graph.
func TestGraphConditionalConcurrentClose(t *testing.T) {
	cudatest.Check(t)
	ctx, s := cudatest.Stream(t)
	bufs := condBuffers(t, s, 1024, 2)
	for range 20 {
		g, err := ctx.NewGraph()
		require.NoError(t, err)
		c, err := g.NewCondition(1, true)
		require.NoError(t, err)
		_, bodies, err := g.AddConditional(cuda.Switch, c, 4)
		require.NoError(t, err)
		var wg sync.WaitGroup
		for i, b := range append(bodies, g) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 10 {
					if _, err := b.AddMemset(bufs[i%2], 1); err != nil {
						assert.ErrorIs(t, err, cuda.ErrClosed)
						return
					}
				}
			}()
		}
		require.NoError(t, g.Close())
		wg.Wait()
	}
}

// On a driver without conditional nodes (CUDA 11.8 here), NewCondition fails with
// the typed error of the missing symbol.
func TestDriver118Conditional(t *testing.T) {
	if !driver118(t) {
		return
	}
	ctx, err := cuda.Device(0).Context()
	require.NoError(t, err)
	g, err := ctx.NewGraph()
	require.NoError(t, err)
	defer g.Close()
	_, err = g.NewCondition(1, true)
	requireSymbolError(t, err, "cuGraphConditionalHandleCreate")
}
