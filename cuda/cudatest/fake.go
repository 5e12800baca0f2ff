package cudatest

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

// fakecuda_launch mirrors the struct of fakecuda.c (checked at load).
typedef struct {
	int64_t seq;
	uint32_t grid[3], block[3];
	uint32_t shared_mem, param_size;
	uint64_t stream, context;
	char func[128];
	uint8_t params[4096];
	uint32_t cluster[3];
	int32_t priority;
	uint8_t cooperative, programmatic, pad[6];
} fakecuda_launch;

static void *fc_open(const char *path) { return dlopen(path, RTLD_LAZY | RTLD_LOCAL); }
static void *fc_sym(void *h, const char *name) { return dlsym(h, name); }

// fc_real_driver reports whether the system's libcuda.so.1 can be loaded.
static int fc_real_driver(void) {
	void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
	if (h == NULL) return 0;
	dlclose(h);
	return 1;
}

static int64_t fc_violations(void *f, char *buf, int64_t n) { return ((int64_t (*)(char *, int64_t))f)(buf, n); }
static void fc_void(void *f) { ((void (*)(void))f)(); }
static int fc_int(void *f) { return ((int (*)(void))f)(); }
static int64_t fc_i64(void *f) { return ((int64_t (*)(void))f)(); }
static int fc_control(void *f, const char *cmd, int64_t a, int64_t b) { return ((int (*)(const char *, int64_t, int64_t))f)(cmd, a, b); }
static int fc_launch_get(void *f, int64_t seq, fakecuda_launch *out) { return ((int (*)(int64_t, fakecuda_launch *))f)(seq, out); }
static int fc_counters(void *f, int64_t *out, int n) { return ((int (*)(int64_t *, int))f)(out, n); }
static int64_t fc_layout(void *f, char *buf, int64_t n) { return ((int64_t (*)(char *, int64_t))f)(buf, n); }
*/
import "C"

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"
)

//go:generate go run ./internal/gensymbols

//go:embed fakecuda.c
var source []byte

// Environment variables.
const (
	// EnvFake holds the path of the fake that Main installed, or "off" to keep Main
	// from installing one.
	EnvFake = "GOCUDA_FAKECUDA"
	// EnvChild marks a test binary started by Subprocess.
	EnvChild = "GOCUDA_FAKECUDA_CHILD"
	// EnvOmit lists symbols, comma-separated, that Main leaves out of the fake it
	// builds (the missing-symbol tests, through Subprocess).
	EnvOmit = "FAKECUDA_OMIT"
	// EnvDriver names an older driver that Main builds the fake as ("11.8": see
	// Driver118), for the older-driver tests, through Subprocess.
	EnvDriver = "FAKECUDA_DRIVER"
	envLib    = "GOCUDA_CUDA_LIB"
	envMode   = "FAKECUDA_MODE"
	// envPrebuilt passes a parent's build to a child that needs no other (the mode
	// is chosen at run time; FAKECUDA_OMIT and FAKECUDA_DRIVER need builds of their own).
	envPrebuilt = "GOCUDA_FAKECUDA_PREBUILT"
)

// ErrNotLoaded is returned by the control functions where the process does not run
// on the fake driver.
var ErrNotLoaded = errors.New("cudatest: the fake driver is not loaded")

// ErrNoCompiler is returned by BuildDir where gcc is not installed.
var ErrNoCompiler = errors.New("cudatest: gcc not found")

// Option configures Build and BuildDir.
type Option func(*config)

type config struct {
	omit   []string
	driver *pose
}

// pose is an older driver the fake is built as: the version cuDriverGetVersion
// reports, and the only symbols dlsym finds (besides the control API).
type pose struct {
	version int
	symbols []string
}

// Omit leaves the named symbols out of the library's dynamic symbol table, so that
// looking them up fails as with an older driver.
func Omit(symbols ...string) Option {
	return func(c *config) {
		for _, s := range symbols {
			if s = strings.TrimSpace(s); s != "" {
				c.omit = append(c.omit, s)
			}
		}
	}
}

