package cupti_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"math"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cublas"
	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/cupti"
	"github.com/gocuda/gocuda/cupti/cuptiraw"
	"github.com/gocuda/gocuda/nvrtc"
	"github.com/gocuda/gocuda/nvrtc/nvrtcraw"
)

const mlpSource = `
extern "C" __global__ void bias_relu(float* y, const float* b, int rows, int cols) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < rows * cols) { float v = y[i] + b[i % rows]; y[i] = v > 0.f ? v : 0.f; }
}
// spin runs long enough (a millisecond or so) that CUDA events time it finely.
extern "C" __global__ void spin(float* x, int n, int iters) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) return;
	float v = x[i];
	for (int k = 0; k < iters; k++) v = v * 0.999f + 0.001f;
	x[i] = v;
}`

// gpuTimed runs op between two timing events on s and returns their elapsed time.
// gate is queued first and keeps the GPU busy while the events and op are queued,
// so that the start event and op run back to back: on an idle GPU the start event
// would complete before op's launch reached the GPU, and the events would time the
// launch's host cost as well.
func gpuTimed(t *testing.T, ctx *cuda.Context, s *cuda.Stream, gate, op func() error) time.Duration {
	start, err := ctx.NewEvent(true)
	require.NoError(t, err)
	defer start.Close()
	end, err := ctx.NewEvent(true)
	require.NoError(t, err)
	defer end.Close()
	require.NoError(t, gate())
	require.NoError(t, start.Record(s))
	require.NoError(t, op())
	require.NoError(t, end.Record(s))
	require.NoError(t, end.Synchronize())
	d, err := cuda.Elapsed(start, end)
	require.NoError(t, err)
	return d
}

