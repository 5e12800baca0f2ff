package main

import (
	"runtime"
	"testing"
	"time"

	"github.com/gocuda/gocuda/cublas"
	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/tools/bench/callbench"
	"github.com/stretchr/testify/require"
)

// The gocuda side of the MLP workloads (mlp.go): the idiomatic API as a program uses it. bench
// runs these from this package's test binary (tools/bench/build.sh builds it) and sets them
// beside floor.cu's functions of the same workloads, which time the same spans.

// goNet is the network on gocuda's idiomatic API: a stream of device 0's primary context,
// bias_relu from the embedded kernels.ptx, and the network's buffers, zeroed.
type goNet struct {
	s    *cuda.Stream
	bias *cuda.Function
	w, b [mlpLayers]*cuda.DeviceBuffer
	h    [mlpLayers + 1]*cuda.DeviceBuffer
}

func newGoNet(b *testing.B) *goNet {
	b.Helper()
	// gocuda opens the context first, as in a program (cudatest.Require would retain it raw
	// before gocuda sets its flags); where that fails, Require skips (or fails) saying why.
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		cudatest.Require(b)
		b.Fatalf("device 0's primary context: %v", err)
	}
	cudatest.RequireLibrary(b, cublasraw.Library())
	// The C floor gives its handle a 4 MiB workspace (as mlp.cu does): the same here.
	require.NoError(b, cublas.SetWorkspaceSize(ctx, blasWorkspace))
	s, err := ctx.NewStream()
	require.NoError(b, err)
	b.Cleanup(func() { _ = s.Close() })
	mod, err := ctx.LoadModule([]byte(kernelsPTX))
	require.NoError(b, err)
	b.Cleanup(func() { _ = mod.Close() })
	bias, err := mod.Function("bias_relu")
	require.NoError(b, err)
	n := &goNet{s: s, bias: bias}
	alloc := func(elems int) *cuda.DeviceBuffer {
		d, err := cuda.AllocFor[float32](s, elems)
		require.NoError(b, err)
		b.Cleanup(func() { _ = d.Close() })
		require.NoError(b, d.Memset32Async(s, 0))
		return d
	}
	for i := range mlpLayers {
		n.w[i], n.b[i] = alloc(mlpWidth*mlpWidth), alloc(mlpWidth)
	}
	for i := range n.h {
		n.h[i] = alloc(mlpWidth * mlpBatch)
	}
	for range mlpWarmup {
		require.NoError(b, n.forward())
	}
	require.NoError(b, s.Synchronize())
	return n
}

// gemm queues layer i's SGEMM on the network's stream: h[i+1] = W[i]·h[i].
func (n *goNet) gemm(i int) error { return n.gemmOn(n.s, i) }

// gemmOn queues layer i's SGEMM on s.
func (n *goNet) gemmOn(s *cuda.Stream, i int) error {
	return cublas.Gemm[float32](s, cublas.NoTrans, cublas.NoTrans, mlpWidth, mlpBatch, mlpWidth,
		1, n.w[i], mlpWidth, n.h[i], mlpWidth, 0, n.h[i+1], mlpWidth)
}

// forward queues one forward pass on the network's stream.
func (n *goNet) forward() error { return n.forwardOn(n.s) }

// forwardOn queues one forward pass on s.
func (n *goNet) forwardOn(s *cuda.Stream) error {
	for i := range mlpLayers {
		if err := n.gemmOn(s, i); err != nil {
			return err
		}
		err := n.bias.Launch(s, cuda.D1(biasBlocks), cuda.D1(biasThreads), 0,
			n.h[i+1], cuda.In(n.b[i]), int32(mlpWidth), int32(mlpBatch))
		if err != nil {
			return err
		}
	}
	return nil
}

