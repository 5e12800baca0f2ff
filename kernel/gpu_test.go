package kernel_test

import (
	"math"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/kernel"
	"github.com/gocuda/gocuda/nvrtc"
	"github.com/gocuda/gocuda/nvrtc/nvrtcraw"
)

// gpuStream is a stream for the GPU tests, which need kernels and NVRTC.
func gpuStream(t testing.TB) (*cuda.Context, *cuda.Stream) {
	ctx, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, nvrtcraw.Library())
	return ctx, s
}

// Elementwise operations against the same arithmetic on the CPU: a scalar
// broadcast, two outputs, integer and double types; a second cache on the same
// directory finds the kernel on disk.
func TestGPUElementwise(t *testing.T) {
	_, s := gpuStream(t)
	const n = 100_003 // not a multiple of the block
	r := cudatest.Rand(1)
	x, y := cudatest.RandFloat32s(r, n), cudatest.RandFloat32s(r, n)
	dir := t.TempDir()
	axpy, err := kernel.NewElementwise("axpy", "y = a * x + y", &kernel.Cache{Dir: dir},
		kernel.Scalar[float32]("a"), kernel.In[float32]("x"), kernel.InOut[float32]("y"))
	require.NoError(t, err)
	defer axpy.Close()
	dx, err := cuda.AllocFrom(s, x)
	require.NoError(t, err)
	defer dx.Close()
	dy, err := cuda.AllocFrom(s, y)
	require.NoError(t, err)
	defer dy.Close()
	require.NoError(t, axpy.Launch(s, float32(2), dx, dy))
	got, err := cuda.ToSlice[float32](s, dy)
	require.NoError(t, err)
	for i := range n {
		require.InDelta(t, 2*x[i]+y[i], got[i], 1e-5, "element %d", i)
	}

	// Another cache on the same directory: the kernel comes from disk.
	c2 := &kernel.Cache{Dir: dir}
	again, err := kernel.NewElementwise("axpy", "y = a * x + y", c2,
		kernel.Scalar[float32]("a"), kernel.In[float32]("x"), kernel.InOut[float32]("y"))
	require.NoError(t, err)
	defer again.Close()
	require.NoError(t, again.Launch(s, float32(0), dx, dy))
	assert.Equal(t, kernel.CacheStats{DiskHits: 1}, c2.Stats())

	// Two outputs, integers and doubles.
	split, err := kernel.NewElementwise("divmod", "q = a / b; m = a % b", &kernel.Cache{},
		kernel.In[int32]("a"), kernel.Scalar[int32]("b"), kernel.Out[int32]("q"), kernel.Out[int32]("m"))
	require.NoError(t, err)
	defer split.Close()
	ints := make([]int32, n)
	for i := range ints {
		ints[i] = int32(i) - n/2
	}
	da, err := cuda.AllocFrom(s, ints)
	require.NoError(t, err)
	defer da.Close()
	dq, err := cuda.AllocFor[int32](s, n)
	require.NoError(t, err)
	defer dq.Close()
	dm, err := cuda.AllocFor[int32](s, n)
	require.NoError(t, err)
	defer dm.Close()
	require.NoError(t, split.Launch(s, da, int32(7), dq, dm))
	q, err := cuda.ToSlice[int32](s, dq)
	require.NoError(t, err)
	m, err := cuda.ToSlice[int32](s, dm)
	require.NoError(t, err)
	for i, a := range ints {
		require.Equal(t, a/7, q[i], "element %d", i)
		require.Equal(t, a%7, m[i], "element %d", i)
	}

	hyp, err := kernel.NewElementwise("hypot2", "z = sqrt(x * x + y * y)", &kernel.Cache{},
		kernel.In[float64]("x"), kernel.In[float64]("y"), kernel.Out[float64]("z"))
	require.NoError(t, err)
	defer hyp.Close()
	d3, err := cuda.AllocFrom(s, []float64{3, 5, 8})
	require.NoError(t, err)
	defer d3.Close()
	d4, err := cuda.AllocFrom(s, []float64{4, 12, 15})
	require.NoError(t, err)
	defer d4.Close()
	dz, err := cuda.AllocFor[float64](s, 3)
	require.NoError(t, err)
	defer dz.Close()
	require.NoError(t, hyp.Launch(s, d3, d4, dz))
	z, err := cuda.ToSlice[float64](s, dz)
	require.NoError(t, err)
	assert.Equal(t, []float64{5, 13, 17}, z)

	// A compile error names the operation and carries NVRTC's log.
	bad, err := kernel.NewElementwise("bad", "y = undefined_name(x)", &kernel.Cache{}, kernel.In[float32]("x"), kernel.Out[float32]("y"))
	require.NoError(t, err)
	defer bad.Close()
	err = bad.Launch(s, dx, dy)
	var ce *nvrtc.CompileError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, ce.Log, "undefined_name")
}

