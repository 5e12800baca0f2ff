package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
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
	g, err := Select(workloads, `^graph/(eager|graph)10$`)
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
		{"cuda", "^Benchmark(Tasks)$"}, {"cuda", "^Benchmark(Pipeline)$"}, {"cuda", "^Benchmark(PipelineShapes)$"},
		{"cuda", "^Benchmark(CopyBW)$"},
		{"tools/bench", "^Benchmark(Graph10)$"}, {"tools/bench", "^Benchmark(SgemmSmall)$"}, {"tools/bench", "^Benchmark(MLP)$"},
	}, got)
	got = packageSelectors([]Workload{
		{ID: "a", Go: GoBench{Pkg: "cublas", Bench: "Gemm"}}, {ID: "b", Go: GoBench{Pkg: "cuda", Bench: "X"}},
		{ID: "c", Go: GoBench{Pkg: "cublas", Bench: "Gemm"}}, {ID: "d"},
	})
	assert.Equal(t, []pkgSelector{{"cublas", "^Benchmark(Gemm)$"}, {"cuda", "^Benchmark(X)$"}}, got)

	// Some rows of a benchmark: only their sub-benchmarks, level by level.
	sel, err := Select(workloads, `^copy/(h2d/pinned|d2h/pageable-warm)/4KiB$|^mlp/eager$|^cublas/sgemm-small$|^launch/empty$`)
	require.NoError(t, err)
	assert.Equal(t, []pkgSelector{
		{"cuda", "^Benchmark(Launch(Empty)?)$"}, // its Match is not a literal path: all of it
		{"cuda", "^Benchmark(CopyBW)$/^(h2d|d2h)$/^(pinned|pageable-warm)$/^(4KiB)$"},
		{"tools/bench", "^Benchmark(SgemmSmall)$"},
		{"tools/bench", "^Benchmark(MLP)$/^(eager)$"},
	}, packageSelectors(sel))
	assert.Empty(t, narrowLevels([][]string{{"a"}, {"a", "b"}}), "paths of different depths")
	assert.Empty(t, narrowLevels([][]string{{"a"}, nil}), "a path that is not literal")
}

func TestTestBinaryName(t *testing.T) {
	dir := t.TempDir()
	assert.Equal(t, "tools_x", TestBinaryName(dir, "tools/x"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "packages"), []byte("cuda cuda\ncuda_cudatest cuda/cudatest\n"), 0o644))
	assert.Equal(t, "cuda", TestBinaryName(dir, "cuda"))
	assert.Equal(t, "cuda_cudatest", TestBinaryName(dir, "cuda/cudatest"))
	_, err := testBinary(dir, "cuda")
	assert.ErrorContains(t, err, "build.sh")
}

func TestFloorBuildArgs(t *testing.T) {
	args := FloorBuildArgs("tools/floor/floor.cu", "/tmp/floor", "sm_90", "")
	assert.Equal(t, []string{"-O2", "-arch=sm_90", "-o", "/tmp/floor", "tools/floor/floor.cu", "-lcuda", "-lcublas", "-lpthread"}, args)
	args = FloorBuildArgs("tools/floor/floor.cu", "/tmp/floor", "sm_90", "/usr/local/cuda-13.0/lib64")
	assert.Equal(t, []string{"-O2", "-arch=sm_90", "-o", "/tmp/floor", "tools/floor/floor.cu", "-lcuda", "-lcublas", "-lpthread",
		"-Xlinker", "-rpath=/usr/local/cuda-13.0/lib64"}, args)
}

func TestToolkitLibDir(t *testing.T) {
	root := filepath.Join(t.TempDir(), "cuda-13.0")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "bin"), 0o755))
	nvcc := filepath.Join(root, "bin", "nvcc")
	require.NoError(t, os.WriteFile(nvcc, nil, 0o755))
	assert.Empty(t, toolkitLibDir(nvcc), "no lib64")
	require.NoError(t, os.Mkdir(filepath.Join(root, "lib64"), 0o755))
	assert.Equal(t, filepath.Join(root, "lib64"), toolkitLibDir(nvcc))
	// nvcc found through a link elsewhere (/usr/bin/nvcc -> the toolkit's) still names the toolkit's.
	link := filepath.Join(t.TempDir(), "nvcc")
	require.NoError(t, os.Symlink(nvcc, link))
	got, err := filepath.EvalSymlinks(toolkitLibDir(link))
	require.NoError(t, err)
	want, err := filepath.EvalSymlinks(filepath.Join(root, "lib64"))
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