// fusedOn queues one forward pass on s with each layer one cuBLASLt call:
// h[i+1] = ReLU(W[i]·h[i] + b[i]), bias_relu's result.
func (n *goNet) fusedOn(s *cuda.Stream) error {
	for i := range mlpLayers {
		err := cublas.Matmul[float32](s, cublas.NoTrans, cublas.NoTrans, mlpWidth, mlpBatch, mlpWidth,
			1, n.w[i], mlpWidth, n.h[i], mlpWidth, 0, n.h[i+1], mlpWidth, cublas.Epilogue{Act: cublas.ReLU, Bias: n.b[i]})
		if err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkSgemmSmall is cublas/sgemm-small: b.N cublas.Gemm[float32] calls of the MLP's layer
// shape, then the stream's Synchronize, all on the clock (floor.cu's w_cublas_sgemm_small).
func BenchmarkSgemmSmall(b *testing.B) {
	n := newGoNet(b)
	b.ResetTimer()
	for range b.N {
		if err := n.gemm(0); err != nil {
			b.Fatal(err)
		}
	}
	if err := n.s.Synchronize(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkMLP/eager is mlp/eager: b.N forward passes in chunks of 2000, each chunk followed by
// the stream's Synchronize, all on the clock (floor.cu's w_mlp_eager, mlp.cu's per-iter).
func BenchmarkMLP(b *testing.B) {
	n := newGoNet(b)
	b.Run("eager", func(b *testing.B) {
		for done := 0; done < b.N; done += mlpChunk {
			for range min(mlpChunk, b.N-done) {
				if err := n.forward(); err != nil {
					b.Fatal(err)
				}
			}
			if err := n.s.Synchronize(); err != nil {
				b.Fatal(err)
			}
		}
	})
	// mlp/fused: the forward pass as 4 fused cuBLASLt calls, timed as eager (after
	// mlp.cu's warm-up, which also makes the handle's per-shape plan).
	b.Run("fused", func(b *testing.B) {
		b.StopTimer()
		for range mlpWarmup {
			require.NoError(b, n.fusedOn(n.s))
		}
		require.NoError(b, n.s.Synchronize())
		b.StartTimer()
		for done := 0; done < b.N; done += mlpChunk {
			for range min(mlpChunk, b.N-done) {
				if err := n.fusedOn(n.s); err != nil {
					b.Fatal(err)
				}
			}
			if err := n.s.Synchronize(); err != nil {
				b.Fatal(err)
			}
		}
	})
	// mlp/graph: the forward pass captured once (Context.Capture), then replayed b.N times
	// in chunks of 2000 with a sync after each, all on the clock (floor.cu's w_mlp_graph).
	b.Run("graph", func(b *testing.B) {
		b.StopTimer()
		g, err := n.s.Context().Capture(n.forwardOn)
		require.NoError(b, err)
		defer g.Close()
		e, err := g.Instantiate()
		require.NoError(b, err)
		defer e.Close()
		for range mlpWarmup {
			require.NoError(b, e.Launch(n.s))
		}
		require.NoError(b, n.s.Synchronize())
		b.StartTimer()
		for done := 0; done < b.N; done += mlpChunk {
			for range min(mlpChunk, b.N-done) {
				if err := e.Launch(n.s); err != nil {
					b.Fatal(err)
				}
			}
			if err := n.s.Synchronize(); err != nil {
				b.Fatal(err)
			}
		}
	})
	e := instantiate(b, n.s.Context(), n.forwardOn)
	b.Run("graph-submit", func(b *testing.B) { submitTime(b, n.s, func() error { return e.Launch(n.s) }) })
	b.Run("graph-latency", func(b *testing.B) { latencyTime(b, n.s, func() error { return e.Launch(n.s) }) })
}

// BenchmarkGraph10 is graph/eager10 and graph/graph10 on the idiomatic API: 10 launches of
// axpb<<<16, 256>>>(x, 4096) per iteration, eagerly (Function.Launch) or as one captured
// graph (Exec.Launch); b.N iterations, then one sync, on the clock (floor.cu's functions).
func BenchmarkGraph10(b *testing.B) {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		cudatest.Require(b)
		b.Fatalf("device 0's primary context: %v", err)
	}
	s, err := ctx.NewStream()
	require.NoError(b, err)
	defer s.Close()
	mod, err := ctx.LoadModule([]byte(kernelsPTX))
	require.NoError(b, err)
	defer mod.Close()
	axpb, err := mod.Function("axpb")
	require.NoError(b, err)
	const n = 4096
	x, err := cuda.AllocFor[float32](s, n)
	require.NoError(b, err)
	defer x.Close()
	require.NoError(b, x.Memset32Async(s, 0))
	ten := func(s *cuda.Stream) error {
		for range graphKernels {
			if err := axpb.Launch(s, cuda.D1(16), cuda.D1(256), 0, x, int32(n)); err != nil {
				return err
			}
		}
		return nil
	}
	b.Run("eager", func(b *testing.B) {
		for range b.N {
			if err := ten(s); err != nil {
				b.Fatal(err)
			}
		}
		require.NoError(b, s.Synchronize())
	})
	b.Run("graph", func(b *testing.B) {
		b.StopTimer()
		g, err := ctx.Capture(ten)
		require.NoError(b, err)
		defer g.Close()
		e, err := g.Instantiate()
		require.NoError(b, err)
		defer e.Close()
		require.NoError(b, e.Launch(s))
		require.NoError(b, s.Synchronize())
		b.StartTimer()
		for range b.N {
			if err := e.Launch(s); err != nil {
				b.Fatal(err)
			}
		}
		require.NoError(b, s.Synchronize())
	})
	b.Run("eager-submit", func(b *testing.B) { submitTime(b, s, func() error { return ten(s) }) })
	b.Run("eager-latency", func(b *testing.B) { latencyTime(b, s, func() error { return ten(s) }) })
	e := instantiate(b, ctx, ten)
	b.Run("graph-submit", func(b *testing.B) { submitTime(b, s, func() error { return e.Launch(s) }) })
	b.Run("graph-latency", func(b *testing.B) { latencyTime(b, s, func() error { return e.Launch(s) }) })
	b.Run("graph-submit-pair", func(b *testing.B) { graphSubmitPair(b, s, e) })
}

// graphSubmitPair is graph/graph10-submit against C in this process (callbench.Alternate,
// chunks of submitChunk, each followed by s's sync off the clocks): cuGraphLaunch of the
// raw layer's graph of the same 10 axpb kernels (Env.Graph10) in a C loop (c) and from Go
// (go-raw), beside Exec.Launch of e (gocuda), all on s. Across processes the C floor
// itself moves by a quarter or more (see the README); here the sides share the machine's
// state.
func graphSubmitPair(b *testing.B, s *cuda.Stream, e *cuda.Exec) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	env, err := NewEnv()
	require.NoError(b, err)
	defer env.pinner.Unpin()
	require.NoError(b, cudaraw.CtxSetCurrent(s.Context().Handle()))
	fn, err := cudaraw.Library().NewProc("cuGraphLaunch").Addr()
	require.NoError(b, err)
	callbench.Alternate(b, submitChunk, s.Synchronize,
		callbench.Side{Name: "c", Run: func(k int) (time.Duration, error) {
			return callbench.LoopGraphLaunch(fn, uintptr(env.Graph10), uintptr(s.Handle()), k)
		}},
		callbench.Loop("go-raw", func() error { return cudaraw.GraphLaunch(env.Graph10, s.Handle()) }),
		callbench.Loop("gocuda", func() error { return e.Launch(s) }))
}

// instantiate captures f on ctx (a stream of the capture's own) and instantiates it.
func instantiate(b *testing.B, ctx *cuda.Context, f func(*cuda.Stream) error) *cuda.Exec {
	g, err := ctx.Capture(f)
	require.NoError(b, err)
	b.Cleanup(func() { _ = g.Close() })
	e, err := g.Instantiate()
	require.NoError(b, err)
	b.Cleanup(func() { _ = e.Close() })
	return e
}

// submitTime times only the CPU's enqueueing of b.N iterations on s, in chunks of
// submitChunk, each followed by s's sync off the clock (floor.cu's submit_time).
func submitTime(b *testing.B, s *cuda.Stream, iter func() error) {
	for range 20 { // warm-up, as the C floor's first runs
		require.NoError(b, iter())
	}
	require.NoError(b, s.Synchronize())
	b.ResetTimer()
	var total time.Duration
	for done := 0; done < b.N; done += submitChunk {
		t0 := time.Now()
		for range min(submitChunk, b.N-done) {
			if err := iter(); err != nil {
				b.Fatal(err)
			}
		}
		total += time.Since(t0)
		if err := s.Synchronize(); err != nil {
			b.Fatal(err)
		}
	}
	// ns/op must be the submit time alone: the syncs were on testing's clock.
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/op")
}

// latencyTime times b.N iterations on s, each followed by s's sync (floor.cu's latency_time).
func latencyTime(b *testing.B, s *cuda.Stream, iter func() error) {
	for range 20 {
		require.NoError(b, iter())
	}
	require.NoError(b, s.Synchronize())
	b.ResetTimer()
	for range b.N {
		if err := iter(); err != nil {
			b.Fatal(err)
		}
		if err := s.Synchronize(); err != nil {
			b.Fatal(err)
		}
	}
}