// TestGPUTimeline runs an MLP-like sequence (copies in, a cuBLAS GEMM, a bias+ReLU
// kernel, a memset, a long kernel and a large device-to-device copy, each timed
// with CUDA events) under a timeline, and checks that every kind of record is
// there, linked to the Go call (line, goroutine, and cuBLAS for the GEMM), that the
// long kernel's and the large copy's GPU durations agree with the events' within
// 5%, and that the trace event JSON is valid ($GOCUDA_TIMELINE_OUT, if set, gets
// the file, for Perfetto).
func TestGPUTimeline(t *testing.T) {
	ctx, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cuptiraw.Library())
	cudatest.RequireLibrary(t, nvrtcraw.Library())
	cudatest.RequireLibrary(t, cublasraw.Library())
	out, err := nvrtc.Compile(mlpSource, "mlp.cu", nvrtc.Options{Context: ctx})
	require.NoError(t, err)
	mod, err := out.Load(ctx)
	require.NoError(t, err)
	defer mod.Close()
	biasRelu, err := mod.Function("bias_relu")
	require.NoError(t, err)
	spin, err := mod.Function("spin")
	require.NoError(t, err)

	const m, k, n = 512, 256, 512
	const spinN, spinIters = 1 << 20, 60000 // about 2 ms
	const big = 256 << 20                   // float32s: 1 GiB
	w, err := cuda.AllocFrom(s, make([]float32, m*k))
	require.NoError(t, err)
	defer w.Close()
	bias, err := cuda.AllocFor[float32](s, m)
	require.NoError(t, err)
	defer bias.Close()
	spinBuf, err := cuda.AllocFor[float32](s, spinN)
	require.NoError(t, err)
	defer spinBuf.Close()
	src, err := cuda.AllocFor[float32](s, big)
	require.NoError(t, err)
	defer src.Close()
	dst, err := cuda.AllocFor[float32](s, big)
	require.NoError(t, err)
	defer dst.Close()
	require.NoError(t, spinBuf.Memset32Async(s, math.Float32bits(1)))
	// Warm up the kernels and cuBLAS outside the trace.
	require.NoError(t, spin.Launch(s, cuda.D1(cuda.Blocks(spinN, 256)), cuda.D1(256), 0, spinBuf, int32(spinN), int32(10)))
	require.NoError(t, s.Synchronize())

	tl, err := cupti.Start()
	require.NoError(t, err)
	_, err = cupti.Start()
	require.ErrorIs(t, err, cupti.ErrRunning)

	xHost := make([]float32, k*n)
	for i := range xHost {
		xHost[i] = float32(i%7) - 3
	}
	x, err := cuda.AllocFor[float32](s, k*n) // an allocation inside the trace
	require.NoError(t, err)
	defer x.Close()
	y, err := cuda.AllocFor[float32](s, m*n)
	require.NoError(t, err)
	defer y.Close()
	require.NoError(t, cuda.CopyToDeviceAsync(s, x, xHost))
	require.NoError(t, cuda.CopyToDeviceAsync(s, bias, make([]float32, m)))
	require.NoError(t, cublas.Gemm[float32](s, cublas.NoTrans, cublas.NoTrans, m, n, k, 1, w, m, x, k, 0, y, m))
	require.NoError(t, biasRelu.Launch(s, cuda.D1(cuda.Blocks(m*n, 256)), cuda.D1(256), 0, y, cuda.In(bias), int32(m), int32(n)))
	require.NoError(t, y.Memset32Async(s, 0))
	runSpin := func() error {
		return spin.Launch(s, cuda.D1(cuda.Blocks(spinN, 256)), cuda.D1(256), 0, spinBuf, int32(spinN), int32(spinIters))
	}
	spinEvents := gpuTimed(t, ctx, s, runSpin, runSpin)
	copyEvents := gpuTimed(t, ctx, s, runSpin, func() error { return cuda.CopyAsync(s, dst, src) })
	got, err := cuda.ToSlice[float32](s, y)
	require.NoError(t, err)
	require.Len(t, got, m*n)
	require.NoError(t, s.Synchronize())
	tr, err := tl.Stop()
	require.NoError(t, err)
	_, err = tl.Stop()
	require.ErrorIs(t, err, cupti.ErrStopped)

	count := map[cupti.Kind]int{}
	var spins []*cupti.Activity
	var spinAct, copyAct, gemm *cupti.Activity
	for i := range tr.Activities {
		a := &tr.Activities[i]
		count[a.Kind]++
		switch {
		case a.Kind == cupti.KindKernel && a.Name == "spin":
			spins = append(spins, a)
		case a.Kind == cupti.KindCopy && a.Name == "DtoD" && a.Bytes == big*4:
			copyAct = a
		case a.Kind == cupti.KindKernel && a.Call != nil && a.Call.Library == "cublas":
			gemm = a
		}
	}
	t.Logf("records: %v, API calls %d, Go calls %d, dropped %d", count, len(tr.APIs), len(tr.Calls), tr.Dropped)
	for _, kd := range []cupti.Kind{cupti.KindKernel, cupti.KindCopy, cupti.KindMemset, cupti.KindSync} {
		assert.NotZero(t, count[kd], "%v records", kd)
	}
	if count[cupti.KindMemory] == 0 {
		t.Logf("no memory records: the allocations came from the package's cache, not the driver")
	}
	assert.Zero(t, tr.Dropped)
	// In GPU order: the first spin's gate, the timed spin, the copy's gate.
	require.Len(t, spins, 3, "the spin kernels' records")
	slices.SortFunc(spins, func(a, b *cupti.Activity) int { return cmp.Compare(a.Start, b.Start) })
	spinAct = spins[1]
	require.NotNil(t, copyAct, "the large copy's record")
	require.NotNil(t, gemm, "a kernel of the cuBLAS GEMM, linked to cublas.Gemm")
	assert.Equal(t, "Gemm", gemm.Call.Routine)
	assert.Contains(t, gemm.Call.File, "gpu_test.go")
	require.NotNil(t, spinAct.Call)
	assert.Equal(t, "Launch", spinAct.Call.Op)
	assert.Contains(t, spinAct.Call.Function, "cupti_test.TestGPUTimeline")
	assert.Equal(t, [3]int32{spinN / 256, 1, 1}, spinAct.Grid)
	require.NotNil(t, spinAct.API)
	assert.Contains(t, spinAct.API.Name, "cuLaunchKernel")
	require.NotNil(t, copyAct.Call)
	assert.Equal(t, "Copy", copyAct.Call.Op)

	for _, c := range []struct {
		what   string
		events time.Duration
		a      *cupti.Activity
	}{{"spin kernel", spinEvents, spinAct}, {"1 GiB DtoD copy", copyEvents, copyAct}} {
		ratio := float64(c.a.Duration()) / float64(c.events)
		t.Logf("%s: CUPTI %v, CUDA events %v (ratio %.4f)", c.what, c.a.Duration(), c.events, ratio)
		assert.InDelta(t, 1, ratio, 0.05, "%s: CUPTI's duration within 5%% of the events'", c.what)
	}

	var buf bytes.Buffer
	require.NoError(t, tr.WriteChrome(&buf))
	require.True(t, json.Valid(buf.Bytes()))
	if p := os.Getenv("GOCUDA_TIMELINE_OUT"); p != "" {
		require.NoError(t, os.WriteFile(p, buf.Bytes(), 0o644))
	}
}

// BenchmarkGPULaunchTimeline is the launch row with the timeline compiled in: off
// (the cuda package's hook is one branch) and on (each launch also pushes and pops
// its id in CUPTI, on a locked thread, and CUPTI records the kernel).
func BenchmarkGPULaunchTimeline(b *testing.B) {
	ctx, s := cudatest.Stream(b, cudatest.Kernels)
	cudatest.RequireLibrary(b, nvrtcraw.Library())
	out, err := nvrtc.Compile(`extern "C" __global__ void empty() {}`, "empty.cu", nvrtc.Options{Context: ctx})
	require.NoError(b, err)
	mod, err := out.Load(ctx)
	require.NoError(b, err)
	defer mod.Close()
	f, err := mod.Function("empty")
	require.NoError(b, err)
	run := func(b *testing.B) {
		for i := range b.N {
			if err := f.Launch(s, cuda.D1(1), cuda.D1(32), 0); err != nil {
				b.Fatal(err)
			}
			if i%1024 == 1023 {
				_ = s.Synchronize()
			}
		}
		_ = s.Synchronize()
	}
	b.Run("off", run)
	b.Run("on", func(b *testing.B) {
		cudatest.RequireLibrary(b, cuptiraw.Library())
		tl, err := cupti.Start()
		require.NoError(b, err)
		run(b)
		b.StopTimer()
		_, err = tl.Stop()
		require.NoError(b, err)
	})
}
