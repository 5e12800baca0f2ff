// Command bench compares gocuda with the C floor, workload by workload. For each entry of the
// registry in workloads.go it prints the C floor (tools/floor/floor.cu: the raw driver API in C),
// the package's Go benchmark (a normal Benchmark in the library's tests, run from the test binary
// that tools/bench/build.sh or ../shared/tools/gpu-test builds into .gpu/), the same loop on
// gocuda's generated raw layer run in process, and the ratios; it writes the table as bench.json,
// BENCHMARKS.md (the repository's, from a full run) and bench.txt (every number in
// benchstat's format).
//
// Build here, where Go is, then run on the GPU machine (which has nvcc but no Go) from the
// repository root:
//
//	bash tools/bench/build.sh      # here: .gpu/bench/{bench,blockprobe,cuda.test.gz,packages}
//	./.gpu/bench/bench             # there: nvcc-builds tools/floor, runs everything, prints the table
//
// The copy/... rows (host ↔ device bandwidth, copy.go) show GB/s beside the time and the ratio
// of bandwidths; the header names device 0's PCIe link and its limit (from /sys). -run '^copy/'
// runs only them.
//
// Flags: -o DIR (default $OUT, else /tmp/gocuda-bench), -benchtime 0.5s, -rounds N (median of N
// alternating measurements of each side), -run REGEXP (workload
// IDs), -gpu DIR (the test binaries: default this executable's directory when it holds a
// 'packages' list, else .gpu), -nvcc PATH, -arch sm_90, -floor BIN (a floor already built),
// -floor-blocking-sync (the floor's context gets the cuda package's scheduling flag),
// -skip floor,raw,pkg. With -rounds N > 1 each ratio also shows the range of the N rounds'
// own ratios.
package main

