package cuda_test

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/nvrtc"
	"github.com/gocuda/gocuda/nvrtc/nvrtcraw"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// condSrc are the kernels of the GPU tests of conditional nodes. cudaGraphSetConditional
// is a builtin: NVRTC needs only its declaration.
const condSrc = `
extern "C" __device__ __cudart_builtin__ void CUDARTAPI cudaGraphSetConditional(
	cudaGraphConditionalHandle handle, unsigned int value);

// halve halves x[0..n).
extern "C" __global__ void halve(float *x, unsigned n) {
	for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] *= 0.5f;
}

// converged counts an iteration and keeps the loop going while some |x[i]| is at
// least thr (one block: it reads all of x after halve's grid is done).
extern "C" __global__ void converged(const float *x, unsigned n, float thr, unsigned *iters,
		cudaGraphConditionalHandle loop) {
	__shared__ int more;
	if (threadIdx.x == 0) more = 0;
	__syncthreads();
	for (unsigned i = threadIdx.x; i < n; i += blockDim.x)
		if (fabsf(x[i]) >= thr) more = 1;
	__syncthreads();
	if (threadIdx.x == 0) {
		iters[0]++;
		cudaGraphSetConditional(loop, more);
	}
}

// set_from sets the condition to v[0].
extern "C" __global__ void set_from(const unsigned *v, cudaGraphConditionalHandle h) {
	cudaGraphSetConditional(h, v[0]);
}

// count_to adds one to it[0] and keeps the loop going until it reaches limit.
extern "C" __global__ void count_to(unsigned *it, unsigned limit, cudaGraphConditionalHandle loop) {
	unsigned k = ++it[0];
	cudaGraphSetConditional(loop, k < limit);
}

// count_to_guarded is count_to that does nothing but clear the condition once the
// limit is reached: a body of several runs as many iterations per test of the
// condition.
extern "C" __global__ void count_to_guarded(unsigned *it, unsigned limit, cudaGraphConditionalHandle loop) {
	if (it[0] >= limit) { cudaGraphSetConditional(loop, 0); return; }
	unsigned k = ++it[0];
	cudaGraphSetConditional(loop, k < limit);
}

// count adds one to it[0].
extern "C" __global__ void count(unsigned *it) { ++it[0]; }
`

// condKernels compiles condSrc for the device of s with NVRTC and returns its module.
func condKernels(t testing.TB) (*cuda.Context, *cuda.Stream, *cuda.Module) {
	t.Helper()
	ctx, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, nvrtcraw.Library())
	out, err := nvrtc.Compile(condSrc, "cond.cu", nvrtc.Options{Context: ctx})
	require.NoError(t, err)
	m, err := out.Load(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return ctx, s, m
}

// A while node whose body — captured into it — halves a vector and tests it: the
// loop runs on the GPU until no element is at least the threshold, with the same
// iterations and result as on the CPU, and again at each launch (the condition's
// default is assigned at every launch).
func TestGPUConditionalWhile(t *testing.T) {
	ctx, s, m := condKernels(t)
	halve, conv := function(t, m, "halve"), function(t, m, "converged")
	const n, thr = 4096, float32(1e-3)
	r := cudatest.Rand(3)
	x0 := cudatest.RandFloat32s(r, n)
	for i := range x0 {
		x0[i] *= 1000
	}
	// The CPU reference: a do-while, as the node runs with its default 1.
	want, wantIters := append([]float32(nil), x0...), uint32(0)
	for more := true; more; {
		more = false
		for i := range want {
			want[i] *= 0.5
			more = more || float32(math.Abs(float64(want[i]))) >= thr
		}
		wantIters++
	}

	x, err := cuda.AllocFrom(s, x0)
	require.NoError(t, err)
	defer x.Close()
	iters, err := cuda.AllocFor[uint32](s, 1)
	require.NoError(t, err)
	defer iters.Close()
	g, err := ctx.NewGraph()
	require.NoError(t, err)
	defer g.Close()
	loop, err := g.NewCondition(1, true)
	require.NoError(t, err)
	_, body, err := g.AddConditional(cuda.While, loop, 1)
	require.NoError(t, err)
	_, err = body[0].CaptureInto(nil, func(cs *cuda.Stream) error {
		if err := halve.Launch(cs, cuda.D1(16), cuda.D1(256), 0, x, uint32(n)); err != nil {
			return err
		}
		return conv.Launch(cs, cuda.D1(1), cuda.D1(256), 0, x, uint32(n), thr, iters, loop)
	})
	require.NoError(t, err)
	e, err := g.Instantiate()
	require.NoError(t, err)
	defer e.Close()
	for run := range 2 {
		require.NoError(t, cuda.CopyToDevice(x, x0))
		require.NoError(t, iters.Memset32Async(s, 0))
		require.NoError(t, e.Launch(s))
		got, err := cuda.ToSlice[float32](s, x)
		require.NoError(t, err)
		it, err := cuda.ToSlice[uint32](s, iters)
		require.NoError(t, err)
		assert.Equal(t, wantIters, it[0], "launch %d: iterations", run)
		assert.Equal(t, want, got, "launch %d", run)
	}
}

