package nvrtc_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/dl"
	"github.com/gocuda/gocuda/nvrtc"
	"github.com/gocuda/gocuda/nvrtc/nvrtcraw"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scaleSrc has an extern "C" kernel, found by its name, and a template, found through
// name expressions; FACTOR comes from an included header and OFFSET from a flag.
const scaleSrc = `
#include "factor.h"

extern "C" __global__ void scale(float* x, float a, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] *= a;
}

template <typename T>
__global__ void affine(T* x, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] = x[i] * T(FACTOR) + T(OFFSET);
}
`

// scaleOptions are the options scaleSrc needs, with the two instances of affine.
func scaleOptions() nvrtc.Options {
	return nvrtc.Options{
		Headers:         []nvrtc.Header{{Name: "factor.h", Source: "#define FACTOR 3\n"}},
		Flags:           []string{"-DOFFSET=0.5", "-std=c++17"},
		NameExpressions: []string{"affine<float>", "affine<double>"},
	}
}

// archNumber returns the number of an architecture: 90 of sm_90 and compute_90.
func archNumber(arch string) string {
	return strings.TrimPrefix(strings.TrimPrefix(arch, "sm_"), "compute_")
}

// Bad arguments are reported before NVRTC is loaded (in CI, where it is absent, a
// call to NVRTC would fail with its *dl.LibraryError instead).
func TestCompileArgumentChecks(t *testing.T) {
	const src = `extern "C" __global__ void k() {}`
	for name, o := range map[string]nvrtc.Options{
		"arch flag":            {Flags: []string{"-arch=sm_90"}},
		"arch flag, two words": {Flags: []string{"--gpu-architecture", "sm_90"}},
		"malformed arch":       {Arch: "sm90"},
		"unknown arch kind":    {Arch: "lto_90"},
		"NUL in a flag":        {Flags: []string{"-DX=\x00"}},
		"empty header name":    {Headers: []nvrtc.Header{{Source: "int x;"}}},
		"NUL in a header":      {Headers: []nvrtc.Header{{Name: "h.h", Source: "int\x00x;"}}},
		"empty expression":     {NameExpressions: []string{""}},
		"LTO flag":             {Flags: []string{"-dlto"}},
		"LTO flag, long":       {Flags: []string{"--dlink-time-opt"}},
	} {
		out, err := nvrtc.Compile(src, "k.cu", o)
		assert.Nil(t, out, name)
		require.ErrorIs(t, err, cuda.ErrInvalidArgument, name)
		assert.NotErrorIs(t, err, dl.ErrLibraryNotFound, name)
		assert.Contains(t, err.Error(), "nvrtc: compiling k.cu", name)
	}
	_, err := nvrtc.Compile("int x;\x00", "k.cu", nvrtc.Options{})
	assert.ErrorIs(t, err, cuda.ErrInvalidArgument, "NUL in the source")
	_, err = nvrtc.Compile(src, "k\x00.cu", nvrtc.Options{})
	assert.ErrorIs(t, err, cuda.ErrInvalidArgument, "NUL in the name")
}

// Compiling for NVRTC's default architecture, a virtual one and a real one: PTX
// always, a cubin for the real one only.
func TestCompile(t *testing.T) {
	cudatest.RequireLibrary(t, nvrtcraw.Library())
	var major, minor int32
	require.NoError(t, nvrtcraw.Version(&major, &minor))
	archs, err := nvrtc.SupportedArchs()
	require.NoError(t, err)
	t.Logf("NVRTC %d.%d, architectures %v", major, minor, archs)
	require.NotEmpty(t, archs)
	assert.True(t, slices.IsSorted(archs), "%v", archs)

	out, err := nvrtc.Compile(scaleSrc, "scale.cu", scaleOptions())
	require.NoError(t, err)
	assert.Empty(t, out.Arch)
	assert.Nil(t, out.CUBIN, "no cubin for a virtual architecture")
	assert.Contains(t, string(out.PTX), ".entry scale(")
	assert.NotContains(t, string(out.PTX), "\x00", "the PTX is text, without its NUL")
	assert.Equal(t, out.PTX, out.Image())

	for _, arch := range []string{fmt.Sprintf("compute_%d", archs[0]), fmt.Sprintf("sm_%d", archs[len(archs)-1])} {
		o := scaleOptions()
		o.Arch = arch
		out, err := nvrtc.Compile(scaleSrc, "scale.cu", o)
		require.NoError(t, err, arch)
		assert.Equal(t, arch, out.Arch)
		assert.Contains(t, string(out.PTX), ".target sm_"+archNumber(arch), arch)
		if strings.HasPrefix(arch, "sm_") {
			require.NotEmpty(t, out.CUBIN, arch)
			assert.True(t, bytes.HasPrefix(out.CUBIN, []byte("\x7fELF")), "%s: a cubin is an ELF image", arch)
			assert.Equal(t, out.CUBIN, out.Image())
		} else {
			assert.Nil(t, out.CUBIN, arch)
		}
	}
}

