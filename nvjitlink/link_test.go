package nvjitlink_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/dl"
	"github.com/gocuda/gocuda/nvjitlink"
	"github.com/gocuda/gocuda/nvjitlink/nvjitlinkraw"
	"github.com/gocuda/gocuda/nvrtc"
	"github.com/gocuda/gocuda/nvrtc/nvrtcraw"
)

// kernelSrc calls axpy, which it declares only: deviceSrc defines it. Apart, each is
// a relocatable unit; linked, they are one program.
const (
	kernelSrc = `
extern __device__ float axpy(float a, float x, float y);

extern "C" __global__ void saxpy(const float* x, float* y, float a, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) y[i] = axpy(a, x[i], y[i]);
}
`
	deviceSrc = `
__device__ float axpy(float a, float x, float y) { return a * x + y; }
`
)

// Bad arguments are reported before nvJitLink is loaded (in CI, where it is absent, a
// call would fail with its *dl.LibraryError instead).
func TestLinkArgumentChecks(t *testing.T) {
	ptx := nvjitlink.Input{Kind: nvjitlink.PTX, Name: "k.ptx", Data: []byte(".version 8.0\n")}
	arch := nvjitlink.Options{Arch: "sm_90"}
	for name, c := range map[string]struct {
		o      nvjitlink.Options
		inputs []nvjitlink.Input
	}{
		"no inputs":            {arch, nil},
		"no kind":              {arch, []nvjitlink.Input{{Name: "k", Data: []byte{1}}}},
		"unknown kind":         {arch, []nvjitlink.Input{{Kind: 99, Name: "k", Data: []byte{1}}}},
		"no data":              {arch, []nvjitlink.Input{ptx, {Kind: nvjitlink.LTOIR, Name: "empty"}}},
		"NUL in a name":        {arch, []nvjitlink.Input{{Kind: nvjitlink.PTX, Name: "k\x00", Data: []byte{1}}}},
		"NUL in a flag":        {nvjitlink.Options{Arch: "sm_90", Flags: []string{"-O3\x00"}}, []nvjitlink.Input{ptx}},
		"arch flag":            {nvjitlink.Options{Arch: "sm_90", Flags: []string{"-arch=sm_80"}}, []nvjitlink.Input{ptx}},
		"arch flag, two words": {nvjitlink.Options{Arch: "sm_90", Flags: []string{"-arch", "sm_80"}}, []nvjitlink.Input{ptx}},
		"ptx output":           {nvjitlink.Options{Arch: "sm_90", Flags: []string{"-ptx"}}, []nvjitlink.Input{ptx}},
		"virtual arch":         {nvjitlink.Options{Arch: "compute_90"}, []nvjitlink.Input{ptx}},
		"malformed arch":       {nvjitlink.Options{Arch: "sm90"}, []nvjitlink.Input{ptx}},
		"no arch, no context":  {nvjitlink.Options{}, []nvjitlink.Input{ptx}},
	} {
		out, err := nvjitlink.Link(c.o, c.inputs...)
		assert.Nil(t, out, name)
		require.ErrorIs(t, err, cuda.ErrInvalidArgument, name)
		assert.NotErrorIs(t, err, dl.ErrLibraryNotFound, name)
		var le *nvjitlink.LinkError
		assert.False(t, errors.As(err, &le), "%s: an argument error is not a link error", name)
		assert.Contains(t, err.Error(), "nvjitlink: linking", name)
	}
}

// Kinds are nvJitLink's input types, named.
func TestKind(t *testing.T) {
	for k, raw := range map[nvjitlink.Kind]nvjitlinkraw.NvJitLinkInputType{
		nvjitlink.CUBIN: nvjitlinkraw.NVJITLINK_INPUT_CUBIN, nvjitlink.PTX: nvjitlinkraw.NVJITLINK_INPUT_PTX,
		nvjitlink.LTOIR: nvjitlinkraw.NVJITLINK_INPUT_LTOIR, nvjitlink.Fatbin: nvjitlinkraw.NVJITLINK_INPUT_FATBIN,
		nvjitlink.Object: nvjitlinkraw.NVJITLINK_INPUT_OBJECT, nvjitlink.Library: nvjitlinkraw.NVJITLINK_INPUT_LIBRARY,
		nvjitlink.Index: nvjitlinkraw.NVJITLINK_INPUT_INDEX, nvjitlink.Any: nvjitlinkraw.NVJITLINK_INPUT_ANY,
	} {
		assert.Equal(t, int32(raw), int32(k))
		assert.Equal(t, strings.TrimPrefix(raw.String(), "NVJITLINK_INPUT_"), strings.ToUpper(k.String()))
	}
	assert.Equal(t, "Kind(0)", nvjitlink.Kind(0).String())
}