// testBranches builds a graph of a kernel that sets a condition from device data and
// a conditional node of type typ with n bodies after it (body adds body i's nodes,
// which write out), and checks that each value in vals leaves want(value) in all of
// out.
func testBranches(t *testing.T, typ cuda.ConditionalType, n int, body func(i int, b *cuda.Graph, out *cuda.DeviceBuffer) error,
	vals []uint32, want func(uint32) uint32) {
	ctx, s, m := condKernels(t)
	set := function(t, m, "set_from")
	const size = 1 << 12
	v, err := cuda.AllocFor[uint32](s, 1)
	require.NoError(t, err)
	defer v.Close()
	out, err := cuda.AllocFor[uint32](s, size)
	require.NoError(t, err)
	defer out.Close()
	g, err := ctx.NewGraph()
	require.NoError(t, err)
	defer g.Close()
	c, err := g.NewCondition(0, false)
	require.NoError(t, err)
	ns, err := g.AddKernel(set, cuda.D1(1), cuda.D1(1), 0, nil, v, c)
	require.NoError(t, err)
	_, bodies, err := g.AddConditional(typ, c, n, ns)
	require.NoError(t, err)
	for i, b := range bodies {
		require.NoError(t, body(i, b, out))
	}
	e, err := g.Instantiate()
	require.NoError(t, err)
	defer e.Close()
	for _, val := range vals {
		require.NoError(t, cuda.CopyToDevice(v, []uint32{val}))
		require.NoError(t, out.Memset32Async(s, 0))
		require.NoError(t, e.Launch(s))
		got, err := cuda.ToSlice[uint32](s, out)
		require.NoError(t, err)
		assert.Equal(t, want(val), got[0], "condition %d", val)
		assert.Equal(t, want(val), got[size-1], "condition %d", val)
	}
}

// An if/else node whose bodies are kernels added by hand: the then body runs for a
// non-zero value, the else body for zero.
func TestGPUConditionalIf(t *testing.T) {
	_, km, _ := loadKernels(t, cudatest.Kernels)
	fill := function(t, km, "fill_u32")
	testBranches(t, cuda.If, 2, func(i int, b *cuda.Graph, out *cuda.DeviceBuffer) error {
		_, err := b.AddKernel(fill, cuda.D1(16), cuda.D1(256), 0, nil, out, uint32(100+i), uint64(out.Len()))
		return err
	}, []uint32{1, 0, 7, 0}, func(v uint32) uint32 {
		if v != 0 {
			return 100
		}
		return 101
	})
}

// A switch node (CUDA 12.8) whose bodies are memsets: body k runs for the value k,
// none past the last.
func TestGPUConditionalSwitch(t *testing.T) {
	testBranches(t, cuda.Switch, 3, func(i int, b *cuda.Graph, out *cuda.DeviceBuffer) error {
		_, err := b.AddMemset(out, uint32(10+i))
		return err
	}, []uint32{2, 0, 1, 3, 1000}, func(v uint32) uint32 {
		if v < 3 {
			return 10 + v
		}
		return 0
	})
}

// condLoops are the executables BenchmarkGPUConditionalWhile compares: a while
// node of iters iterations of a one-thread kernel, the same with its body unrolled
// four times, and a graph of one launch of the same kind of kernel, to launch from
// the host.
func condLoops(t testing.TB, iters int) (s *cuda.Stream, loop, loop4, step *cuda.Exec, counter *cuda.DeviceBuffer) {
	ctx, s, m := condKernels(t)
	count := function(t, m, "count")
	counter, err := cuda.AllocFor[uint32](s, 1)
	require.NoError(t, err)
	t.Cleanup(func() { counter.Close() })
	// whileOf is a while node whose body is n kernels in a chain.
	whileOf := func(kernel string, n int) *cuda.Exec {
		f := function(t, m, kernel)
		g, err := ctx.NewGraph()
		require.NoError(t, err)
		defer g.Close()
		c, err := g.NewCondition(1, true)
		require.NoError(t, err)
		zero, err := g.AddMemset(counter, 0)
		require.NoError(t, err)
		_, body, err := g.AddConditional(cuda.While, c, 1, zero)
		require.NoError(t, err)
		var prev []cuda.Node
		for range n {
			k, err := body[0].AddKernel(f, cuda.D1(1), cuda.D1(1), 0, prev, counter, uint32(iters), c)
			require.NoError(t, err)
			prev = []cuda.Node{k}
		}
		e, err := g.Instantiate()
		require.NoError(t, err)
		t.Cleanup(func() { e.Close() })
		return e
	}
	loop, loop4 = whileOf("count_to", 1), whileOf("count_to_guarded", 4)
	one, err := ctx.NewGraph()
	require.NoError(t, err)
	defer one.Close()
	_, err = one.AddKernel(count, cuda.D1(1), cuda.D1(1), 0, nil, counter)
	require.NoError(t, err)
	step, err = one.Instantiate()
	require.NoError(t, err)
	t.Cleanup(func() { step.Close() })
	return s, loop, loop4, step, counter
}

