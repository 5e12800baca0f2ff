package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// floorTable reads the registry table of tools/floor/floor.cu: workload ID -> C function.
func floorTable(t *testing.T) (map[string]string, string) {
	src, err := os.ReadFile(filepath.Join("..", "floor", "floor.cu"))
	require.NoError(t, err)
	s := string(src)
	start := strings.Index(s, "workloads[] = {")
	require.GreaterOrEqual(t, start, 0, "floor.cu: no workloads[] table")
	end := strings.Index(s[start:], "};")
	require.Greater(t, end, 0)
	row := regexp.MustCompile(`\{"([^"]+)",\s*(\w+),`)
	table := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(s[start:start+end], -1) {
		_, dup := table[m[1]]
		assert.False(t, dup, "floor.cu registers %s twice", m[1])
		table[m[1]] = m[2]
	}
	require.NotEmpty(t, table)
	return table, s
}

func TestRegistryMatchesFloor(t *testing.T) {
	table, src := floorTable(t)
	seen := map[string]bool{}
	for _, w := range workloads {
		assert.False(t, seen[w.ID], "duplicate workload %s", w.ID)
		seen[w.ID] = true
		fn, ok := table[w.ID]
		if assert.True(t, ok, "workload %s is not registered in floor.cu", w.ID) {
			assert.Equal(t, w.CFunc, fn, "workload %s", w.ID)
		}
		assert.Contains(t, src, "static double "+w.CFunc+"(long n)", "floor.cu defines no %s", w.CFunc)
		assert.NotEmpty(t, w.Desc, w.ID)
		assert.NotNil(t, w.Raw, "workload %s has no in-process implementation", w.ID)
	}
	for id := range table {
		assert.True(t, seen[id], "floor.cu registers %s, which workloads.go lacks", id)
	}
}

func TestGoBenchPatterns(t *testing.T) {
	for _, w := range workloads {
		if w.Go.Match == "" {
			assert.Empty(t, w.Go.Bench, w.ID)
			continue
		}
		assert.NotEmpty(t, w.Go.Pkg, w.ID)
		assert.NotContains(t, w.Go.Bench, "/", "%s: Bench selects top-level benchmarks only", w.ID)
		_, err := regexp.Compile(w.Go.Match)
		assert.NoError(t, err, w.ID)
		if w.Go.Exclude != "" {
			_, err := regexp.Compile(w.Go.Exclude)
			assert.NoError(t, err, w.ID)
		}
	}
}

func TestAllocPatterns(t *testing.T) {
	names := []string{
		"BenchmarkAlloc/device/4KiB", "BenchmarkAlloc/device/64MiB",
		"BenchmarkAlloc/pinned/4KiB", "BenchmarkAlloc/pinned-pool/4KiB",
		"BenchmarkAlloc/unified/64MiB", "BenchmarkAlloc/unified-pool/64MiB",
	}
	want := map[string][]string{ // workload -> names it may take
		"alloc/device/4KiB":        nil, // no plain cuMemAlloc path in gocuda
		"alloc/device-pool/4KiB":   {"BenchmarkAlloc/device/4KiB"},
		"alloc/device-pool/64MiB":  {"BenchmarkAlloc/device/64MiB"},
		"alloc/pinned/4KiB":        nil,
		"alloc/pinned-pool/4KiB":   {"BenchmarkAlloc/pinned/4KiB"},
		"alloc/unified/64MiB":      nil,
		"alloc/unified-pool/64MiB": {"BenchmarkAlloc/unified/64MiB"},
	}
	byID := map[string]Workload{}
	for _, w := range workloads {
		byID[w.ID] = w
	}
	for id, exp := range want {
		w, ok := byID[id]
		require.True(t, ok, id)
		var got []string
		for _, n := range names {
			if _, ok, err := MatchGo(w.Go, map[string][]Result{"cuda": {{Name: n}}}); ok {
				require.NoError(t, err)
				got = append(got, n)
			}
		}
		assert.Equal(t, exp, got, id)
	}
}

func TestSelect(t *testing.T) {
	all, err := Select(workloads, "")
	require.NoError(t, err)
	assert.Len(t, all, len(workloads))
	g, err := Select(workloads, "^graph/")
	require.NoError(t, err)
	require.Len(t, g, 2)
	assert.Equal(t, "graph/eager10", g[0].ID)
	_, err = Select(workloads, "(")
	assert.Error(t, err)
}

