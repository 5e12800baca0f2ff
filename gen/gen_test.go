package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGoFuncName(t *testing.T) {
	for _, c := range []struct{ prefix, c, want string }{
		{"cu", "cuMemAlloc_v2", "MemAlloc"},
		{"cu", "cuCtxCreate_v4", "CtxCreate"},
		{"cu", "cuInit", "Init"},
		{"cublas", "cublasSgemm_v2_64", "Sgemm64"},
		{"cublas", "cublasSgemm_v2", "Sgemm"},
		{"cublas", "cublasGemmEx_64", "GemmEx64"},
		{"cusparse", "cusparseSpMV_bufferSize", "SpMVBufferSize"},
		{"cusparse", "cusparseSpGEMM_workEstimation", "SpGEMMWorkEstimation"},
		{"cufft", "cufftPlan1d", "Plan1d"},
		{"cudnn", "cudnnGetVersion", "GetVersion"},
		{"gold", "goldFoo_v2", "Foo"},
		{"gold", "goldScale_64", "Scale64"},
		{"nvJitLink", "__nvJitLinkCreate_13_0", "Create"},
		{"nvJitLink", "__nvJitLinkGetLinkedCubinSize_13_0", "GetLinkedCubinSize"},
		{"nvJitLink", "nvJitLinkVersion", "Version"},
	} {
		assert.Equal(t, c.want, goFuncName(c.prefix, c.c), "goFuncName(%q, %q)", c.prefix, c.c)
	}
}

func TestGoTypeName(t *testing.T) {
	s := &Spec{Rename: map[string]string{"CUresult": "Result", "goldStatus_t": "Status"}}
	for _, c := range []struct{ c, want string }{
		{"CUresult", "Result"},
		{"goldStatus_t", "Status"},
		{"cublasHandle_t", "CublasHandle"},
		{"cudaDataType_t", "CudaDataType"},
		{"CUdeviceptr", "CUdeviceptr"},
		{"CUdeviceptr_v2", "CUdeviceptr_v2"},
		{"goldptr", "Goldptr"},
		{"x_t_t", "X_t"},
		{"", ""},
	} {
		assert.Equal(t, c.want, goTypeName(s, c.c), "goTypeName(%q)", c.c)
	}
}

func TestBetterName(t *testing.T) {
	assert.True(t, betterName("goldptr", "goldptr_v2"), "no version suffix wins")
	assert.True(t, betterName("CUdeviceptr_long_name", "CUdeviceptr_v2"), "even when longer")
	assert.True(t, betterName("CUcontext", "CUctx_st"), "no _st suffix wins")
	assert.True(t, betterName("abc", "abcd"), "shorter wins")
	assert.True(t, betterName("abc", "abd"), "then alphabetical")
	assert.False(t, betterName("abd", "abc"))
}

func TestErrNameDescribe(t *testing.T) {
	for _, c := range []struct {
		prefixes      []string
		c, name, desc string
	}{
		{[]string{"CUDA_ERROR_"}, "CUDA_ERROR_OUT_OF_MEMORY", "ErrOutOfMemory", "out of memory"},
		{[]string{"CUDA_ERROR_"}, "CUDA_ERROR_INVALID_VALUE", "ErrInvalidValue", "invalid value"},
		{[]string{"CUBLAS_STATUS_"}, "CUBLAS_STATUS_NOT_INITIALIZED", "ErrNotInitialized", "not initialized"},
		{[]string{"CUFFT_"}, "CUFFT_INVALID_PLAN", "ErrInvalidPlan", "invalid plan"},
		// Only the first matching prefix is stripped.
		{[]string{"GOLDB_ERR_", "GOLDB_"}, "GOLDB_ERR_BUSY", "ErrBusy", "busy"},
		{[]string{"GOLDB_ERR_", "GOLDB_"}, "GOLDB_LOST", "ErrLost", "lost"},
		// No prefix matches: the whole name; doubled underscores collapse.
		{[]string{"X_"}, "FOO__BAR", "ErrFooBar", "foo bar"},
		{nil, "ERR", "ErrErr", "err"},
		// Camel case (NCCL): words where a lower-case letter meets an upper-case one.
		{[]string{"nccl"}, "ncclInvalidArgument", "ErrInvalidArgument", "invalid argument"},
		{[]string{"nccl"}, "ncclUnhandledCudaError", "ErrUnhandledCudaError", "unhandled cuda error"},
		{[]string{"nccl"}, "ncclInProgress", "ErrInProgress", "in progress"},
	} {
		assert.Equal(t, c.name, errName(c.prefixes, c.c), "errName(%q)", c.c)
		assert.Equal(t, c.desc, describe(c.prefixes, c.c), "describe(%q)", c.c)
	}
}