// Driver118 builds the fake as a CUDA 11.8 driver (R520): cuDriverGetVersion
// reports 11080, and dlsym finds only the entry points that a program compiled
// against the CUDA 11.8 cuda.h looks up (generated from that header, see
// gensymbols), under the versioned names that header gives them (cuCtxCreate_v2,
// not cuCtxCreate_v4), so that every newer symbol is missing. Memory pools other
// than pinned device memory fail with CUDA_ERROR_INVALID_VALUE, as 11.8 knows no
// host or managed pools. Everything else behaves as the fake does for CUDA 13.0.
func Driver118() Option {
	return func(c *config) { c.driver = &pose{version: 11080, symbols: driver118Symbols} }
}

// Driver118Symbols returns the entry points that a fake built with Driver118
// exports, sorted.
func Driver118Symbols() []string { return slices.Clone(driver118Symbols) }

// drivers are the values of EnvDriver.
var drivers = map[string]func() Option{"11.8": Driver118}

// driverOption returns the Option of EnvDriver's value name ("": none).
func driverOption(name string) (Option, error) {
	if name == "" {
		return func(*config) {}, nil
	}
	if o := drivers[name]; o != nil {
		return o(), nil
	}
	return nil, fmt.Errorf("cudatest: %s=%q: no such driver (known: %s)", EnvDriver, name,
		strings.Join(slices.Sorted(maps.Keys(drivers)), ", "))
}

var cIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Build compiles the fake driver with gcc into a temporary directory of tb and
// returns the shared library's path, for GOCUDA_CUDA_LIB. It skips tb where gcc is
// missing.
func Build(tb testing.TB, opts ...Option) string {
	tb.Helper()
	so, err := BuildDir(tb.TempDir(), opts...)
	if errors.Is(err, ErrNoCompiler) {
		tb.Skip(err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return so
}

// BuildDir compiles the fake driver into dir and returns the shared library's path.
func BuildDir(dir string, opts ...Option) (string, error) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		return "", ErrNoCompiler
	}
	src := filepath.Join(dir, "fakecuda.c")
	if err := os.WriteFile(src, source, 0o644); err != nil {
		return "", err
	}
	so := filepath.Join(dir, "libcuda.so.1")
	args := []string{"-O2", "-shared", "-fPIC", "-pthread", "-o", so, src}
	for _, s := range cfg.omit {
		if !cIdent.MatchString(s) {
			return "", fmt.Errorf("cudatest: cannot omit %q: not a C identifier", s)
		}
	}
	// A GNU ld version script decides what dlsym sees; exact names win over the
	// wildcards in it.
	var text string
	switch {
	case cfg.driver != nil:
		// Only the older driver's symbols (those the fake defines: ld skips the
		// others) and the control API stay exported, less those omitted.
		omit := map[string]bool{}
		for _, s := range cfg.omit {
			omit[s] = true
		}
		global := []string{"fakecuda_*"}
		for _, s := range cfg.driver.symbols {
			if !omit[s] {
				global = append(global, s)
			}
		}
		text = "{ global: " + strings.Join(global, "; ") + "; local: *; };\n"
		args = append(args, fmt.Sprintf("-DFAKECUDA_DRIVER_VERSION=%d", cfg.driver.version))
	case len(cfg.omit) > 0:
		// The listed symbols become local, every other one stays exported.
		text = "{ global: *; local: " + strings.Join(cfg.omit, "; ") + "; };\n"
	}
	if text != "" {
		script := filepath.Join(dir, "symbols.map")
		if err := os.WriteFile(script, []byte(text), 0o644); err != nil {
			return "", err
		}
		args = append(args, "-Wl,--version-script="+script)
	}
	if out, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("cudatest: gcc: %v\n%s", err, out)
	}
	return so, nil
}

// installed is the fake that Main installed in this process, and whether it set
// FAKECUDA_MODE: Subprocess takes both out of a child's environment.
var (
	installed       string
	installedOmit   string
	installedDriver string
	setMode         bool
)

