package cuda_test

import (
	"fmt"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/tools/bench/callbench"
	"github.com/stretchr/testify/require"
)

// rk4 integrates dy/dt = -y over steps steps of size h on y (n float32s) with the
// classical Runge-Kutta method, allocating its temporaries at every step, as code
// written for clarity does: k = f(u) is k = 0; k -= u (axpy_f32 with a = -1).
type rk4 struct {
	axpy *cuda.Function
	n    int
}

// step queues one RK4 step of y on s.
func (r rk4) step(s *cuda.Stream, y *cuda.DeviceBuffer, h float32) error {
	grid, block := cuda.D1(cuda.Blocks(r.n, 256)), cuda.D1(256)
	axpy := func(a float32, x, out *cuda.DeviceBuffer) error {
		return r.axpy.Launch(s, grid, block, 0, a, cuda.In(x), out, int32(r.n))
	}
	tmp := func() (*cuda.DeviceBuffer, error) { return cuda.AllocFor[float32](s, r.n) }
	// f(u) into a new k: k = -u.
	f := func(u *cuda.DeviceBuffer) (*cuda.DeviceBuffer, error) {
		k, err := tmp()
		if err != nil {
			return nil, err
		}
		if err := k.Memset32Async(s, 0); err != nil {
			return nil, err
		}
		return k, axpy(-1, u, k)
	}
	// u = y + c·k in a new buffer.
	shifted := func(c float32, k *cuda.DeviceBuffer) (*cuda.DeviceBuffer, error) {
		u, err := tmp()
		if err != nil {
			return nil, err
		}
		if err := cuda.CopyAsync(s, u, y); err != nil {
			return nil, err
		}
		return u, axpy(c, k, u)
	}
	var ks [4]*cuda.DeviceBuffer
	var err error
	if ks[0], err = f(y); err != nil {
		return err
	}
	for i, c := range []float32{h / 2, h / 2, h} {
		u, err := shifted(c, ks[i])
		if err != nil {
			return err
		}
		ks[i+1], err = f(u)
		u.Close()
		if err != nil {
			return err
		}
	}
	for i, w := range []float32{h / 6, h / 3, h / 3, h / 6} {
		if err := axpy(w, ks[i], y); err != nil {
			return err
		}
		ks[i].Close()
	}
	return nil
}

// BenchmarkRK4 runs 10 RK4 steps on 4,096 elements per iteration, every step
// allocating its temporaries: eagerly, and as one graph captured from the same code
// (Context.Capture; the temporaries come from the pool outside the graph and live as
// long as it). Both end with the same y, which it checks against exp(-t).
func BenchmarkRK4(b *testing.B) {
	if cudatest.FakeLoaded() {
		b.Skip("runs kernels: needs a GPU")
	}
	_, m, s := loadKernels(b)
	r := rk4{axpy: function(b, m, "axpy_f32"), n: 4096}
	const steps, h = 10, 0.01
	iter := func(s *cuda.Stream, y *cuda.DeviceBuffer) error {
		for range steps {
			if err := r.step(s, y, h); err != nil {
				return err
			}
		}
		return nil
	}
	run := func(b *testing.B, once func(y *cuda.DeviceBuffer) (func() error, error)) {
		y, err := cuda.AllocFor[float32](s, r.n)
		require.NoError(b, err)
		defer y.Close()
		ones := make([]float32, r.n)
		for i := range ones {
			ones[i] = 1
		}
		require.NoError(b, cuda.CopyToDevice(y, ones))
		f, err := once(y)
		require.NoError(b, err)
		b.ResetTimer()
		for range b.N {
			if err := f(); err != nil {
				b.Fatal(err)
			}
		}
		require.NoError(b, s.Synchronize())
		b.StopTimer()
		got := make([]float32, r.n)
		require.NoError(b, cuda.CopyFromDevice(got, y))
		want := math.Exp(-float64(b.N) * steps * h) // checked while float32 holds it well
		if d := math.Abs(float64(got[r.n-1])-want) / want; want > 1e-6 && d > 1e-3 {
			b.Fatalf("y = %g after %d steps, want %g (relative error %g)", got[r.n-1], b.N*steps, want, d)
		}
	}
	b.Run("eager", func(b *testing.B) {
		run(b, func(y *cuda.DeviceBuffer) (func() error, error) {
			return func() error { return iter(s, y) }, nil
		})
	})
	b.Run("graph", func(b *testing.B) {
		run(b, func(y *cuda.DeviceBuffer) (func() error, error) {
			g, err := s.Context().Capture(func(cs *cuda.Stream) error { return iter(cs, y) })
			if err != nil {
				return nil, err
			}
			b.Cleanup(func() { g.Close() })
			e, err := g.Instantiate()
			if err != nil {
				return nil, err
			}
			b.Cleanup(func() { e.Close() })
			return func() error { return e.Launch(s) }, nil
		})
	})
}