// fakeCUDA makes a directory that looks like a CUDA toolkit to findCUDA.
func fakeCUDA(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "include"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "include", "cuda.h"), nil, 0o644))
	return root
}

func TestFindCUDA(t *testing.T) {
	t.Setenv("CUDA_PATH", "")
	t.Setenv("CUDA_HOME", "")
	bogus := filepath.Join(t.TempDir(), "no-cuda")
	if _, err := os.Stat("/usr/local/cuda/include/cuda.h"); err == nil {
		t.Log("/usr/local/cuda has cuda.h: the not-found case is not checked")
	} else {
		_, err := findCUDA(bogus)
		require.Error(t, err)
		msg := err.Error()
		assert.Contains(t, msg, filepath.Join(bogus, "include", "cuda.h")+" (-cuda-path)")
		assert.Contains(t, msg, "/usr/local/cuda/include/cuda.h (default)")
		assert.Contains(t, msg, "CUDA_PATH", "the error says how to fix it")
		assert.NotContains(t, msg, "$CUDA_HOME", "unset variables are not listed")

		// Set but empty toolkits are listed with where they came from.
		t.Setenv("CUDA_HOME", bogus+"-home")
		_, err = findCUDA("")
		require.Error(t, err)
		assert.Contains(t, err.Error(), filepath.Join(bogus+"-home", "include", "cuda.h")+" ($CUDA_HOME)")
		t.Setenv("CUDA_HOME", "")

		// run reports it without -include.
		err = run([]string{"-cuda-path", bogus, "-specs", goldenSpecs, "-lib", "golda", "-out", t.TempDir()}, io.Discard)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "CUDA headers not found")
	}

	// The order: the flag, $CUDA_PATH, $CUDA_HOME.
	flag, path, home := fakeCUDA(t), fakeCUDA(t), fakeCUDA(t)
	t.Setenv("CUDA_PATH", path)
	t.Setenv("CUDA_HOME", home)
	got, err := findCUDA(flag)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(flag, "include"), got)
	got, err = findCUDA("")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(path, "include"), got)
	got, err = findCUDA(bogus)
	require.NoError(t, err, "a bogus flag falls back to the environment")
	assert.Equal(t, filepath.Join(path, "include"), got)
	t.Setenv("CUDA_PATH", "")
	got, err = findCUDA("")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(home, "include"), got)
}

// go generate runs the generator in each package's directory: a relative CUDA_PATH,
// set where `go generate ./...` was typed, is also tried from the module root.
func TestFindCUDARelativeToModuleRoot(t *testing.T) {
	mod := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module x\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(mod, "tk", "include"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(mod, "tk", "include", "cuda.h"), nil, 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(mod, "pkg"), 0o755))
	t.Chdir(filepath.Join(mod, "pkg"))
	t.Setenv("CUDA_HOME", "")
	t.Setenv("CUDA_PATH", "tk")
	got, err := findCUDA("")
	require.NoError(t, err)
	want, err := filepath.EvalSymlinks(filepath.Join(mod, "tk", "include"))
	require.NoError(t, err)
	got, err = filepath.EvalSymlinks(got)
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

// A minimal valid spec for the bad-input tests; each test appends or replaces lines.
const badSpec = `name = "bad"
title = "Bad"
entry = ["bad.h"]
files = ["bad.h"]
prefix = "bad"
macro_prefixes = ["BAD_"]
soname = "libbad.so.1"
env = "GOCUDA_BAD_LIB"
`

// badTree writes an include directory with bad.h and a specs directory with bad.toml.
func badTree(t *testing.T, header, spec string) (inc, specs string) {
	t.Helper()
	dir := t.TempDir()
	inc, specs = filepath.Join(dir, "include"), filepath.Join(dir, "specs")
	require.NoError(t, os.MkdirAll(inc, 0o755))
	require.NoError(t, os.MkdirAll(specs, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(inc, "bad.h"), []byte(header), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(specs, "bad.toml"), []byte(spec), 0o644))
	return inc, specs
}

// runBad generates library bad with -strict: a spec entry the header lacks is an error.
func runBad(t *testing.T, header, spec string) error {
	t.Helper()
	inc, specs := badTree(t, header, spec)
	out := t.TempDir()
	err := run([]string{"-include", inc, "-specs", specs, "-lib", "bad", "-out", out, "-strict"}, io.Discard)
	ents, rerr := os.ReadDir(out)
	require.NoError(t, rerr)
	if err != nil {
		assert.Empty(t, ents, "a failing run writes nothing")
	}
	return err
}