// Reductions against the CPU: a sum (float32, compared with a float64 sum), a
// maximum of ints, a norm (map and post), per row, and an empty input.
func TestGPUReduction(t *testing.T) {
	_, s := gpuStream(t)
	const n = 1<<20 + 17
	r := cudatest.Rand(2)
	x := cudatest.RandFloat32s(r, n)
	dx, err := cuda.AllocFrom(s, x)
	require.NoError(t, err)
	defer dx.Close()

	sum, err := kernel.NewReduction[float32]("sum", kernel.ReductionOps{Identity: "0", Combine: "a + b"}, &kernel.Cache{})
	require.NoError(t, err)
	defer sum.Close()
	got, err := sum.Reduce(s, dx)
	require.NoError(t, err)
	var want, sq float64
	for _, v := range x {
		want += float64(v)
		sq += float64(v) * float64(v)
	}
	assert.InEpsilon(t, want, float64(got), 1e-4)

	norm, err := kernel.NewReduction[float32]("norm", kernel.ReductionOps{Identity: "0", Map: "x * x", Combine: "a + b", Post: "sqrtf(a)"}, &kernel.Cache{})
	require.NoError(t, err)
	defer norm.Close()
	got, err = norm.Reduce(s, dx)
	require.NoError(t, err)
	assert.InEpsilon(t, math.Sqrt(sq), float64(got), 1e-4)

	ints := make([]int32, n)
	for i := range ints {
		ints[i] = int32((i * 7919) % 1000003)
	}
	di, err := cuda.AllocFrom(s, ints)
	require.NoError(t, err)
	defer di.Close()
	mx, err := kernel.NewReduction[int32]("maxi", kernel.ReductionOps{Identity: "-2147483647 - 1", Combine: "max(a, b)"}, &kernel.Cache{})
	require.NoError(t, err)
	defer mx.Close()
	gotMax, err := mx.Reduce(s, di)
	require.NoError(t, err)
	assert.Equal(t, slices.Max(ints), gotMax)

	const rows, cols = 37, 1001
	rowsIn, err := cuda.AllocFrom(s, ints[:rows*cols])
	require.NoError(t, err)
	defer rowsIn.Close()
	out, err := cuda.AllocFor[int32](s, rows)
	require.NoError(t, err)
	defer out.Close()
	require.NoError(t, mx.ReduceRows(s, rowsIn, rows, cols, out))
	per, err := cuda.ToSlice[int32](s, out)
	require.NoError(t, err)
	for i := range rows {
		require.Equal(t, slices.Max(ints[i*cols:(i+1)*cols]), per[i], "row %d", i)
	}

	empty, err := dx.Slice(0, 0)
	require.NoError(t, err)
	got, err = sum.Reduce(s, empty)
	require.NoError(t, err)
	assert.Zero(t, got, "the identity")
}

// BenchmarkGPUKernels measures an elementwise y = a*x + y over 1<<24 float32 beside
// the same kernel written by hand (NVRTC and Launch), and a sum over the same
// array beside a device-to-device copy of it, alternated in rounds in this process;
// it logs each round's ratio and reports the medians.
func BenchmarkGPUKernels(b *testing.B) {
	_, s := gpuStream(b)
	const n = 1 << 24
	x, err := cuda.AllocFor[float32](s, n)
	require.NoError(b, err)
	defer x.Close()
	y, err := cuda.AllocFor[float32](s, n)
	require.NoError(b, err)
	defer y.Close()
	require.NoError(b, x.Memset32Async(s, math.Float32bits(1)))
	require.NoError(b, y.Memset32Async(s, 0))
	axpy, err := kernel.NewElementwise("axpy", "y = a * x + y", &kernel.Cache{},
		kernel.Scalar[float32]("a"), kernel.In[float32]("x"), kernel.InOut[float32]("y"))
	require.NoError(b, err)
	defer axpy.Close()
	out, err := nvrtc.Compile(`extern "C" __global__ void axpy_hand(long long n, float a, const float* x, float* y) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) y[i] = a * x[i] + y[i];
}`, "hand.cu", nvrtc.Options{Context: s.Context()})
	require.NoError(b, err)
	mod, err := out.Load(s.Context())
	require.NoError(b, err)
	defer mod.Close()
	hand, err := mod.Function("axpy_hand")
	require.NoError(b, err)
	sum, err := kernel.NewReduction[float32]("sum", kernel.ReductionOps{Identity: "0", Combine: "a + b"}, &kernel.Cache{})
	require.NoError(b, err)
	defer sum.Close()
	res, err := cuda.AllocFor[float32](s, 1)
	require.NoError(b, err)
	defer res.Close()

	const iters = 200
	timeIt := func(f func() error) time.Duration {
		require.NoError(b, s.Synchronize())
		t0 := time.Now()
		for range iters {
			require.NoError(b, f())
		}
		require.NoError(b, s.Synchronize())
		return time.Since(t0) / iters
	}
	elementwise := func() error { return axpy.Launch(s, float32(0.5), x, y) }
	handwritten := func() error {
		return hand.Launch(s, cuda.D1(n/256), cuda.D1(256), 0, int64(n), float32(0.5), cuda.In(x), y)
	}
	reduce := func() error { return sum.ReduceTo(s, x, res) }
	copyXY := func() error { return cuda.CopyAsync(s, y, x) }
	elementwise()
	handwritten()
	reduce()
	for b.Loop() {
		var axpyRatios, bwRatios []float64
		for round := range 7 {
			var e, h, r, c time.Duration
			if round%2 == 0 {
				e, h = timeIt(elementwise), timeIt(handwritten)
				r, c = timeIt(reduce), timeIt(copyXY)
			} else {
				h, e = timeIt(handwritten), timeIt(elementwise)
				c, r = timeIt(copyXY), timeIt(reduce)
			}
			copyBW := 2 * 4 * float64(n) / c.Seconds() // read and write
			sumBW := 4 * float64(n) / r.Seconds()
			axpyRatios = append(axpyRatios, float64(e)/float64(h))
			bwRatios = append(bwRatios, sumBW/copyBW)
			b.Logf("round %d: elementwise %v, by hand %v (%.3f×); sum %v = %.0f GB/s, copy %v = %.0f GB/s (%.2f)",
				round+1, e, h, float64(e)/float64(h), r, sumBW/1e9, c, copyBW/1e9, sumBW/copyBW)
		}
		sort.Float64s(axpyRatios)
		sort.Float64s(bwRatios)
		b.ReportMetric(axpyRatios[len(axpyRatios)/2], "elementwise/hand")
		b.ReportMetric(bwRatios[len(bwRatios)/2], "sum-bw/copy-bw")
	}
}