// condRun is one way of running the loop of condLoops: once runs its iterations
// and synchronizes.
type condRun struct {
	name string
	once func() error
}

// condRuns returns the three loops compared: the while node (one launch); the same
// loop driven by the host, which launches an iteration, reads the counter back and
// decides, as a loop whose end the GPU decides must without conditional nodes; and
// iters launches queued without looking (possible only when the count is known).
// Each leaves the counter at iters.
func condRuns(t testing.TB, iters int) (*cuda.Stream, *cuda.DeviceBuffer, []condRun) {
	s, loop, loop4, step, counter := condLoops(t, iters)
	host, err := s.Context().AllocHost(4)
	require.NoError(t, err)
	t.Cleanup(func() { host.Close() })
	return s, counter, []condRun{
		{"while", func() error {
			if err := loop.Launch(s); err != nil {
				return err
			}
			return s.Synchronize()
		}},
		{"while-unroll4", func() error {
			if err := loop4.Launch(s); err != nil {
				return err
			}
			return s.Synchronize()
		}},
		{"host-while", func() error {
			if err := counter.Memset32Async(s, 0); err != nil {
				return err
			}
			for {
				if err := step.Launch(s); err != nil {
					return err
				}
				if err := cuda.CopyAsync(s, host, counter); err != nil {
					return err
				}
				if err := s.Synchronize(); err != nil {
					return err
				}
				if binary.LittleEndian.Uint32(host.Bytes()) >= uint32(iters) {
					return nil
				}
			}
		}},
		{"host-for", func() error {
			if err := counter.Memset32Async(s, 0); err != nil {
				return err
			}
			for range iters {
				if err := step.Launch(s); err != nil {
					return err
				}
			}
			return s.Synchronize()
		}},
	}
}

// The loop on the GPU (a while node of 1,000 iterations, one launch) against the
// same 1,000 iterations driven from the host (condRuns); each op is 1,000
// iterations, synchronized at its end.
func BenchmarkGPUConditionalWhile(b *testing.B) {
	const iters = 1000
	_, _, runs := condRuns(b, iters)
	for _, run := range runs {
		b.Run(run.name, func(b *testing.B) {
			require.NoError(b, run.once()) // warm up
			for b.Loop() {
				if err := run.once(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/iters, "ns/iteration")
		})
	}
}

// The while node's loop runs exactly its iterations on the GPU, as the benchmark
// relies on, and so does the host-driven loop; the log gives the time per
// iteration of the three loops of condRuns over five alternated rounds (the best
// of five runs each) and the medians' ratios.
func TestGPUConditionalWhileCount(t *testing.T) {
	const iters, rounds = 1000, 5
	s, counter, runs := condRuns(t, iters)
	per := make([][]float64, len(runs)) // µs per iteration, per round
	for r := range rounds {
		for i, run := range runs {
			best := time.Duration(math.MaxInt64)
			for range 5 {
				start := time.Now()
				require.NoError(t, run.once(), run.name)
				best = min(best, time.Since(start))
			}
			per[i] = append(per[i], float64(best.Nanoseconds())/1e3/iters)
			if r == 0 {
				got, err := cuda.ToSlice[uint32](s, counter)
				require.NoError(t, err)
				assert.Equal(t, uint32(iters), got[0], run.name)
			}
		}
	}
	med := make([]float64, len(runs))
	for i, run := range runs {
		med[i] = median(per[i])
		t.Logf("%-10s µs/iteration: %.2f (rounds %.2f)", run.name, med[i], per[i])
	}
	t.Logf("while node vs host-driven while: %.2fx; vs queued launches: %.2fx", med[2]/med[0], med[3]/med[0])
	t.Logf("unrolled ×4 vs host-driven while: %.2fx; vs queued launches: %.2fx", med[2]/med[1], med[3]/med[1])
}

// median returns the median of v (the upper one of an even count), v unchanged.
func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}