const okHeader = "int badOk(int x);\n"

func TestBadSpec(t *testing.T) {
	require.NoError(t, runBad(t, okHeader, badSpec), "the base spec is valid")
	for _, c := range []struct {
		name, spec string
		want       []string
	}{
		{"exclusion without reason", badSpec + "[[exclude]]\nfunction = \"badOk\"\n", []string{"exclusion of badOk has no reason"}},
		{"exclusion with blank reason", badSpec + "[[exclude]]\nfunction = \"badOk\"\nreason = \"  \"\n", []string{"exclusion of badOk has no reason"}},
		{"excluded twice", badSpec + "[[exclude]]\nfunction = \"badOk\"\nreason = \"r\"\n[[exclude]]\nfunction = \"badOk\"\nreason = \"r\"\n", []string{"badOk excluded twice"}},
		{"unknown key", badSpec + "colour = \"red\"\n", []string{"unknown keys", "colour"}},
		{"unknown key in a table", badSpec + "[[exclude]]\nfunction = \"badOk\"\nreason = \"r\"\nwhy = \"x\"\n", []string{"unknown keys", "exclude.why"}},
		{"syntax error", badSpec + "prefix = \n", []string{"bad.toml"}},
		{"missing soname", strings.Replace(badSpec, "soname = \"libbad.so.1\"\n", "", 1), []string{"soname is empty"}},
		{"resource without why", badSpec + "[[resource]]\ntype = \"x\"\ngo = \"X\"\ndestroy = \"badOk\"\n", []string{"resource x: why is empty"}},
		{"excluded function not declared", badSpec + "[[exclude]]\nfunction = \"badGone\"\nreason = \"r\"\n", []string{"exclusion of badGone dropped: the headers do not declare it"}},
		{"soname macro not defined", strings.Replace(badSpec, "libbad.so.1", "libbad.so.{BAD_MAJOR}", 1), []string{"soname macro BAD_MAJOR is not defined"}},
		{"handwritten not exported", badSpec + "[[resource]]\ntype = \"x\"\ngo = \"X\"\ndestroy = \"badOk\"\nwhy = \"w\"\nhandwritten = \"stream\"\n", []string{`resource x: handwritten = "stream" is not an exported Go identifier`}},
		{"handwritten not an identifier", badSpec + "[[resource]]\ntype = \"x\"\ngo = \"X\"\ndestroy = \"badOk\"\nwhy = \"w\"\nhandwritten = \"cuda.Stream\"\n", []string{"is not an exported Go identifier"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := runBad(t, okHeader, c.spec)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "bad.toml", "the error names the spec file")
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}

	t.Run("status not declared", func(t *testing.T) {
		// Found while emitting: the error names the library, not the spec file.
		err := runBad(t, okHeader, badSpec+"status = \"badStatus\"\nsuccess = \"BAD_OK\"\n")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "bad: status type badStatus is not declared by the headers")
	})

	t.Run("loadSpecs", func(t *testing.T) {
		_, specs := badTree(t, okHeader, badSpec+"[[exclude]]\nfunction = \"badOk\"\n")
		_, err := loadSpecs(specs, module)
		require.Error(t, err)
		assert.Contains(t, err.Error(), filepath.Join(specs, "bad.toml")+": exclusion of badOk has no reason")
		_, err = loadSpecs(t.TempDir(), module)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "no specs")
	})

	t.Run("import override", func(t *testing.T) {
		_, specs := badTree(t, okHeader, badSpec+"import = \"example.com/x/bad\"\n")
		s, err := loadSpecs(specs, module)
		require.NoError(t, err)
		assert.Equal(t, "example.com/x/bad", s[0].Import)
		_, specs = badTree(t, okHeader, badSpec)
		s, err = loadSpecs(specs, module)
		require.NoError(t, err)
		assert.Equal(t, module+"/bad/badraw", s[0].Import)
		assert.Equal(t, "badraw", s[0].pkgName())
	})
}