func TestPackageSelectors(t *testing.T) {
	got := packageSelectors(workloads)
	assert.Equal(t, []pkgSelector{
		{"cuda", "^Benchmark(Alloc)$"}, {"cuda", "^Benchmark(Launch(Empty)?)$"}, {"cuda", "^Benchmark(CallOverhead)$"},
		{"cuda", "^Benchmark(Handoff)$"}, {"cuda", "^Benchmark(StreamCreateDestroy)$"}, {"cuda", "^Benchmark(StreamPool)$"},
		{"cuda", "^Benchmark(Tasks)$"}, {"cuda", "^Benchmark(Pipeline)$"},
	}, got)
	got = packageSelectors([]Workload{
		{ID: "a", Go: GoBench{Pkg: "cublas", Bench: "Gemm"}}, {ID: "b", Go: GoBench{Pkg: "cuda", Bench: "X"}},
		{ID: "c", Go: GoBench{Pkg: "cublas", Bench: "Gemm"}}, {ID: "d"},
	})
	assert.Equal(t, []pkgSelector{{"cublas", "^Benchmark(Gemm)$"}, {"cuda", "^Benchmark(X)$"}}, got)
}

func TestTestBinaryName(t *testing.T) {
	dir := t.TempDir()
	assert.Equal(t, "tools_x", TestBinaryName(dir, "tools/x"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "packages"), []byte("cuda cuda\ninternal_gputest internal/gputest\n"), 0o644))
	assert.Equal(t, "cuda", TestBinaryName(dir, "cuda"))
	assert.Equal(t, "internal_gputest", TestBinaryName(dir, "internal/gputest"))
	_, err := testBinary(dir, "cuda")
	assert.ErrorContains(t, err, "build.sh")
}

func TestFloorBuildArgs(t *testing.T) {
	args := FloorBuildArgs("tools/floor/floor.cu", "/tmp/floor", "sm_90")
	assert.Equal(t, []string{"-O2", "-arch=sm_90", "-o", "/tmp/floor", "tools/floor/floor.cu", "-lcuda", "-lpthread"}, args)
}

func TestPTXHasKernels(t *testing.T) {
	for _, k := range []string{
		".visible .entry empty()", ".visible .entry axpb(", ".visible .entry fill_u32(", ".visible .entry add_u32(",
		".visible .entry read_sum(", ".target sm_90", ".version 8.0",
	} {
		assert.Contains(t, kernelsPTX, k)
	}
}

// ptxEntry returns the text of kernel name in ptx, from ".visible .entry name(" to its closing
// brace, or "".
func ptxEntry(ptx, name string) string {
	start := strings.Index(ptx, ".visible .entry "+name+"(")
	if start < 0 {
		return ""
	}
	end := strings.Index(ptx[start:], "\n}\n")
	if end < 0 {
		return ""
	}
	return ptx[start : start+end+3]
}

// The kernels that package cuda's benchmarks launch for the same workloads are verbatim
// copies of cuda/testdata/kernels.ptx's, so the floor, the raw layer and the package run
// the same code.
func TestPTXKernelsMatchPackage(t *testing.T) {
	pkg, err := os.ReadFile(filepath.Join("..", "..", "cuda", "testdata", "kernels.ptx"))
	require.NoError(t, err)
	for _, name := range []string{"fill_u32", "add_u32", "read_sum"} {
		want := ptxEntry(string(pkg), name)
		require.NotEmpty(t, want, "cuda/testdata/kernels.ptx has no %s", name)
		assert.Equal(t, want, ptxEntry(kernelsPTX, name), "tools/bench/kernels.ptx's %s differs from cuda/testdata/kernels.ptx's", name)
	}
}

func TestPTXEntry(t *testing.T) {
	ptx := ".visible .entry a(\n)\n{\n\tret;\n}\n.visible .entry ab(\n)\n{\n}\n"
	assert.Equal(t, ".visible .entry a(\n)\n{\n\tret;\n}\n", ptxEntry(ptx, "a"))
	assert.Equal(t, ".visible .entry ab(\n)\n{\n}\n", ptxEntry(ptx, "ab"))
	assert.Empty(t, ptxEntry(ptx, "b"))
}