// Main runs a test package's tests, on the strict fake driver where no real one is
// present; call it from TestMain. It leaves the environment alone (and just runs the
// tests) if GOCUDA_CUDA_LIB is set, if libcuda.so.1 can be loaded, if
// GOCUDA_GPU_TESTS=require or if GOCUDA_FAKECUDA=off. Otherwise it builds the fake
// into a temporary directory, points GOCUDA_CUDA_LIB at it, sets FAKECUDA_MODE=strict
// (unless set) and GOCUDA_FAKECUDA to its path, runs the tests, and then fails the
// run (exit status 1) if the fake recorded any violation, printing them. Where gcc
// is missing it runs the tests without a driver. FAKECUDA_OMIT and FAKECUDA_DRIVER
// (see Omit and Driver118) choose the build; an unknown FAKECUDA_DRIVER fails the
// run (exit status 2) rather than testing another driver.
func Main(m *testing.M) int {
	if os.Getenv(envLib) != "" || os.Getenv(EnvFake) == "off" || os.Getenv(RequireEnv) == "require" ||
		C.fc_real_driver() != 0 {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "fakecuda-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "cudatest: %v; running the tests without a CUDA driver\n", err)
		return m.Run()
	}
	defer os.RemoveAll(dir)
	omit, driver := os.Getenv(EnvOmit), os.Getenv(EnvDriver)
	as, err := driverOption(driver)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	so := os.Getenv(envPrebuilt)
	if so == "" || omit != "" || driver != "" {
		so, err = BuildDir(dir, Omit(strings.Split(omit, ",")...), as)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "cudatest: %v; running the tests without a CUDA driver\n", err)
		return m.Run()
	}
	installed, installedOmit, installedDriver = so, omit, driver
	os.Setenv(envLib, so)
	if os.Getenv(envMode) == "" {
		os.Setenv(envMode, "strict")
		setMode = true
	}
	os.Setenv(EnvFake, so)
	code := m.Run()
	if n, text := Violations(); n > 0 {
		more := ""
		if shown := int64(strings.Count(text, "\n")); shown < n {
			more = fmt.Sprintf("(and %d more)\n", n-shown)
		}
		fmt.Fprintf(os.Stderr, "cudatest: FAIL: the tests made %d CUDA driver API violation(s):\n%s%s", n, text, more)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// The fake's library, opened by path: the same object the cuda package loaded.
var (
	libMu   sync.Mutex
	libPath string
	libH    unsafe.Pointer
	syms    map[string]unsafe.Pointer
)

// lib returns the handle of the fake in use, or nil.
func lib() unsafe.Pointer {
	path := os.Getenv(EnvFake)
	if path == "" || path == "off" {
		path = os.Getenv(envLib) // a fake installed by hand
	}
	if path == "" || path == "off" {
		return nil
	}
	libMu.Lock()
	defer libMu.Unlock()
	if path == libPath {
		return libH
	}
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	h := C.fc_open(cs)
	libPath, libH, syms = path, nil, map[string]unsafe.Pointer{}
	if h == nil {
		return nil
	}
	libH = h
	if sym("fakecuda_strict") == nil { // a real driver
		libH = nil
		return nil
	}
	if f := sym("fakecuda_launch_size"); f == nil || int64(C.fc_i64(f)) != int64(C.sizeof_fakecuda_launch) {
		panic("cudatest: the library's launch record does not match this package's")
	}
	return libH
}

// sym looks a control function up (libMu held, libH set).
func sym(name string) unsafe.Pointer {
	if p, ok := syms[name]; ok {
		return p
	}
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	p := C.fc_sym(libH, cs)
	syms[name] = p
	return p
}

// fn returns the control function name of the loaded fake, or nil.
func fn(name string) unsafe.Pointer {
	if lib() == nil {
		return nil
	}
	libMu.Lock()
	defer libMu.Unlock()
	return sym(name)
}

// FakeLoaded reports whether the process runs on the fake driver, in either mode.
func FakeLoaded() bool { return lib() != nil }

// Strict reports whether the process runs on the fake driver in strict mode.
func Strict() bool {
	f := fn("fakecuda_strict")
	return f != nil && C.fc_int(f) != 0
}

// Active reports whether the process runs on the strict fake and is not a test
// binary started by Subprocess, so that the pattern
//
//	if Active() { Subprocess(t, env); return }
//
// runs the rest of the test in the child.
func Active() bool { return os.Getenv(EnvChild) == "" && Strict() }

// Violations returns the number of violations the fake recorded and the messages of
// the first 256, one a line.
func Violations() (n int64, text string) {
	f := fn("fakecuda_violations")
	if f == nil {
		return 0, ""
	}
	buf := make([]byte, 256*320+1)
	n = int64(C.fc_violations(f, (*C.char)(unsafe.Pointer(&buf[0])), C.int64_t(len(buf))))
	if i := bytes.IndexByte(buf, 0); i >= 0 {
		buf = buf[:i]
	}
	return n, string(buf)
}

// ResetViolations clears the fake's violation count and messages, after a test that
// made violations on purpose.
func ResetViolations() {
	if f := fn("fakecuda_reset_violations"); f != nil {
		C.fc_void(f)
	}
}

// Control sends a command to the fake (see README.md): "oom_at", "oom_kinds",
// "fail_destroy", "slow_destroy_us", "kernel_ns", "capacity", "seed", "pause",
// "delay", "dump", "abort", "verbose", "reset_injections".
func Control(cmd string, a, b int64) error {
	f := fn("fakecuda_control")
	if f == nil {
		return ErrNotLoaded
	}
	cs := C.CString(cmd)
	defer C.free(unsafe.Pointer(cs))
	if C.fc_control(f, cs, C.int64_t(a), C.int64_t(b)) != 0 {
		return fmt.Errorf("cudatest: control %q (%d, %d): unknown command or bad argument", cmd, a, b)
	}
	return nil
}

// Kind is a set of allocation kinds, for InjectOOM.
type Kind uint32

// Allocation kinds.
const (
	KindDevice  Kind = 1 // cuMemAlloc
	KindPool    Kind = 2 // cuMemAllocAsync, cuMemAllocFromPoolAsync (any pool)
	KindHost    Kind = 4 // cuMemAllocHost, cuMemHostAlloc
	KindManaged Kind = 8 // cuMemAllocManaged
	KindAll          = KindDevice | KindPool | KindHost | KindManaged
)

// InjectOOM makes allocations of the given kinds fail with CUDA_ERROR_OUT_OF_MEMORY:
// the at-th from now (1 is the next) and the count-1 after it.
func InjectOOM(at, count int64, kinds Kind) error {
	if err := Control("oom_kinds", int64(kinds), 0); err != nil {
		return err
	}
	return Control("oom_at", at, count)
}

// DestroyKind is a kind of destroying call, for FailDestroy and SlowDestroy.
type DestroyKind int64

// Destroying calls.
const (
	DestroyStream         DestroyKind = iota // cuStreamDestroy
	DestroyEvent                             // cuEventDestroy
	DestroyModule                            // cuModuleUnload
	DestroyContext                           // cuCtxDestroy
	DestroyPool                              // cuMemPoolDestroy
	DestroyMemFree                           // cuMemFree, cuMemFreeAsync, cuMemFreeHost
	DestroyHostUnregister                    // cuMemHostUnregister
)

// FailDestroy makes the next destroying call of the kind return code (a CUresult),
// leaving its object live.
func FailDestroy(kind DestroyKind, code int32) error {
	return Control("fail_destroy", int64(kind), int64(code))
}

// SlowDestroy makes every destroying call of the kind take d longer (0 stops it),
// until ResetInjections.
func SlowDestroy(kind DestroyKind, d time.Duration) error {
	return Control("slow_destroy_us", int64(kind), d.Microseconds())
}

// SetKernelTime makes every kernel launched from now run for d on the fake's
// executor, so that work stays pending.
func SetKernelTime(d time.Duration) error { return Control("kernel_ns", d.Nanoseconds(), 0) }

// SetCapacity sets the memory of every device.
func SetCapacity(bytes int64) error { return Control("capacity", bytes, -1) }

// SetSeed restarts the executor's pseudo-random choice of the next stream to run.
func SetSeed(seed int64) error { return Control("seed", seed, 0) }

// Delay queues on stream (a CUstream of the fake) an operation that takes d when it
// runs, to keep the stream busy without a kernel.
func Delay(stream uintptr, d time.Duration) error {
	return Control("delay", d.Nanoseconds(), int64(stream))
}

// Pause stops the executor: queued work stays pending until Resume. Synchronizing
// on paused work blocks.
func Pause() error { return Control("pause", 1, 0) }

// Resume restarts the executor after Pause.
func Resume() error { return Control("pause", 0, 0) }

// ResetInjections ends every injection (OOM, failing and slow destroys, kernel time)
// and a pause.
func ResetInjections() error { return Control("reset_injections", 0, 0) }

// Launch is one kernel launch recorded by the fake.
type Launch struct {
	Seq         int64 // 1 for the first launch of the process
	Func        string
	Grid, Block [3]uint32
	SharedMem   uint32
	Stream      uintptr // the CUstream as passed
	Context     uintptr // the CUcontext current at the launch
	Params      []byte  // the parameter buffer (its first 4 KiB)
	ParamSize   int     // the parameter buffer's full size
	// What cuLaunchKernelEx's attributes asked for (zero for cuLaunchKernel).
	Cluster      [3]uint32
	Priority     int
	Cooperative  bool
	Programmatic bool
}

// LaunchCount returns the number of launches so far.
func LaunchCount() int64 {
	f := fn("fakecuda_launch_count")
	if f == nil {
		return 0
	}
	return int64(C.fc_i64(f))
}

// Launches returns the recorded launches after sinceSeq (0: all), oldest first; the
// fake keeps the last 4096.
func Launches(sinceSeq int64) []Launch {
	f := fn("fakecuda_launch_get")
	if f == nil {
		return nil
	}
	n := LaunchCount()
	var out []Launch
	rec := new(C.fakecuda_launch)
	for seq := max(sinceSeq+1, n-4095, 1); seq <= n; seq++ {
		if C.fc_launch_get(f, C.int64_t(seq), rec) != 0 {
			continue
		}
		l := Launch{
			Seq:       int64(rec.seq),
			Func:      C.GoString(&rec._func[0]),
			SharedMem: uint32(rec.shared_mem),
			Stream:    uintptr(rec.stream),
			Context:   uintptr(rec.context),
			ParamSize: int(rec.param_size),
		}
		for i := range 3 {
			l.Grid[i], l.Block[i], l.Cluster[i] = uint32(rec.grid[i]), uint32(rec.block[i]), uint32(rec.cluster[i])
		}
		l.Priority, l.Cooperative, l.Programmatic = int(rec.priority), rec.cooperative != 0, rec.programmatic != 0
		p := min(int(rec.param_size), len(rec.params))
		l.Params = C.GoBytes(unsafe.Pointer(&rec.params[0]), C.int(p))
		out = append(out, l)
	}
	return out
}

// Counts are the fake's counters (strict mode). Live counts exclude the devices'
// default memory pools.
type Counts struct {
	DeviceAllocs, DeviceBytes   int64 // live device allocations (cuMemAlloc, device pools)
	HostAllocs, HostBytes       int64 // live pinned host allocations
	ManagedAllocs, ManagedBytes int64 // live managed allocations
	FreePending                 int64 // cuMemFreeAsync queued, not yet run
	AllocsTotal, FreesTotal     int64

	Streams, Events, Modules, Functions, Contexts, Pools, Graphs, GraphExecs, Registrations int64 // live

	StreamsDestroyed, EventsDestroyed, ModulesDestroyed, FunctionsDestroyed, ContextsDestroyed int64
	PoolsDestroyed, GraphsDestroyed, GraphExecsDestroyed, RegistrationsEnded                   int64

	OpsPending, OpsExecuted, Launches, Violations int64
}

const numCounts = int(unsafe.Sizeof(Counts{}) / 8)

// Counters returns the fake's counters (zero where it is not loaded).
func Counters() Counts {
	var c Counts
	f := fn("fakecuda_counters")
	if f == nil {
		return c
	}
	v := (*[numCounts]int64)(unsafe.Pointer(&c))
	if n := int(C.fc_counters(f, (*C.int64_t)(unsafe.Pointer(&v[0])), C.int(numCounts))); n != numCounts {
		panic(fmt.Sprintf("cudatest: the library has %d counters, this package %d", n, numCounts))
	}
	return c
}

// LayoutItem is a C expression of cuda.h (sizeof, _Alignof or offsetof of a struct
// the fake mirrors, or a constant it copies) and its value in the fake.
type LayoutItem struct {
	Expr  string
	Value uint64
}

// Layout returns the sizes, alignments and field offsets of the cuda.h structs that
// the fake defines for itself, and the cuda.h constants it copies, as the loaded fake
// computes them (nil where it is not loaded), to be checked against the header.
func Layout() []LayoutItem {
	f := fn("fakecuda_layout")
	if f == nil {
		return nil
	}
	n := int64(C.fc_layout(f, nil, 0))
	buf := make([]byte, n+1)
	C.fc_layout(f, (*C.char)(unsafe.Pointer(&buf[0])), C.int64_t(len(buf)))
	var out []LayoutItem
	for _, line := range strings.Split(strings.TrimSpace(string(buf[:n])), "\n") {
		i := strings.LastIndexByte(line, ' ')
		var v uint64
		if _, err := fmt.Sscan(line[i+1:], &v); err != nil || i < 0 {
			panic(fmt.Sprintf("cudatest: bad layout line %q", line))
		}
		out = append(out, LayoutItem{Expr: line[:i], Value: v})
	}
	return out
}

// HostFuncAdd returns the address of a C host function of the fake, for
// cuLaunchHostFunc in tests: it atomically adds 1 to the int64 its user data points
// at (use memory the GC does not move or free, such as pinned host memory).
func HostFuncAdd() uintptr { return uintptr(fn("fakecuda_hostfn_add")) }

// Check fails tb, when it ends, if the fake recorded violations during it, printing
// the new ones.
func Check(tb testing.TB) {
	tb.Helper()
	if !FakeLoaded() {
		return
	}
	before, _ := Violations()
	tb.Cleanup(func() {
		n, text := Violations()
		if n < before { // reset meanwhile: what is left is new
			before = 0
		}
		if n == before {
			return
		}
		lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
		if int(before) < len(lines) {
			lines = lines[before:]
		} else {
			lines = nil
		}
		tb.Errorf("cudatest: %d new CUDA driver API violation(s):\n%s", n-before, strings.Join(lines, "\n"))
	})
}

// Subprocess runs the current test again in a child process (the same test binary,
// -test.run matching exactly t's name) with the environment changed by env (an
// empty value removes the variable), and fails t with the child's output if the
// child fails. The fake that Main installed here is taken out of the child's
// environment, so that the child's own Main decides again: with GOCUDA_FAKECUDA=off
// it runs without a driver, with FAKECUDA_MODE=fast on the fast fake, with
// FAKECUDA_OMIT=sym on a strict fake missing sym, with FAKECUDA_DRIVER=11.8 on a
// strict fake posing as the CUDA 11.8 driver. In the child, Active reports false
// and Subprocess fails the test, so that a child never starts another.
func Subprocess(t *testing.T, env map[string]string) {
	t.Helper()
	if os.Getenv(EnvChild) != "" {
		t.Fatalf("cudatest: Subprocess called in a child it started (%s)", t.Name())
	}
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	parts := strings.Split(t.Name(), "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	cmd := exec.CommandContext(t.Context(), exe, "-test.run", strings.Join(parts, "/"), "-test.v", "-test.count=1")
	cmd.Env = childEnv(env)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cudatest: the test failed in a subprocess with %v: %v\n%s", env, err, out)
	}
	switch {
	case bytes.Contains(out, []byte("--- PASS: "+t.Name()+" ")):
		t.Logf("cudatest: subprocess with %v:\n%s", env, out)
	case bytes.Contains(out, []byte("--- SKIP: "+t.Name()+" ")):
		t.Skipf("cudatest: skipped in the subprocess with %v:\n%s", env, out)
	default:
		t.Fatalf("cudatest: the test did not run in the subprocess with %v:\n%s", env, out)
	}
}

func childEnv(env map[string]string) []string {
	drop := map[string]bool{EnvChild: true, envPrebuilt: true}
	if installed != "" {
		drop[envLib], drop[EnvFake] = true, true
		if setMode {
			drop[envMode] = true
		}
	}
	for k := range env {
		drop[k] = true
	}
	var out []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !drop[k] {
			out = append(out, kv)
		}
	}
	for k, v := range env {
		if v != "" {
			out = append(out, k+"="+v)
		}
	}
	// The parent's build serves a child that builds the plain fake too.
	if installed != "" && installedOmit == "" && installedDriver == "" && env[EnvOmit] == "" && env[EnvDriver] == "" {
		out = append(out, envPrebuilt+"="+installed)
	}
	return append(out, EnvChild+"=1")
}

// RunWithoutDriver runs the current test in a child process that has no CUDA driver
// at all (GOCUDA_FAKECUDA=off), so that the no-driver paths run for real; see
// Subprocess.
func RunWithoutDriver(t *testing.T) { Subprocess(t, map[string]string{EnvFake: "off"}) }