func TestPTXHasKernels(t *testing.T) {
	for _, k := range []string{
		".visible .entry empty()", ".visible .entry axpb(", ".visible .entry fill_u32(", ".visible .entry add_u32(",
		".visible .entry read_sum(", ".visible .entry bias_relu(", ".target sm_90", ".version 8.0",
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

// ptxEntries returns the names of the kernels in ptx, in order.
func ptxEntries(ptx string) []string {
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^\.visible \.entry (\w+)\(`).FindAllStringSubmatch(ptx, -1) {
		names = append(names, m[1])
	}
	return names
}

// ptxParams returns the types of an entry's parameters, in order ("u64", "u32", ...), and
// their names.
func ptxParams(entry string) (types, names []string) {
	head := entry[:strings.Index(entry, ")")+1]
	for _, m := range regexp.MustCompile(`\.param\s+\.(\w+)\s+(\w+)`).FindAllStringSubmatch(head, -1) {
		types, names = append(types, m[1]), append(names, m[2])
	}
	return types, names
}

// ptxLint returns what it finds wrong in an entry that ptxas would reject: a register used
// beyond its declaration (%r<9> declares %r0 to %r8), a branch to a label that is not defined,
// a parameter loaded that is not declared, an instruction without its ';'.
func ptxLint(entry string) []string {
	var bad []string
	_, params := ptxParams(entry)
	body := entry[strings.Index(entry, "{"):]
	regs := map[string]int{}
	for _, m := range regexp.MustCompile(`\.reg\s+\.\w+\s+%(\w+)<(\d+)>;`).FindAllStringSubmatch(body, -1) {
		n, _ := strconv.Atoi(m[2])
		regs[m[1]] = n
	}
	labels := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([\w$]+):\s*$`).FindAllStringSubmatch(body, -1) {
		labels[m[1]] = true
	}
	for _, line := range strings.Split(body, "\n") {
		code := strings.TrimSpace(line)
		if i := strings.Index(code, "//"); i >= 0 {
			code = strings.TrimSpace(code[:i])
		}
		if code == "" || code == "{" || code == "}" || strings.HasSuffix(code, ":") {
			continue
		}
		if !strings.HasSuffix(code, ";") {
			bad = append(bad, "no ';': "+code)
		}
		if strings.HasPrefix(code, ".reg") {
			continue
		}
		for _, m := range regexp.MustCompile(`%([a-z]+)(\d+)\b`).FindAllStringSubmatch(code, -1) {
			n, ok := regs[m[1]]
			if k, _ := strconv.Atoi(m[2]); !ok || k >= n {
				bad = append(bad, "undeclared register %"+m[1]+m[2]+": "+code)
			}
		}
		if m := regexp.MustCompile(`\bbra(?:\.uni)?\s+([\w$]+);`).FindStringSubmatch(code); m != nil && !labels[m[1]] {
			bad = append(bad, "undefined label "+m[1]+": "+code)
		}
		if m := regexp.MustCompile(`ld\.param\.\w+\s+%\w+,\s*\[(\w+)\]`).FindStringSubmatch(code); m != nil && !slices.Contains(params, m[1]) {
			bad = append(bad, "undeclared parameter "+m[1]+": "+code)
		}
	}
	return bad
}

// No ptxas here: a hand-written kernel's mistakes would show only on the GPU machine. The
// parameters are what floor.cu passes and Go's Launch packs (8-byte pointers, 4-byte ints),
// and every kernel passes a lint of what ptxas would reject.
func TestPTXKernels(t *testing.T) {
	assert.Equal(t, []string{"empty", "axpb", "bias_relu", "fill_u32", "read_sum", "add_u32"}, ptxEntries(kernelsPTX))
	want := map[string][]string{
		"empty":     nil,
		"axpb":      {"u64", "u32"},               // float* x, int n
		"bias_relu": {"u64", "u64", "u32", "u32"}, // float* h, const float* b, int rows, int cols
		"fill_u32":  {"u64", "u32", "u64"},
		"add_u32":   {"u64", "u32", "u64"},
		"read_sum":  {"u64", "u64", "u64", "u64"},
	}
	for _, name := range ptxEntries(kernelsPTX) {
		entry := ptxEntry(kernelsPTX, name)
		require.NotEmpty(t, entry, name)
		types, names := ptxParams(entry)
		assert.Equal(t, want[name], types, name)
		for i, n := range names {
			assert.Equal(t, name+"_param_"+strconv.Itoa(i), n, name)
		}
		assert.Empty(t, ptxLint(entry), name)
	}
}

func TestPTXLint(t *testing.T) {
	entry := ".visible .entry k(\n\t.param .u64 k_param_0\n)\n{\n\t.reg .b32 \t%r<3>;\n" +
		"\tld.param.u64 \t%rd1, [k_param_1];\n\tmov.u32 \t%r3, %tid.x;\n\t@%p1 bra \tNOWHERE;\n\tret\nDONE:\n\tret;\n}\n"
	types, names := ptxParams(entry)
	assert.Equal(t, []string{"u64"}, types)
	assert.Equal(t, []string{"k_param_0"}, names)
	assert.Equal(t, []string{
		"undeclared register %rd1: ld.param.u64 \t%rd1, [k_param_1];",
		"undeclared parameter k_param_1: ld.param.u64 \t%rd1, [k_param_1];",
		"undeclared register %r3: mov.u32 \t%r3, %tid.x;",
		"undeclared register %p1: @%p1 bra \tNOWHERE;",
		"undefined label NOWHERE: @%p1 bra \tNOWHERE;",
		"no ';': ret",
	}, ptxLint(entry))
}

// Each workload's package benchmark exists in its package's test files, so a renamed
// benchmark cannot leave its row's gocuda column empty unnoticed.
func TestGoBenchExists(t *testing.T) {
	decl := regexp.MustCompile(`(?m)^func (Benchmark\w*)\(b \*testing\.B\)`)
	for _, w := range workloads {
		if w.Go.Bench == "" {
			continue
		}
		files, err := filepath.Glob(filepath.Join("..", "..", w.Go.Pkg, "*_test.go"))
		require.NoError(t, err)
		sel := regexp.MustCompile("^Benchmark(" + w.Go.Bench + ")$")
		found := false
		for _, f := range files {
			src, err := os.ReadFile(f)
			require.NoError(t, err)
			for _, m := range decl.FindAllStringSubmatch(string(src), -1) {
				found = found || sel.MatchString(m[1])
			}
		}
		assert.True(t, found, "%s: no func Benchmark(%s) in %s's test files", w.ID, w.Go.Bench, w.Go.Pkg)
	}
}

// The MLP rows: the gocuda column takes the names this package's benchmarks print, and the
// shape and chunk constants agree with floor.cu's.
func TestMLPRows(t *testing.T) {
	ws, err := Select(workloads, `^(cublas/|mlp/(eager|graph)$)`)
	require.NoError(t, err)
	require.Len(t, ws, 3)
	// Every per-iteration graph row has its submit and latency rows (issue #13).
	for _, id := range []string{"graph/eager10", "graph/graph10", "mlp/graph"} {
		for _, form := range []string{"-submit", "-latency"} {
			sel, err := Select(workloads, "^"+regexp.QuoteMeta(id+form)+"$")
			require.NoError(t, err)
			require.Len(t, sel, 1, id+form)
			assert.Equal(t, "tools/bench", sel[0].Go.Pkg)
		}
	}
	var pkg []Result
	for _, line := range []string{
		"BenchmarkSgemmSmall-16   \t  200000\t      5012 ns/op",
		"BenchmarkMLP/eager-16    \t   12000\t     41000 ns/op",
		"BenchmarkMLP/graph-16    \t   40000\t     23000 ns/op",
	} {
		r, ok := ParseBenchLine(line)
		require.True(t, ok, line)
		pkg = append(pkg, r)
	}
	floor := FloorOutput{Results: map[string]Result{
		"cublas/sgemm-small": {Name: "cublas/sgemm-small", Iters: 100000, NsOp: 4000},
		"mlp/eager":          {Name: "mlp/eager", Iters: 14000, NsOp: 39000},
		"mlp/graph":          {Name: "mlp/graph", Iters: 40000, NsOp: 22500},
	}}
	raw := map[string]RawResult{"mlp/eager": {Err: "cublasCreate: no cublas library"}}
	rows, err := Join(ws, floor, map[string][]Result{"tools/bench": pkg}, raw)
	require.NoError(t, err)
	assert.Equal(t, "BenchmarkSgemmSmall", rows[0].GoBench)
	assert.InDelta(t, 5012.0/4000, *rows[0].Ratio, 1e-9)
	assert.Equal(t, "BenchmarkMLP/eager", rows[1].GoBench)
	assert.InDelta(t, 41000.0/39000, *rows[1].Ratio, 1e-9)
	assert.Equal(t, "cublasCreate: no cublas library", rows[1].RawError)
	assert.Equal(t, "BenchmarkMLP/graph", rows[2].GoBench)
	assert.InDelta(t, 23000.0/22500, *rows[2].Ratio, 1e-9)
	var b strings.Builder
	require.NoError(t, WriteTable(&b, rows))
	assert.Regexp(t, `(?m)^cublas/sgemm-small\s+4\.00 µs\s+5\.01 µs\s+1\.25×\s+—\s+—\s+BenchmarkSgemmSmall$`, b.String())
	assert.Regexp(t, `(?m)^mlp/eager\s+39\.00 µs\s+41\.00 µs\s+1\.05×\s+— \(error\)\s+—\s+BenchmarkMLP/eager$`, b.String())

	_, src := floorTable(t)
	for name, v := range map[string]int{"kLayers": mlpLayers, "kWidth": mlpWidth, "kBatch": mlpBatch, "kMLPChunk": mlpChunk} {
		m := regexp.MustCompile(name + ` = (\d+)`).FindStringSubmatch(src)
		if assert.NotNil(t, m, "floor.cu has no %s", name) {
			assert.Equal(t, strconv.Itoa(v), m[1], name)
		}
	}
	assert.Contains(t, src, "kBlasWorkspace = 4 << 20")
	assert.Equal(t, blasWorkspace, 4<<20)
	assert.Equal(t, 16, biasBlocks) // mlp.cu's (256*16+255)/256
}

// Rounds combine into each number's median, per side.
func TestMedianRounds(t *testing.T) {
	assert.Equal(t, 2.0, median([]float64{3, 1, 2}))
	assert.Equal(t, 2.5, median([]float64{4, 1, 3, 2}))
	fl := func(ns float64) FloorOutput {
		return FloorOutput{Results: map[string]Result{"a": {Name: "a", Iters: 10, NsOp: ns}},
			Skips: map[string]string{"b": "no cublas"}, Info: map[string]string{"device": "H200"}}
	}
	f := medianFloor([]FloorOutput{fl(5), fl(1), fl(3)})
	assert.Equal(t, 3.0, f.Results["a"].NsOp)
	assert.Equal(t, "no cublas", f.Skips["b"])
	assert.Equal(t, "H200", f.Info["device"])
	r := medianRaw([]map[string]RawResult{
		{"a": {Result: Result{NsOp: 9}}, "b": {Result: Result{NsOp: 1}}},
		{"a": {Result: Result{NsOp: 7}}, "b": {Err: "failed"}},
	})
	assert.Equal(t, 8.0, r["a"].NsOp)
	assert.Equal(t, "failed", r["b"].Err, "an error in any round shows")
	p := medianPkg([]map[string][]Result{
		{"cuda": {{Name: "BenchmarkX", NsOp: 10}, {Name: "BenchmarkY", NsOp: 1}}},
		{"cuda": {{Name: "BenchmarkX", NsOp: 30}, {Name: "BenchmarkY", NsOp: 2}}},
		{"cuda": {{Name: "BenchmarkX", NsOp: 20}, {Name: "BenchmarkY", NsOp: 3}}},
	})
	require.Len(t, p["cuda"], 2)
	assert.Equal(t, "BenchmarkX", p["cuda"][0].Name)
	assert.Equal(t, 20.0, p["cuda"][0].NsOp)
	assert.Equal(t, 2.0, p["cuda"][1].NsOp)
}