// A LinkError shows its status and log, names the input nvJitLink rejected, and
// unwraps to the status.
func TestLinkErrorText(t *testing.T) {
	err := error(&nvjitlink.LinkError{Log: "error: undefined reference to 'f'", Err: nvjitlinkraw.NVJITLINK_ERROR_FINALIZE})
	assert.ErrorIs(t, err, nvjitlinkraw.ErrFinalize)
	assert.Equal(t, "nvjitlink: linking: "+nvjitlinkraw.NVJITLINK_ERROR_FINALIZE.Error()+"\nerror: undefined reference to 'f'", err.Error())
	err = &nvjitlink.LinkError{Input: "a.ptx", Err: nvjitlinkraw.NVJITLINK_ERROR_INVALID_INPUT}
	assert.ErrorIs(t, err, nvjitlinkraw.ErrInvalidInput)
	assert.Equal(t, "nvjitlink: adding a.ptx: "+nvjitlinkraw.NVJITLINK_ERROR_INVALID_INPUT.Error(), err.Error())
}

// compile compiles src for ctx's device with NVRTC as a relocatable unit: LTO-IR
// with lto, else PTX and a cubin.
func compile(t *testing.T, ctx *cuda.Context, src, name string, lto bool) *nvrtc.Output {
	t.Helper()
	out, err := nvrtc.Compile(src, name, nvrtc.Options{Context: ctx, LTO: lto, Flags: []string{"-rdc=true"}})
	require.NoError(t, err, name)
	return out
}

// requireLibs skips without nvJitLink or NVRTC (or fails, with GOCUDA_GPU_TESTS=require).
func requireLibs(t *testing.T) {
	cudatest.RequireLibrary(t, nvjitlinkraw.Library())
	cudatest.RequireLibrary(t, nvrtcraw.Library())
}

// runSaxpy loads a linked cubin, runs saxpy over n elements and checks y = a*x + y
// against the CPU.
func runSaxpy(t *testing.T, ctx *cuda.Context, s *cuda.Stream, out *nvjitlink.Output) {
	t.Helper()
	mod, err := out.Load(ctx)
	require.NoError(t, err)
	defer mod.Close()
	k, err := mod.Function("saxpy")
	require.NoError(t, err)

	const n, a = 10000, float32(2.5)
	r := cudatest.Rand(11)
	hx, hy := cudatest.RandFloat32s(r, n), cudatest.RandFloat32s(r, n)
	x, err := cuda.AllocFrom(s, hx)
	require.NoError(t, err)
	defer x.Close()
	y, err := cuda.AllocFrom(s, hy)
	require.NoError(t, err)
	defer y.Close()
	require.NoError(t, k.Launch(s, cuda.D1(cuda.Blocks(n, 256)), cuda.D1(256), 0, x, y, a, int32(n)))
	got := make([]float32, n)
	require.NoError(t, cuda.CopyFromDevice(got, y))
	for i := range n {
		want := a*hx[i] + hy[i]
		require.InDelta(t, want, got[i], 1e-5*float64(1+abs(want)), "element %d", i)
	}
}

func abs(v float32) float32 {
	if v < 0 {
		return -v
	}
	return v
}

