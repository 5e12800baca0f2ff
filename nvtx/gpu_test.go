package nvtx_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/nvrtc"
	"github.com/gocuda/gocuda/nvrtc/nvrtcraw"
	"github.com/gocuda/gocuda/nvtx"
)

// TestGPURangesUnderNcu launches one kernel inside a range of domain "gocuda-ncu"
// and one outside it. Run under Nsight Compute with
//
//	ncu --nvtx --nvtx-include "gocuda-ncu@inside" ./nvtx.test -test.run TestGPURangesUnderNcu
//
// only inside_k is profiled; ranges start and end on different goroutines here, as a
// Go program's do. Without a tool it runs the kernels.
func TestGPURangesUnderNcu(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("the child without a tool")
	}
	ctx, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, nvrtcraw.Library())
	out, err := nvrtc.Compile(`extern "C" __global__ void inside_k(int* x) { x[threadIdx.x] += 1; }
extern "C" __global__ void outside_k(int* x) { x[threadIdx.x] += 2; }`, "ncu.cu", nvrtc.Options{Context: ctx})
	require.NoError(t, err)
	mod, err := out.Load(ctx)
	require.NoError(t, err)
	defer mod.Close()
	inside, err := mod.Function("inside_k")
	require.NoError(t, err)
	outside, err := mod.Function("outside_k")
	require.NoError(t, err)
	x, err := cuda.AllocFrom(s, make([]int32, 32))
	require.NoError(t, err)
	defer x.Close()

	d := nvtx.NewDomain("gocuda-ncu")
	t.Logf("a tool records the ranges: %v (injection: %d)", nvtx.Enabled(), nvtx.InitResult())
	r := d.Start("inside")
	require.NoError(t, inside.Launch(s, cuda.D1(1), cuda.D1(32), 0, x))
	require.NoError(t, s.Synchronize())
	done := make(chan struct{})
	go func() { r.End(); close(done) }()
	<-done
	require.NoError(t, outside.Launch(s, cuda.D1(1), cuda.D1(32), 0, x))
	got, err := cuda.ToSlice[int32](s, x)
	require.NoError(t, err)
	require.Equal(t, int32(3), got[0])
}
