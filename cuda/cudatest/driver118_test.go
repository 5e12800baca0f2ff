package cudatest_test

import (
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/cuda/cudatest/internal/headersyms"
	"github.com/gocuda/gocuda/dl"
)

// The committed list of the CUDA 11.8 driver's symbols is what the 11.8 header
// declares: run go generate ./cuda/cudatest after changing how it is derived.
func TestDriver118Symbols(t *testing.T) {
	header, err := headersyms.Find118()
	if errors.Is(err, headersyms.ErrNoHeader) {
		t.Skipf("cannot check the CUDA 11.8 symbol list: %v", err)
	}
	require.NoError(t, err)
	want, err := headersyms.Symbols(header)
	require.NoError(t, err)
	require.Equal(t, want, cudatest.Driver118Symbols(),
		"zz_generated_driver118.go is stale: run go generate ./cuda/cudatest (header %s)", header)
}

// exported returns the functions in the dynamic symbol table of the library at path.
func exported(t *testing.T, path string) []string {
	t.Helper()
	f, err := elf.Open(path)
	require.NoError(t, err)
	defer f.Close()
	syms, err := f.DynamicSymbols()
	require.NoError(t, err)
	var out []string
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Section != elf.SHN_UNDEF && elf.ST_BIND(s.Info) == elf.STB_GLOBAL {
			out = append(out, s.Name)
		}
	}
	slices.Sort(out)
	return out
}

// Built as the 11.8 driver, the fake exports exactly those of its symbols that the
// 11.8 header names, with the control API, and leaves out the omitted ones too.
func TestDriver118Build(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("needs gcc")
	}
	// The plain fake: the one Main installed, unless that one is not plain.
	lib := os.Getenv("GOCUDA_CUDA_LIB")
	if !cudatest.Active() || os.Getenv(cudatest.EnvOmit) != "" || os.Getenv(cudatest.EnvDriver) != "" {
		lib = cudatest.Build(t)
	}
	plain := exported(t, lib)
	old := exported(t, cudatest.Build(t, cudatest.Driver118(), cudatest.Omit("cuMemsetD8Async")))
	in118 := map[string]bool{}
	for _, s := range cudatest.Driver118Symbols() {
		in118[s] = true
	}
	var want, newer []string
	for _, s := range plain {
		switch {
		case strings.HasPrefix(s, "fakecuda_"), in118[s] && s != "cuMemsetD8Async":
			want = append(want, s)
		case !in118[s]:
			newer = append(newer, s)
		}
	}
	assert.Equal(t, want, old)
	assert.NotEmpty(t, newer, "the fake defines symbols newer than CUDA 11.8 (cuCtxCreate_v4...)")
	assert.Contains(t, newer, "cuCtxCreate_v4")
	assert.Contains(t, old, "cuCtxCreate_v2")
	assert.Contains(t, old, "cuEventElapsedTime")
}

// On the fake posing as CUDA 11.8: its version, its missing symbols as typed errors,
// and the memory pools 11.8 knows.
func TestDriver118(t *testing.T) {
	if !child(t, map[string]string{cudatest.EnvDriver: "11.8"}) {
		return
	}
	require.True(t, cudatest.Strict())
	cudatest.Check(t)
	var v int32
	require.NoError(t, cudaraw.DriverGetVersion(&v))
	require.Equal(t, int32(11080), v)
	// Main built the 11.8 pose (TestDriver118Build checks the build itself).
	for _, s := range exported(t, os.Getenv("GOCUDA_CUDA_LIB")) {
		assert.True(t, strings.HasPrefix(s, "fakecuda_") || slices.Contains(cudatest.Driver118Symbols(), s), "%s is exported", s)
	}

	lockThread(t)
	require.NoError(t, cudaraw.Init(0))
	var c cudaraw.CUcontext
	err := cudaraw.CtxCreate(&c, nil, 0, 0)
	require.ErrorIs(t, err, dl.ErrSymbolNotFound)
	var se *dl.SymbolError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "cuCtxCreate_v4", se.Symbol)
	assert.Equal(t, "libcuda.so.1", se.Soname)
	require.NoError(t, cudaraw.DevicePrimaryCtxRetain(&c, 0))
	defer func() { require.NoError(t, cudaraw.DevicePrimaryCtxRelease(0)) }()
	require.NoError(t, cudaraw.CtxSetCurrent(c))
	defer func() { require.NoError(t, cudaraw.CtxSetCurrent(0)) }()

	// Device pools are there; host and managed ones are not in 11.8's enums.
	props := cudaraw.CUmemPoolProps{AllocType: cudaraw.CU_MEM_ALLOCATION_TYPE_PINNED,
		Location: cudaraw.CUmemLocation{Type: cudaraw.CU_MEM_LOCATION_TYPE_DEVICE}}
	var p cudaraw.CUmemoryPool
	require.NoError(t, cudaraw.MemPoolCreate(&p, &props))
	require.NoError(t, cudaraw.MemPoolDestroy(p))
	props.Location.Type = cudaraw.CU_MEM_LOCATION_TYPE_HOST
	require.ErrorIs(t, cudaraw.MemPoolCreate(&p, &props), cudaraw.CUDA_ERROR_INVALID_VALUE)
	props = cudaraw.CUmemPoolProps{AllocType: cudaraw.CU_MEM_ALLOCATION_TYPE_MANAGED,
		Location: cudaraw.CUmemLocation{Type: cudaraw.CU_MEM_LOCATION_TYPE_DEVICE}}
	require.ErrorIs(t, cudaraw.MemPoolCreate(&p, &props), cudaraw.CUDA_ERROR_INVALID_VALUE)
	n, _ := cudatest.Violations()
	assert.Zero(t, n, "refusing an unknown pool is no violation")
}

// An unknown FAKECUDA_DRIVER fails the run instead of testing another driver.
func TestUnknownDriver(t *testing.T) {
	if !cudatest.Active() {
		t.Skip("needs the strict fake driver")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.CommandContext(t.Context(), exe, "-test.run", "^$")
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "GOCUDA_CUDA_LIB" && k != cudatest.EnvFake && k != cudatest.EnvDriver {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, cudatest.EnvDriver+"=9.0")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "%s", out)
	assert.Equal(t, 2, ee.ExitCode())
	assert.Contains(t, string(out), `FAKECUDA_DRIVER="9.0": no such driver`)
}