// Options.LTO compiles to LTO-IR only, for nvjitlink: no PTX, no cubin, no image.
func TestCompileLTO(t *testing.T) {
	cudatest.RequireLibrary(t, nvrtcraw.Library())
	archs, err := nvrtc.SupportedArchs()
	require.NoError(t, err)
	for _, arch := range []string{"", fmt.Sprintf("sm_%d", archs[len(archs)-1])} {
		o := scaleOptions()
		o.Arch, o.LTO = arch, true
		out, err := nvrtc.Compile(scaleSrc, "scale.cu", o)
		require.NoError(t, err, arch)
		assert.NotEmpty(t, out.LTOIR, arch)
		assert.Nil(t, out.PTX, arch)
		assert.Nil(t, out.CUBIN, arch)
		assert.Nil(t, out.Image(), arch)
		assert.Len(t, out.LoweredNames, len(o.NameExpressions), arch)
	}
	out, err := nvrtc.Compile(scaleSrc, "scale.cu", scaleOptions())
	require.NoError(t, err)
	assert.Nil(t, out.LTOIR, "no LTO-IR without Options.LTO")
}

// Templated kernels are found through their name expressions: each has a distinct
// lowered (mangled) name, which the PTX defines as an entry.
func TestCompileNameExpressions(t *testing.T) {
	cudatest.RequireLibrary(t, nvrtcraw.Library())
	o := scaleOptions()
	out, err := nvrtc.Compile(scaleSrc, "scale.cu", o)
	require.NoError(t, err)
	require.Len(t, out.LoweredNames, len(o.NameExpressions))
	seen := map[string]bool{}
	for _, e := range o.NameExpressions {
		n := out.LoweredNames[e]
		assert.True(t, strings.HasPrefix(n, "_Z"), "%s lowers to a mangled name, got %q", e, n)
		assert.False(t, seen[n], "%s: %s lowered twice", e, n)
		seen[n] = true
		assert.Contains(t, string(out.PTX), ".entry "+n+"(", e)
	}

	o.NameExpressions = []string{"affine<no_such_type>"}
	_, err = nvrtc.Compile(scaleSrc, "scale.cu", o)
	var ce *nvrtc.CompileError
	require.True(t, errors.As(err, &ce), "a name expression that does not compile: %v", err)
	assert.Contains(t, ce.Log, "no_such_type")
}

// A source that does not compile: a *CompileError with NVRTC's log, naming the
// program, and matching ErrCompilation.
func TestCompileError(t *testing.T) {
	cudatest.RequireLibrary(t, nvrtcraw.Library())
	const bad = "extern \"C\" __global__ void k(float* x) {\n\tx[0] = undeclared_name;\n}\n"
	out, err := nvrtc.Compile(bad, "bad.cu", nvrtc.Options{})
	assert.Nil(t, out)
	var ce *nvrtc.CompileError
	require.True(t, errors.As(err, &ce), "got %T: %v", err, err)
	assert.Equal(t, "bad.cu", ce.Name)
	assert.ErrorIs(t, err, nvrtcraw.ErrCompilation)
	assert.Contains(t, ce.Log, "bad.cu")
	assert.Contains(t, ce.Log, "undeclared_name")
	assert.Contains(t, err.Error(), ce.Log, "the error shows the log")
	t.Logf("log:\n%s", ce.Log)

	// A missing header is a compile error too; given as a Header, it compiles.
	const inc = "#include \"missing.h\"\nextern \"C\" __global__ void k() { }\n"
	_, err = nvrtc.Compile(inc, "inc.cu", nvrtc.Options{})
	require.True(t, errors.As(err, &ce), "got %T: %v", err, err)
	assert.Contains(t, ce.Log, "missing.h")
	_, err = nvrtc.Compile(inc, "inc.cu", nvrtc.Options{Headers: []nvrtc.Header{{Name: "missing.h", Source: "\n"}}})
	assert.NoError(t, err)

	// An option NVRTC does not know: the typed error, with its status.
	_, err = nvrtc.Compile(inc, "inc.cu", nvrtc.Options{Flags: []string{"--no-such-option"}})
	require.True(t, errors.As(err, &ce), "got %T: %v", err, err)
	assert.ErrorIs(t, err, nvrtcraw.ErrInvalidOption)
}