// BenchmarkExecLaunch is the CPU cost of Exec.Launch of a graph of one memset node
// per buffer, by the number of buffers it leases (each planned and recorded for the
// hand-off at every launch), synchronizing every 32 launches off the clock.
func BenchmarkExecLaunch(b *testing.B) {
	cudatest.Check(b)
	ctx, s := cudatest.Stream(b)
	for _, n := range []int{1, 16} {
		b.Run(fmt.Sprintf("leases-%d", n), func(b *testing.B) {
			g, err := ctx.NewGraph()
			require.NoError(b, err)
			defer g.Close()
			var bufs []*cuda.DeviceBuffer
			for range n {
				buf, err := cuda.AllocFor[uint32](s, 64)
				require.NoError(b, err)
				defer buf.Close()
				bufs = append(bufs, buf)
				_, err = g.AddMemset(buf, 1)
				require.NoError(b, err)
			}
			x, err := g.Instantiate()
			require.NoError(b, err)
			defer x.Close()
			require.NoError(b, x.Launch(s))
			require.NoError(b, s.Synchronize())
			if n == 1 {
				b.Run("pair", func(b *testing.B) { pairGraphLaunch(b, s, x, bufs[0]) })
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if err := x.Launch(s); err != nil {
					b.Fatal(err)
				}
				if i%32 == 31 {
					b.StopTimer()
					require.NoError(b, s.Synchronize())
					b.StartTimer()
				}
			}
		})
	}
}

// pairGraphLaunch alternates chunks of 32 launches of x (Exec.Launch, whose graph is
// one memset of buf) with chunks of launches of the same graph made from C, in this
// process (callbench.Alternate): cuGraphLaunch in a C loop (c), the same with the
// current-context check of gocuda's calls (c-in-context), a Go loop of the raw
// binding (go-raw), and Exec.Launch (gocuda). The steps between them split gocuda's
// submit overhead into the check, the cgo call and the Go bookkeeping. The C loop
// writing to 16 or 64 scattered cache lines between launches (c-touch-N) shows what
// touching that much memory costs the driver's next launch.
func pairGraphLaunch(b *testing.B, s *cuda.Stream, x *cuda.Exec, buf *cuda.DeviceBuffer) {
	ctx := s.Context()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	require.NoError(b, cudaraw.CtxSetCurrent(ctx.Handle()))
	var g cudaraw.CUgraph
	require.NoError(b, cudaraw.GraphCreate(&g, 0))
	defer cudaraw.GraphDestroy(g)
	var node cudaraw.CUgraphNode
	p := cudaraw.CUDA_MEMSET_NODE_PARAMS{Dst: buf.Ptr(), Value: 1, ElementSize: 4, Width: 64, Height: 1}
	require.NoError(b, cudaraw.GraphAddMemsetNode(&node, g, nil, 0, &p, ctx.Handle()))
	var e cudaraw.CUgraphExec
	require.NoError(b, cudaraw.GraphInstantiateWithFlags(&e, g, 0))
	defer cudaraw.GraphExecDestroy(e)
	fn, err := cudaraw.Library().NewProc("cuGraphLaunch").Addr()
	require.NoError(b, err)
	get, err := cudaraw.Library().NewProc("cuCtxGetCurrent").Addr()
	require.NoError(b, err)
	set, err := cudaraw.Library().NewProc("cuCtxSetCurrent").Addr()
	require.NoError(b, err)
	h := uintptr(ctx.Handle())
	callbench.Alternate(b, 32, s.Synchronize,
		callbench.Side{Name: "c", Run: func(k int) (time.Duration, error) {
			return callbench.LoopGraphLaunch(fn, uintptr(e), uintptr(s.Handle()), k)
		}},
		callbench.Side{Name: "c-in-context", Run: func(k int) (time.Duration, error) {
			return callbench.LoopGraphLaunchInContext(fn, get, set, h, uintptr(e), uintptr(s.Handle()), k)
		}},
		callbench.Loop("go-raw", func() error { return cudaraw.GraphLaunch(e, s.Handle()) }),
		callbench.Loop("gocuda", func() error { return x.Launch(s) }),
		touching(fn, e, s, 16), touching(fn, e, s, 64))
}

// touching is a side of pairGraphLaunch: the C loop writing to lines cache lines,
// 4,160 bytes apart (no two on a page, out of the prefetcher's reach), after each
// launch, as a binding's bookkeeping touches its objects between two launches.
func touching(fn uintptr, e cudaraw.CUgraphExec, s *cuda.Stream, lines int) callbench.Side {
	const stride = 4160
	buf := make([]byte, lines*stride)
	return callbench.Side{Name: fmt.Sprintf("c-touch-%d", lines), Run: func(k int) (time.Duration, error) {
		return callbench.LoopGraphLaunchTouching(fn, uintptr(e), uintptr(s.Handle()), buf, lines, stride, k)
	}}
}