// A resource row with a handwritten type gets no owner type, but is checked like any
// other: its blocking class and destroy function are what the handwritten type (and
// tools/blockprobe) rely on.
func TestHandwrittenResource(t *testing.T) {
	const header = "typedef enum { BAD_OK = 0, BAD_FAIL = 1 } badStatus;\n" +
		"typedef struct badH_st *badH;\n" +
		"badStatus badHCreate(badH *h);\n" +
		"badStatus badHDestroy(badH h);\n"
	spec := func(destroy, handwritten string) string {
		s := badSpec + "status = \"badStatus\"\nsuccess = \"BAD_OK\"\n" +
			"[[resource]]\ntype = \"badH\"\ngo = \"H\"\ncreate = [\"badHCreate\"]\ndestroy = \"" + destroy + "\"\nblocking = true\nwhy = \"w\"\n"
		if handwritten != "" {
			s += "handwritten = \"" + handwritten + "\"\n"
		}
		return s
	}
	resources := func(t *testing.T, spec string) string {
		t.Helper()
		inc, specs := badTree(t, header, spec)
		out := t.TempDir()
		require.NoError(t, run([]string{"-include", inc, "-specs", specs, "-lib", "bad", "-out", out}, io.Discard))
		b, err := os.ReadFile(filepath.Join(out, "zz_generated_resources.go"))
		require.NoError(t, err)
		return string(b)
	}
	assert.Contains(t, resources(t, spec("badHDestroy", "")), "type OwnedH struct", "a plain row gets its owner")
	got := resources(t, spec("badHDestroy", "Handle"))
	for _, name := range []string{"OwnedH", "OwnH", "NewOwnedH", "owner."} {
		assert.NotContains(t, got, name, "a handwritten row gets no owner")
	}

	err := runBad(t, header, spec("badGone", "Handle"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "resource badH: destroy function badGone dropped: the headers do not declare it")
}

// The in-context variants of a library other than cuda are exported as XIn and take
// the context switch procs from the cuda raw package's CtxSwitchProcs.
func TestInContextOfAnotherLibrary(t *testing.T) {
	inc, specs := badTree(t, statusHeader, statusSpec+"in_context = [\"badOk\"]\n")
	cudaH := "typedef struct CUctx_st *CUcontext;\nint cuInit(int f);\nint cuCtxGetCurrent(CUcontext *c);\nint cuCtxSetCurrent(CUcontext c);\n"
	require.NoError(t, os.WriteFile(filepath.Join(inc, "cuda.h"), []byte(cudaH), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(specs, "cuda.toml"), []byte(strings.NewReplacer(
		`"bad"`, `"cuda"`, `"bad.h"`, `"cuda.h"`, `"Bad"`, `"CUDA"`, `prefix = "bad"`, `prefix = "cu"`, "GOCUDA_BAD_LIB", "GOCUDA_CUDA_LIB").Replace(badSpec)), 0o644))
	out := t.TempDir()
	require.NoError(t, run([]string{"-include", inc, "-specs", specs, "-lib", "bad", "-out", out}, io.Discard))
	b, err := os.ReadFile(filepath.Join(out, "zz_generated_funcs.go"))
	require.NoError(t, err)
	got := string(b)
	assert.Contains(t, got, "package badraw")
	assert.Contains(t, got, "func OkIn(ctx cudaraw.CUcontext, x int32) error")
	assert.Contains(t, got, "get, set, err := cudaraw.CtxSwitchProcs()")
	assert.Contains(t, got, `"github.com/gocuda/gocuda/cuda/cudaraw"`)

	// The cuda raw package must bind what CtxSwitchProcs hands out.
	require.NoError(t, os.WriteFile(filepath.Join(inc, "cuda.h"), []byte("typedef struct CUctx_st *CUcontext;\nint cuInit(int f);\n"), 0o644))
	err = run([]string{"-include", inc, "-specs", specs, "-lib", "bad", "-out", t.TempDir()}, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cuCtxGetCurrent is not bound")
}

// TestBadHeader checks that failures on C input report the header position and that run
// returns an error (writing nothing).
func TestBadHeader(t *testing.T) {
	for _, c := range []struct {
		name, header string
		want         []string
	}{
		{"syntax error", "int badOk(int x);\n\nint badBroken(int x;\nint badOther(void);\n", []string{"bad.h:3"}},
		{"unknown type", "int badOk(int x);\nbadUnknown badF(void);\n", []string{"bad.h:2"}},
		{"variadic not excluded", "int badOk(int x);\nint badLog(const char *f, ...);\n", []string{"bad.h:2", "badLog is variadic; exclude it with a reason"}},
		{"function typedef", "typedef int badFn(int);\nint badOk(badFn *f);\n", []string{"bad.h:1", "function typedef badFn is not supported"}},
		{"Go name clash", "int badOk(int x);\nint badOk_v2(int x);\nint bad_ok(int x);\nint badOK(int x);\nint bad_Ok(int x);\n", []string{"bad.h:", "both map to Go name Ok"}},
		{"bit field in union", "typedef union { int a : 3; int b; } badU;\nint badOk(badU *u);\n", []string{"bad.h:1", "badU", "bit fields in unions are not supported"}},
		{"type no spec owns", "#include <other.h>\nint badOk(otherT x);\n", []string{"otherT", "other.h:1", "no spec owns it"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			inc, specs := badTree(t, c.header, badSpec)
			require.NoError(t, os.WriteFile(filepath.Join(inc, "other.h"), []byte("typedef struct { int v; } otherT;\n"), 0o644))
			err := run([]string{"-include", inc, "-specs", specs, "-lib", "bad", "-out", t.TempDir()}, io.Discard)
			require.Error(t, err)
			t.Log(err)
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// TestRunErrors covers run's own argument errors.
func TestRunErrors(t *testing.T) {
	inc, err := filepath.Abs(goldenInclude)
	require.NoError(t, err)
	err = run([]string{"-include", inc, "-specs", goldenSpecs, "-lib", "nosuch", "-out", t.TempDir()}, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `no spec for library "nosuch"`)

	// A library whose entry headers are missing is an error when asked for, and is
	// skipped (and said so) by -stats.
	empty := t.TempDir()
	err = run([]string{"-include", empty, "-specs", goldenSpecs, "-lib", "golda", "-out", t.TempDir()}, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "golda: entry headers [golda.h] not found in "+empty)
}

// TestGeneratedUpToDate regenerates every library in ../headers with -all -check: the
// committed zz_generated_* files must be exactly what go generate writes. It runs with
// -strict: the committed packages come from these headers, so a spec entry they lack
// is a mistake in the spec.
func TestGeneratedUpToDate(t *testing.T) {
	t.Parallel()
	inc, err := findCUDA("")
	if err != nil {
		t.Skipf("no CUDA headers (set CUDA_PATH to a CUDA toolkit to check the generated packages): %v", err)
	}
	root := filepath.Dir(inc)
	specs, err := loadSpecs("../headers", module)
	require.NoError(t, err)
	require.NotEmpty(t, specs)
	start := time.Now()
	var out bytes.Buffer
	err = run([]string{"-cuda-path", root, "-specs", "../headers", "-all", "-check", "-strict", "-skip-missing", "-out", ".."}, &out)
	t.Logf("in %v (CUDA_PATH=%s):\n%s", time.Since(start).Round(time.Millisecond), os.Getenv("CUDA_PATH"), strings.TrimSpace(out.String()))
	require.NoError(t, err, "the generated files are stale: run go generate ./... (with CUDA_PATH=%s)", root)
	checked := strings.Count(out.String(), "functions in the headers")
	assert.Equal(t, len(specs), checked+strings.Count(out.String(), ": skipped"), "every spec is checked or skipped")
}

// TestStatsCoverEverySpec runs -stats -v on ../headers: every spec is reported, and
// every function its headers declare is listed, bound (with its Go name) or excluded
// (with a reason).
func TestStatsCoverEverySpec(t *testing.T) {
	inc, err := findCUDA("")
	if err != nil {
		t.Skipf("no CUDA headers (set CUDA_PATH to a CUDA toolkit): %v", err)
	}
	specs, err := loadSpecs("../headers", module)
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, run([]string{"-cuda-path", filepath.Dir(inc), "-specs", "../headers", "-stats", "-v"}, &out))
	type section struct{ declared, bound, excluded int }
	got := map[string]*section{}
	var cur *section
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		f := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "    bound "):
			require.NotNil(t, cur, line)
			require.Len(t, f, 3, "bound C: Go: %q", line)
			cur.bound++
		case strings.HasPrefix(line, "    excluded "):
			require.NotNil(t, cur, line)
			require.Greater(t, len(f), 2, "excluded C: reason: %q", line)
			cur.excluded++
		case strings.HasPrefix(line, "    note: "), strings.HasPrefix(line, "    alias "), strings.HasPrefix(line, "total "):
		case strings.HasSuffix(line, ": skipped"):
			t.Logf("%s", line)
			got[f[0]], cur = &section{}, nil
		default:
			require.GreaterOrEqual(t, len(f), 4, line)
			require.Equal(t, "functions", f[2], line)
			cur = &section{}
			_, err := fmt.Sscan(f[3], &cur.declared)
			require.NoError(t, err, line)
			got[f[0]] = cur
		}
	}
	for _, s := range specs {
		sec, ok := got[s.Name]
		if assert.True(t, ok, "%s is reported", s.Name) {
			assert.Equal(t, sec.declared, sec.bound+sec.excluded, "%s: every function listed", s.Name)
		}
	}
	assert.Len(t, got, len(specs))
}