// Two translation units compiled to LTO-IR, one calling an extern __device__
// function of the other, linked into one cubin, loaded and run; linked
// concurrently too.
func TestGPULinkLTO(t *testing.T) {
	ctx, s := cudatest.Stream(t, cudatest.Kernels)
	requireLibs(t)
	major, minor, err := nvjitlink.Version()
	require.NoError(t, err)
	t.Logf("nvJitLink %d.%d", major, minor)

	a, b := compile(t, ctx, kernelSrc, "kernel.cu", true), compile(t, ctx, deviceSrc, "device.cu", true)
	require.NotEmpty(t, a.LTOIR)
	require.NotEmpty(t, b.LTOIR)
	assert.Nil(t, a.PTX, "LTO-IR only")
	assert.Nil(t, a.CUBIN, "LTO-IR only")
	assert.Nil(t, a.Image(), "LTO-IR is linked, not loaded")
	inputs := []nvjitlink.Input{
		{Kind: nvjitlink.LTOIR, Name: "kernel.cu", Data: a.LTOIR},
		{Kind: nvjitlink.LTOIR, Name: "device.cu", Data: b.LTOIR},
	}
	out, err := nvjitlink.Link(nvjitlink.Options{Context: ctx, Flags: []string{"-O3"}}, inputs...)
	require.NoError(t, err)
	cc, cm, err := ctx.Device().ComputeCapability()
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("sm_%d%d", cc, cm), out.Arch)
	assert.True(t, bytes.HasPrefix(out.CUBIN, []byte("\x7fELF")), "a cubin is an ELF image")
	t.Logf("linked cubin: %d bytes; log %q", len(out.CUBIN), out.Log)
	runSaxpy(t, ctx, s, out)

	// Links share nothing: concurrent ones give the same cubin.
	var wg sync.WaitGroup
	outs := make([]*nvjitlink.Output, 4)
	errs := make([]error, len(outs))
	for i := range outs {
		wg.Go(func() {
			outs[i], errs[i] = nvjitlink.Link(nvjitlink.Options{Arch: out.Arch, Flags: []string{"-O3"}}, inputs...)
		})
	}
	wg.Wait()
	for i := range outs {
		require.NoError(t, errs[i], "link %d", i)
		assert.Equal(t, out.CUBIN, outs[i].CUBIN, "link %d", i)
	}
}

// The same units as relocatable PTX and a relocatable cubin, linked without LTO.
func TestGPULinkPTXAndCUBIN(t *testing.T) {
	ctx, s := cudatest.Stream(t, cudatest.Kernels)
	requireLibs(t)
	a, b := compile(t, ctx, kernelSrc, "kernel.cu", false), compile(t, ctx, deviceSrc, "device.cu", false)
	require.NotEmpty(t, b.CUBIN, "a cubin for the device's architecture")
	out, err := nvjitlink.Link(nvjitlink.Options{Context: ctx},
		nvjitlink.Input{Kind: nvjitlink.PTX, Name: "kernel.ptx", Data: a.PTX},
		nvjitlink.Input{Kind: nvjitlink.CUBIN, Name: "device.cubin", Data: b.CUBIN})
	require.NoError(t, err)
	runSaxpy(t, ctx, s, out)
}

// A unit whose extern __device__ function no input defines: a *LinkError whose log
// names the symbol; and an input nvJitLink cannot read: a *LinkError naming it.
func TestGPULinkErrors(t *testing.T) {
	ctx, _ := cudatest.Stream(t, cudatest.Kernels)
	requireLibs(t)
	a := compile(t, ctx, kernelSrc, "kernel.cu", true)
	out, err := nvjitlink.Link(nvjitlink.Options{Context: ctx}, nvjitlink.Input{Kind: nvjitlink.LTOIR, Name: "kernel.cu", Data: a.LTOIR})
	assert.Nil(t, out)
	var le *nvjitlink.LinkError
	require.True(t, errors.As(err, &le), "got %T: %v", err, err)
	assert.Empty(t, le.Input, "the link failed, not an input")
	assert.Contains(t, le.Log, "axpy", "the log names the undefined symbol")
	var st nvjitlinkraw.Result
	assert.True(t, errors.As(err, &st), "unwraps to the nvJitLink status")
	assert.Contains(t, err.Error(), le.Log, "the error shows the log")
	t.Logf("%v", err)

	_, err = nvjitlink.Link(nvjitlink.Options{Context: ctx}, nvjitlink.Input{Kind: nvjitlink.CUBIN, Name: "junk.cubin", Data: []byte("not a cubin")})
	require.True(t, errors.As(err, &le), "got %T: %v", err, err)
	t.Logf("%v", err)
	if le.Input == "" { // some versions reject it only when the link completes
		assert.Error(t, le.Err)
	} else {
		assert.Equal(t, "junk.cubin", le.Input)
	}

	_, err = nvjitlink.Link(nvjitlink.Options{Context: ctx, Flags: []string{"-no-such-option"}}, nvjitlink.Input{Kind: nvjitlink.LTOIR, Data: a.LTOIR})
	require.True(t, errors.As(err, &le), "got %T: %v", err, err)
	assert.ErrorIs(t, err, nvjitlinkraw.ErrUnrecognizedOption)
}