// Compile for the device of a context, load the result with LoadModule and run its
// kernels: the extern "C" one by name, the templated ones through their name
// expressions, as a cubin (sm_XY) and as PTX (compute_XY, compiled by the driver).
func TestCompileAndLaunch(t *testing.T) {
	ctx, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, nvrtcraw.Library())
	arch, err := nvrtc.DeviceArch(ctx.Device())
	require.NoError(t, err)
	major, minor, err := ctx.Device().ComputeCapability()
	require.NoError(t, err)
	t.Logf("device compute capability %d.%d: %s", major, minor, arch)

	o := scaleOptions()
	o.Context = ctx
	out, err := nvrtc.Compile(scaleSrc, "scale.cu", o)
	require.NoError(t, err)
	assert.Equal(t, arch, out.Arch, "the device's architecture")
	if strings.HasPrefix(arch, "sm_") {
		assert.NotEmpty(t, out.CUBIN)
	}
	ptxOnly := o
	ptxOnly.Context, ptxOnly.Arch = nil, "compute_"+archNumber(arch)
	ptx, err := nvrtc.Compile(scaleSrc, "scale.cu", ptxOnly)
	require.NoError(t, err)
	require.Nil(t, ptx.CUBIN)

	const n = 1000
	r := cudatest.Rand(7)
	host := cudatest.RandFloat32s(r, n)
	for name, o := range map[string]*nvrtc.Output{"cubin": out, "ptx": ptx} {
		mod, err := o.Load(ctx)
		require.NoError(t, err, name)
		defer mod.Close()

		x, err := cuda.AllocFor[float32](s, n)
		require.NoError(t, err)
		defer x.Close()
		require.NoError(t, cuda.CopyToDeviceAsync(s, x, host))
		k, err := o.Function(mod, "scale")
		require.NoError(t, err, name)
		require.NoError(t, k.Launch(s, cuda.D1(cuda.Blocks(n, 128)), cuda.D1(128), 0, x, float32(-2), int32(n)), name)
		kf, err := o.Function(mod, "affine<float>")
		require.NoError(t, err, name)
		require.NoError(t, kf.Launch(s, cuda.D1(cuda.Blocks(n, 128)), cuda.D1(128), 0, x, int32(n)), name)
		got := make([]float32, n)
		require.NoError(t, cuda.CopyFromDevice(got, x))
		for i := range n {
			want := (host[i]*-2)*3 + 0.5
			require.InDelta(t, want, got[i], 1e-5, "%s element %d", name, i)
		}

		d := make([]float64, n)
		for i := range d {
			d[i] = float64(i) - 0.25
		}
		xd, err := cuda.AllocFor[float64](s, n)
		require.NoError(t, err)
		defer xd.Close()
		require.NoError(t, cuda.CopyToDeviceAsync(s, xd, d))
		kd, err := o.Function(mod, "affine<double>")
		require.NoError(t, err, name)
		require.NoError(t, kd.Launch(s, cuda.D1(cuda.Blocks(n, 128)), cuda.D1(128), 0, xd, int32(n)), name)
		gotd := make([]float64, n)
		require.NoError(t, cuda.CopyFromDevice(gotd, xd))
		for i := range n {
			require.Equal(t, d[i]*3+0.5, gotd[i], "%s element %d", name, i)
		}
	}
}