import (
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// Options are the command-line settings.
type Options struct {
	Out       string          // where bench.{json,md,txt} and the package logs go
	GPUDir    string          // gzipped test binaries and their 'packages' list
	Benchtime time.Duration   // target time of each measurement, on all three sides
	Run       string          // regexp on workload IDs; "" runs all
	NVCC      string          // nvcc to build the floor with; "" finds one
	Arch      string          // nvcc -arch
	Floor     string          // a floor binary already built; "" builds one
	FloorSrc  string          // the floor's source
	PTX       string          // the PTX file the floor loads
	Skip      map[string]bool // parts left out: "floor", "raw", "pkg"
	Rounds    int             // times the three sides are measured in turn (medians reported)
	// FloorBlockingSync runs the floor with CU_CTX_SCHED_BLOCKING_SYNC on its primary
	// context, as the cuda package opens it (floor -blocking-sync).
	FloorBlockingSync bool
}

func main() {
	testing.Init() // testing.Benchmark reads -test.benchtime
	var o Options
	var skip string
	flag.StringVar(&o.Out, "o", "", "output directory (default $OUT, else /tmp/gocuda-bench)")
	flag.StringVar(&o.GPUDir, "gpu", "", "directory of the gzipped test binaries and their 'packages' list (default: this executable's directory if it has one, else .gpu)")
	flag.DurationVar(&o.Benchtime, "benchtime", 500*time.Millisecond, "target time of each measurement (C, raw and package)")
	flag.StringVar(&o.Run, "run", "", "regexp: only workloads whose ID matches")
	flag.StringVar(&o.NVCC, "nvcc", "", "nvcc to build the floor with (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc)")
	flag.StringVar(&o.Arch, "arch", "sm_90", "nvcc -arch")
	flag.StringVar(&o.Floor, "floor", "", "a floor binary already built (skips nvcc)")
	flag.StringVar(&o.FloorSrc, "floor-src", "tools/floor/floor.cu", "the floor's source")
	flag.StringVar(&o.PTX, "ptx", "tools/bench/kernels.ptx", "the PTX the floor loads (the same file is embedded here)")
	flag.IntVar(&o.Rounds, "rounds", 1, "measure the C floor, the raw layer and the packages this many times in turn and report each number's median")
	flag.BoolVar(&o.FloorBlockingSync, "floor-blocking-sync", false, "give the C floor's context CU_CTX_SCHED_BLOCKING_SYNC, as the cuda package does (default: the driver's flags, as a C program has)")
	flag.StringVar(&skip, "skip", "", "comma-separated parts to leave out: floor, raw, pkg")
	flag.Parse()
	o.Skip = map[string]bool{}
	for _, s := range strings.Split(skip, ",") {
		if s = strings.TrimSpace(s); s != "" {
			o.Skip[s] = true
		}
	}
	if o.GPUDir == "" {
		o.GPUDir = defaultGPUDir()
	}
	if o.Out == "" {
		o.Out = os.Getenv("OUT")
	}
	if o.Out == "" {
		o.Out = "/tmp/gocuda-bench"
	}
	if err := flag.Set("test.benchtime", o.Benchtime.String()); err != nil {
		fatal(err)
	}
	if o.Rounds < 1 {
		fatal(fmt.Errorf("-rounds %d: at least 1", o.Rounds))
	}
	if err := run(o); err != nil {
		fatal(err)
	}
}

// runRound measures the three sides once: the C floor, the raw layer in process, and
// the package benchmarks. Problems are appended to *problems (once, in the first round).
func runRound(o Options, ws []Workload, problems *[]string, round int) (FloorOutput, map[string]RawResult, map[string][]Result) {
	note := func(p string) {
		if round == 1 {
			*problems = append(*problems, p)
		}
	}
	// 1. The C floor.
	floor := FloorOutput{Results: map[string]Result{}, Skips: map[string]string{}, Info: map[string]string{}}
	if !o.Skip["floor"] {
		var err error
		if floor, err = runFloor(o, ws); err != nil {
			note("floor: " + err.Error())
			fmt.Fprintln(os.Stderr, "bench: floor:", err)
		}
	}

	// 2. The raw layer, in process.
	raw := map[string]RawResult{}
	if !o.Skip["raw"] {
		if err := runRaw(ws, raw); err != nil {
			note("raw: " + err.Error())
			fmt.Fprintln(os.Stderr, "bench: raw layer:", err)
		}
	}

	// 3. The package benchmarks.
	pkgResults := map[string][]Result{}
	if !o.Skip["pkg"] {
		for _, p := range packageSelectors(ws) { // fresh logs: runPackage appends
			if round > 1 {
				break
			}
			_ = os.Remove(filepath.Join(o.Out, TestBinaryName(o.GPUDir, p.pkg)+".bench.log"))
		}
		for _, p := range packageSelectors(ws) {
			res, err := runPackage(o, p.pkg, p.selector)
			if err != nil {
				fmt.Fprintf(os.Stderr, "bench: package %s: %v (its column shows %s)\n", p.pkg, err, Missing)
				continue
			}
			pkgResults[p.pkg] = append(pkgResults[p.pkg], res...)
		}
	}

	return floor, raw, pkgResults
}

// defaultGPUDir is the executable's directory when it holds a packages list (build.sh's
// .gpu/bench), else .gpu (../shared/tools/gpu-test's).
func defaultGPUDir() string {
	if exe, err := os.Executable(); err == nil {
		dir := filepath.Dir(exe)
		if _, err := os.Stat(filepath.Join(dir, "packages")); err == nil {
			if rel, err := filepath.Rel(mustGetwd(), dir); err == nil {
				return rel
			}
			return dir
		}
	}
	return ".gpu"
}

func mustGetwd() string {
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	return wd
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

// Select returns the workloads whose ID matches expr (all when expr is empty).
func Select(ws []Workload, expr string) ([]Workload, error) {
	if expr == "" {
		return ws, nil
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("-run: %w", err)
	}
	var out []Workload
	for _, w := range ws {
		if re.MatchString(w.ID) {
			out = append(out, w)
		}
	}
	return out, nil
}

func run(o Options) error {
	ws, err := Select(workloads, o.Run)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return err
	}
	var problems []string

	// The link the copy rows run over, and its limit.
	pcie := "PCIe: unknown"
	if l, err := devicePCIeLink(); err != nil {
		pcie += " (" + err.Error() + ")"
	} else {
		pcie = l.String()
	}
	fmt.Println("bench:", pcie)

	// The three sides, o.Rounds times in turn, so that each sees the machine in the
	// same states; each number is the median of its rounds.
	var floors []FloorOutput
	var raws []map[string]RawResult
	var pkgs []map[string][]Result
	for round := 1; round <= o.Rounds; round++ {
		if o.Rounds > 1 {
			fmt.Printf("bench: round %d of %d\n", round, o.Rounds)
		}
		f, r, p := runRound(o, ws, &problems, round)
		floors, raws, pkgs = append(floors, f), append(raws, r), append(pkgs, p)
		if o.Floor == "" && f.Info["binary"] != "" {
			o.Floor = f.Info["binary"] // built once
		}
	}
	floor, raw, pkgResults := medianFloor(floors), medianRaw(raws), medianPkg(pkgs)

	rows, err := Join(ws, floor, pkgResults, raw)
	if err != nil {
		return err
	}
	if err := setRatioRanges(rows, ws, floors, pkgs, raws); err != nil {
		return err
	}
	rep := Report{Device: floor.Info["device"], Driver: floor.Info["driver"], Benchtime: o.Benchtime.String(), PCIe: pcie,
		FloorSched: floor.Info["sched"], Rounds: o.Rounds, Date: time.Now().UTC().Format(time.DateOnly), Rows: rows}
	fmt.Println()
	fmt.Println(pcie)
	if err := WriteTable(os.Stdout, rows); err != nil {
		return err
	}
	for name, write := range map[string]func(io.Writer) error{
		"bench.json":    func(w io.Writer) error { return WriteJSON(w, rep) },
		"BENCHMARKS.md": func(w io.Writer) error { return WriteMarkdown(w, rep) },
		"bench.txt":     func(w io.Writer) error { return WriteBenchFormat(w, rep, runtime.GOMAXPROCS(0)) },
	} {
		if err := writeFile(filepath.Join(o.Out, name), write); err != nil {
			return err
		}
	}
	fmt.Printf("\nbench: wrote %s/bench.{json,txt} and %s/BENCHMARKS.md (the repository's, from a full run)\n", o.Out, o.Out)
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// findNVCC returns the nvcc to use.
func findNVCC(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if p, err := exec.LookPath("nvcc"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/local/cuda/bin/nvcc", os.Getenv("CUDA_HOME") + "/bin/nvcc", os.Getenv("CUDA_PATH") + "/bin/nvcc"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("nvcc not found (give -nvcc or -floor)")
}

// FloorBuildArgs is the nvcc command line that builds the floor. libDir, unless empty, becomes
// an rpath: the floor then loads the libcublas it was linked with, wherever the loader looks.
func FloorBuildArgs(src, bin, arch, libDir string) []string {
	args := []string{"-O2", "-arch=" + arch, "-o", bin, src, "-lcuda", "-lcublas", "-lpthread"}
	if libDir != "" {
		args = append(args, "-Xlinker", "-rpath="+libDir)
	}
	return args
}

// toolkitLibDir returns the lib64 directory of the toolkit that nvcc belongs to
// (<root>/bin/nvcc -> <root>/lib64), or "" where there is none.
func toolkitLibDir(nvcc string) string {
	if p, err := filepath.EvalSymlinks(nvcc); err == nil {
		nvcc = p
	}
	dir := filepath.Join(filepath.Dir(filepath.Dir(nvcc)), "lib64")
	if st, err := os.Stat(dir); err != nil || !st.IsDir() || strings.Contains(dir, ",") {
		return "" // nvcc splits option values at commas
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return dir
}

func runFloor(o Options, ws []Workload) (FloorOutput, error) {
	bin := o.Floor
	if bin == "" {
		nvcc, err := findNVCC(o.NVCC)
		if err != nil {
			return FloorOutput{}, err
		}
		dir, err := os.MkdirTemp("", "gocuda-floor")
		if err != nil {
			return FloorOutput{}, err
		}
		bin = filepath.Join(dir, "floor")
		args := FloorBuildArgs(o.FloorSrc, bin, o.Arch, toolkitLibDir(nvcc))
		fmt.Println("bench:", nvcc, strings.Join(args, " "))
		cmd := exec.Command(nvcc, args...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return FloorOutput{}, fmt.Errorf("nvcc: %w", err)
		}
	}
	args := []string{"-ptx", o.PTX, "-t", fmt.Sprintf("%g", o.Benchtime.Seconds())}
	if o.FloorBlockingSync {
		args = append(args, "-blocking-sync")
	}
	if o.Run != "" {
		for _, w := range ws {
			args = append(args, w.ID)
		}
		if len(ws) == 0 {
			return FloorOutput{Results: map[string]Result{}, Skips: map[string]string{}, Info: map[string]string{}}, nil
		}
	}
	fmt.Println("bench:", bin, strings.Join(args, " "))
	var buf bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = io.MultiWriter(os.Stdout, &buf), os.Stderr
	runErr := cmd.Run()
	out, err := ParseFloor(&buf)
	if err != nil {
		return out, err
	}
	out.Info["binary"] = bin
	if runErr != nil {
		return out, fmt.Errorf("%s: %w", bin, runErr)
	}
	return out, nil
}

func runRaw(ws []Workload, raw map[string]RawResult) error {
	env, err := NewEnv()
	if err != nil {
		for _, w := range ws {
			if w.Raw != nil {
				raw[w.ID] = RawResult{Err: err.Error()}
			}
		}
		return err
	}
	// The pinned kernel arguments must be unpinned before env can be collected:
	// the runtime panics on a Pinner collected while pinning.
	defer env.pinner.Unpin()
	procs := runtime.GOMAXPROCS(0)
	var failed []string
	for _, w := range ws {
		if w.Raw == nil {
			continue
		}
		r, err := RunRaw(env, w.Raw)
		if err != nil {
			raw[w.ID] = RawResult{Err: err.Error()}
			failed = append(failed, w.ID)
			fmt.Printf("BenchmarkRaw/%s-%d\tFAIL: %v\n", w.ID, procs, err)
			continue
		}
		ns := float64(r.T.Nanoseconds()) / float64(r.N)
		if v, ok := r.Extra["ns/op"]; ok { // a workload that times part of each op itself (submit rows)
			ns = v
		}
		raw[w.ID] = RawResult{Result: Result{Name: "BenchmarkRaw/" + w.ID, Iters: int64(r.N), NsOp: ns}}
		fmt.Printf("BenchmarkRaw/%s-%d\t%s\n", w.ID, procs, r.String())
	}
	if len(failed) > 0 {
		return fmt.Errorf("failed: %s", strings.Join(failed, ", "))
	}
	return nil
}

type pkgSelector struct{ pkg, selector string }

// packageSelectors lists, per package in first-use order, one -test.bench regexp per distinct
// top-level benchmark the selected workloads name. Each runs in its own process, so a
// benchmark that crashes its test binary costs only its own rows. When ws holds only some
// of the registry's workloads of a benchmark, and all of them name literal sub-benchmarks
// (Match ^BenchmarkX/a/b$), the regexp names only those, level by level (-run '^copy/.*/4KiB$'
// then runs no 1 GiB copy): a superset at worst, never fewer.
func packageSelectors(ws []Workload) []pkgSelector {
	type key struct{ pkg, bench string }
	var keys []key
	subs := map[key][][]string{}
	for _, w := range ws {
		if w.Go.Pkg == "" || w.Go.Bench == "" {
			continue
		}
		k := key{w.Go.Pkg, w.Go.Bench}
		if _, ok := subs[k]; !ok {
			keys = append(keys, k)
		}
		subs[k] = append(subs[k], subPath(w.Go))
	}
	total := map[key]int{}
	for _, w := range workloads {
		total[key{w.Go.Pkg, w.Go.Bench}]++
	}
	var out []pkgSelector
	for _, k := range keys {
		sel := "^Benchmark(" + k.bench + ")$"
		if len(subs[k]) < total[k] {
			sel += narrowLevels(subs[k])
		}
		out = append(out, pkgSelector{k.pkg, sel})
	}
	slices.SortStableFunc(out, func(a, b pkgSelector) int { return strings.Compare(a.pkg, b.pkg) })
	return out
}

// literalSub matches the sub-benchmark names a Match may spell literally.
var literalSub = regexp.MustCompile(`^[A-Za-z0-9_.,=+-]+$`)

// subPath returns the sub-benchmark names of g's Match when it is ^Benchmark<Bench>/a/b$
// with a literal Bench and literal names, else nil.
func subPath(g GoBench) []string {
	prefix := "^Benchmark" + g.Bench + "/"
	if !literalSub.MatchString(g.Bench) || !strings.HasPrefix(g.Match, prefix) || !strings.HasSuffix(g.Match, "$") {
		return nil
	}
	names := strings.Split(strings.TrimSuffix(strings.TrimPrefix(g.Match, prefix), "$"), "/")
	for _, n := range names {
		if !literalSub.MatchString(n) {
			return nil
		}
	}
	return names
}

// narrowLevels returns the -test.bench levels after the top one that select the
// sub-benchmark paths (each level: any name some path has there), or "" when a path
// is missing or the paths differ in depth.
func narrowLevels(paths [][]string) string {
	depth := len(paths[0])
	for _, p := range paths {
		if len(p) == 0 || len(p) != depth {
			return ""
		}
	}
	var b strings.Builder
	for i := range depth {
		var names []string
		for _, p := range paths {
			if !slices.Contains(names, p[i]) {
				names = append(names, p[i])
			}
		}
		b.WriteString("/^(" + strings.Join(names, "|") + ")$")
	}
	return b.String()
}

// TestBinaryName is gpu-test's file name for a package directory: "cuda" -> "cuda",
// "tools/x" -> "tools_x" (the binary is .gpu/<name>.test.gz).
func TestBinaryName(gpuDir, pkg string) string {
	if data, err := os.ReadFile(filepath.Join(gpuDir, "packages")); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[1] == pkg {
				return f[0]
			}
		}
	}
	return strings.NewReplacer("/", "_", ".", "_").Replace(pkg)
}

// testBinary returns the package's test binary, gunzipped from .gpu/<name>.test.gz if needed.
func testBinary(gpuDir, pkg string) (string, error) {
	bin := filepath.Join(gpuDir, TestBinaryName(gpuDir, pkg)+".test")
	if gz, err := os.Open(bin + ".gz"); err == nil {
		defer gz.Close()
		zr, err := gzip.NewReader(gz)
		if err != nil {
			return "", err
		}
		tmp := bin + ".tmp"
		f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
		if err != nil {
			return "", err
		}
		if _, err := io.Copy(f, zr); err != nil {
			f.Close()
			return "", err
		}
		if err := f.Close(); err != nil {
			return "", err
		}
		if err := os.Rename(tmp, bin); err != nil {
			return "", err
		}
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("no test binary %s(.gz): build it with tools/bench/build.sh", bin)
	}
	return filepath.Abs(bin)
}

func runPackage(o Options, pkg, selector string) ([]Result, error) {
	bin, err := testBinary(o.GPUDir, pkg)
	if err != nil {
		return nil, err
	}
	args := []string{"-test.run", "^$", "-test.bench", selector, "-test.benchtime", o.Benchtime.String(), "-test.count", "1"}
	fmt.Println("bench: (cd", pkg, "&&", bin, strings.Join(args, " ")+")")
	logPath := filepath.Join(o.Out, TestBinaryName(o.GPUDir, pkg)+".bench.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	var buf bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Dir = pkg
	cmd.Stdout = io.MultiWriter(os.Stdout, logf, &buf)
	cmd.Stderr = cmd.Stdout
	runErr := cmd.Run()
	res, err := ParseBench(&buf)
	if err != nil {
		return res, err
	}
	if runErr != nil {
		fmt.Fprintf(os.Stderr, "bench: %s: %v (results kept: %d)\n", bin, runErr, len(res))
	}
	return res, nil
}

// median returns the median of xs (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// setRatioRanges gives each row the range of its rounds' own Go / C ratios (of
// bandwidths for the copy rows), when more than one round has both sides: the
// spread of the comparison between processes.
func setRatioRanges(rows []Row, ws []Workload, floors []FloorOutput, pkgs []map[string][]Result, raws []map[string]RawResult) error {
	if len(floors) < 2 {
		return nil
	}
	per := map[string][]float64{}
	for i := range floors {
		rr, err := Join(ws, floors[i], pkgs[i], raws[i])
		if err != nil {
			return err
		}
		for _, r := range rr {
			if v := r.GoverC(); v != nil {
				per[r.ID] = append(per[r.ID], *v)
			}
		}
	}
	for i := range rows {
		if v := per[rows[i].ID]; len(v) > 1 {
			rows[i].RatioRange = []float64{slices.Min(v), slices.Max(v)}
		}
	}
	return nil
}

// medianFloor combines rounds of the floor: each result's median time, skips and
// info from the first round that has them.
func medianFloor(rounds []FloorOutput) FloorOutput {
	out := FloorOutput{Results: map[string]Result{}, Skips: map[string]string{}, Info: map[string]string{}}
	times := map[string][]float64{}
	for _, r := range rounds {
		for id, res := range r.Results {
			times[id] = append(times[id], res.NsOp)
			if _, ok := out.Results[id]; !ok {
				out.Results[id] = res
			}
		}
		for k, v := range r.Skips {
			if _, ok := out.Skips[k]; !ok {
				out.Skips[k] = v
			}
		}
		for k, v := range r.Info {
			if _, ok := out.Info[k]; !ok {
				out.Info[k] = v
			}
		}
	}
	for id, ts := range times {
		res := out.Results[id]
		res.NsOp = median(ts)
		out.Results[id] = res
	}
	return out
}

// medianRaw combines rounds of the raw layer: each workload's median time; an error
// in any round is reported.
func medianRaw(rounds []map[string]RawResult) map[string]RawResult {
	out := map[string]RawResult{}
	times := map[string][]float64{}
	for _, r := range rounds {
		for id, res := range r {
			if res.Err != "" {
				out[id] = res
				continue
			}
			times[id] = append(times[id], res.NsOp)
			if _, ok := out[id]; !ok {
				out[id] = res
			}
		}
	}
	for id, ts := range times {
		if res := out[id]; res.Err == "" {
			res.NsOp = median(ts)
			out[id] = res
		}
	}
	return out
}

// medianPkg combines rounds of the package benchmarks: each benchmark's median time.
func medianPkg(rounds []map[string][]Result) map[string][]Result {
	out := map[string][]Result{}
	for pkg := range rounds[0] {
		times := map[string][]float64{}
		var order []Result
		for _, r := range rounds {
			for _, res := range r[pkg] {
				if _, ok := times[res.Name]; !ok {
					order = append(order, res)
				}
				times[res.Name] = append(times[res.Name], res.NsOp)
			}
		}
		for _, res := range order {
			res.NsOp = median(times[res.Name])
			out[pkg] = append(out[pkg], res)
		}
	}
	return out
}
