package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// One spec serves every header version: what a spec names and the headers lack is
// dropped with a note (an error with -strict), and a run writes nothing unless every
// library generates.

// addCUDA puts a small cuda library beside bad (in_context needs its CUcontext).
func addCUDA(t *testing.T, inc, specs string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(inc, "cuda.h"), []byte("typedef struct CUctx_st *CUcontext;\nint cuInit(int f);\nint cuCtxGetCurrent(CUcontext *c);\nint cuCtxSetCurrent(CUcontext c);\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(specs, "cuda.toml"), []byte(strings.NewReplacer(
		`"bad"`, `"cuda"`, `"bad.h"`, `"cuda.h"`, `"Bad"`, `"CUDA"`, `prefix = "bad"`, `prefix = "cu"`, "GOCUDA_BAD_LIB", "GOCUDA_CUDA_LIB").Replace(badSpec)), 0o644))
}

// olderHeader is bad.h as an older version: badHCreate_v2, badHCreateFrom, badI's destroy function,
// the type badGoneT, badGone and badWait_v2 (only badWait) are not declared yet.
const olderHeader = "typedef enum { BAD_OK = 0, BAD_FAIL = 1 } badStatus;\n" +
	"typedef struct badH_st *badH;\n" +
	"typedef struct badI_st *badI;\n" +
	"badStatus badHCreate(badH *h);\n" +
	"badStatus badHDestroy(badH h);\n" +
	"badStatus badICreate(badI *i);\n" +
	"badStatus badWait(int x);\n"

// newerSpec is written for the newer headers.
const newerSpec = statusSpec + `in_context = ["badWait_v2", "badHDestroy"]
[rename]
badGoneT = "Gone"
[[exclude]]
function = "badGone"
reason = "r"
[[resource]]
type = "badH"
go = "H"
create = ["badHCreate", "badHCreate_v2", "badHCreateFrom"]
destroy = "badHDestroy"
why = "w"
[[resource]]
type = "badI"
go = "I"
create = ["badICreate"]
destroy = "badIDestroy"
why = "w"
[[resource]]
type = "badGoneT"
go = "Gone"
destroy = "badHDestroy"
why = "w"
`

// wantNotes are the notes newerSpec gets on olderHeader.
var wantNotes = []string{
	"exclusion of badGone dropped: the headers do not declare it",
	"rename of badGoneT dropped: the headers do not declare it",
	"in_context function badWait_v2: not declared; badWait, of the same Go name Wait, used instead",
	"resource badH: create function badHCreate_v2: not declared; badHCreate, of the same Go name HCreate, used instead",
	"resource badH: create function badHCreateFrom dropped: the headers do not declare it",
	"resource badI: destroy function badIDestroy dropped: the headers do not declare it",
	"resource badI dropped: it has no destroy function",
	"resource badGoneT dropped: the headers do not declare the type",
}

func TestOlderHeadersNoted(t *testing.T) {
	inc, specs := badTree(t, olderHeader, newerSpec)
	addCUDA(t, inc, specs)
	out := t.TempDir()
	var log bytes.Buffer
	require.NoError(t, run([]string{"-include", inc, "-specs", specs, "-lib", "bad", "-out", out}, &log))
	for _, n := range wantNotes {
		assert.Contains(t, log.String(), "gen: bad: note: "+n+"\n")
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(out, name))
		require.NoError(t, err)
		return string(b)
	}
	res := read("zz_generated_resources.go")
	assert.Contains(t, res, "OwnedH owns a badH (created by badHCreate) and releases it with badHDestroy.")
	assert.NotContains(t, res, "OwnedI", "a row without its destroy function is left out")
	assert.NotContains(t, res, "OwnedGone")
	funcs := read("zz_generated_funcs.go")
	assert.Contains(t, funcs, "func WaitIn(ctx cudaraw.CUcontext, x int32) error", "in_context takes the older ABI of the same Go name")
	assert.Contains(t, funcs, "func HDestroyIn(")

	var stats bytes.Buffer
	require.NoError(t, run([]string{"-include", inc, "-specs", specs, "-stats"}, &stats))
	for _, n := range wantNotes {
		assert.Contains(t, stats.String(), "    note: "+n+"\n", "-stats shows the notes")
	}

	// -strict: the same notes, as an error naming the spec; nothing is written.
	strictOut := t.TempDir()
	err := run([]string{"-include", inc, "-specs", specs, "-lib", "bad", "-out", strictOut, "-strict"}, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), filepath.Join(specs, "bad.toml")+": the spec names what the headers lack (-strict)")
	for _, n := range wantNotes {
		assert.Contains(t, err.Error(), "\n\t"+n)
	}
	ents, err := os.ReadDir(strictOut)
	require.NoError(t, err)
	assert.Empty(t, ents)
}

// A run writes its package only when every library generates: go generate runs the
// generator once per package, and a failure in one must not leave the others from
// other headers.
func TestAllOrNothing(t *testing.T) {
	inc, specs := badTree(t, okHeader, badSpec)
	require.NoError(t, os.WriteFile(filepath.Join(inc, "other.h"), []byte("int otherOk(int x);\nint otherLog(const char *f, ...);\n"), 0o644))
	other := strings.NewReplacer(`"bad"`, `"other"`, `"bad.h"`, `"other.h"`, `prefix = "bad"`, `prefix = "other"`, "GOCUDA_BAD_LIB", "GOCUDA_OTHER_LIB").Replace(badSpec)
	require.NoError(t, os.WriteFile(filepath.Join(specs, "other.toml"), []byte(other), 0o644))

	out := t.TempDir()
	old := filepath.Join(out, "zz_generated_funcs.go")
	require.NoError(t, os.WriteFile(old, []byte("package bad\n"), 0o644))
	err := run([]string{"-include", inc, "-specs", specs, "-lib", "bad", "-out", out}, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "otherLog is variadic")
	assert.Contains(t, err.Error(), "nothing written: every library must generate for any to be written")
	b, err := os.ReadFile(old)
	require.NoError(t, err)
	assert.Equal(t, "package bad\n", string(b), "bad's files are left as they were")
	ents, err := os.ReadDir(out)
	require.NoError(t, err)
	assert.Len(t, ents, 1, "no other file, temporary or not")

	root := t.TempDir()
	err = run([]string{"-include", inc, "-specs", specs, "-all", "-out", root}, io.Discard)
	require.Error(t, err)
	ents, err = os.ReadDir(root)
	require.NoError(t, err)
	assert.Empty(t, ents, "-all writes nothing either")

	// With the library fixed, -all writes both packages, and -lib rewrites bad's file.
	other += "[[exclude]]\nfunction = \"otherLog\"\nreason = \"variadic\"\n"
	require.NoError(t, os.WriteFile(filepath.Join(specs, "other.toml"), []byte(other), 0o644))
	var log bytes.Buffer
	require.NoError(t, run([]string{"-include", inc, "-specs", specs, "-all", "-out", root}, &log))
	for _, lib := range []string{"bad", "other"} {
		assert.Contains(t, log.String(), "gen: "+lib+": ")
		got := readGenerated(t, filepath.Join(root, lib, lib+"raw"))
		assert.Contains(t, got, "zz_generated_funcs.go")
		assert.Contains(t, string(got["zz_generated_funcs.go"]), "// Code generated by go run ../gen -lib "+lib+"; DO NOT EDIT.")
	}
	require.NoError(t, run([]string{"-include", inc, "-specs", specs, "-all", "-out", root, "-check"}, io.Discard), "-all -check agrees with -all")
	require.NoError(t, run([]string{"-include", inc, "-specs", specs, "-lib", "bad", "-out", out}, io.Discard))
	b, err = os.ReadFile(old)
	require.NoError(t, err)
	assert.Equal(t, string(readGenerated(t, filepath.Join(root, "bad", "badraw"))["zz_generated_funcs.go"]), string(b), "-lib and -all write the same file")
}

// A library whose headers are missing fails every run (its package would be left from
// other headers), unless -skip-missing leaves it out.
func TestMissingHeaders(t *testing.T) {
	inc, specs := badTree(t, okHeader, badSpec)
	other := strings.NewReplacer(`"bad"`, `"other"`, `"bad.h"`, `"other.h"`, `prefix = "bad"`, `prefix = "other"`).Replace(badSpec)
	require.NoError(t, os.WriteFile(filepath.Join(specs, "other.toml"), []byte(other), 0o644))
	out := t.TempDir()
	err := run([]string{"-include", inc, "-specs", specs, "-lib", "bad", "-out", out}, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "other: entry headers [other.h] not found in "+inc)
	assert.Contains(t, err.Error(), "nothing written")
	assert.Contains(t, err.Error(), "-skip-missing")
	ents, err := os.ReadDir(out)
	require.NoError(t, err)
	assert.Empty(t, ents)

	var log bytes.Buffer
	require.NoError(t, run([]string{"-include", inc, "-specs", specs, "-lib", "bad", "-out", out, "-skip-missing"}, &log))
	assert.Contains(t, log.String(), "other     headers [other.h] not found in "+inc+": skipped")
	assert.NotEmpty(t, readGenerated(t, out))

	err = run([]string{"-include", inc, "-specs", specs, "-lib", "other", "-out", t.TempDir(), "-skip-missing"}, io.Discard)
	require.Error(t, err, "the library asked for cannot be skipped")
	assert.Contains(t, err.Error(), "other: entry headers [other.h] not found")

	err = run([]string{"-include", inc, "-specs", specs, "-lib", "bad", "-all"}, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "-all and -lib exclude each other")
}

// olderToolkit is the CUDA toolkit the older-headers test generates from, beside the
// one CUDA_PATH names (CI: ../shared/cuda-11.8 from the module root).
const olderToolkit = "cuda-11.8"

// findOlderToolkit looks for olderToolkit beside the toolkit findCUDA finds, then in
// ../shared from the module root; it returns it, or where it looked.
func findOlderToolkit() (string, []string) {
	var cands []string
	if inc, err := findCUDA(""); err == nil {
		cands = append(cands, filepath.Join(filepath.Dir(filepath.Dir(inc)), olderToolkit))
	}
	if root, err := moduleRoot(); err == nil {
		cands = append(cands, filepath.Join(filepath.Dir(root), "shared", olderToolkit))
	}
	for _, c := range cands {
		if _, err := os.Stat(filepath.Join(c, "include", "cuda.h")); err == nil {
			return c, nil
		}
	}
	return "", cands
}

// TestOlderHeaders generates the raw layer from the CUDA 11.8 headers, with the specs
// written for the newest ones, into a module of its own, and builds and vets it, and
// runs its layout and prototype tests against those headers. The generated packages
// use the real module's dl, resource and internal packages (through a replace); the
// module path lies under the real one's, which Go requires of a user of internal/.
func TestOlderHeaders(t *testing.T) {
	t.Parallel() // minutes of go build: beside the other tests
	toolkit, tried := findOlderToolkit()
	if toolkit == "" {
		t.Skipf("no %s toolkit (looked for include/cuda.h in %v): the generation from older headers is not checked", olderToolkit, tried)
	}
	if testing.Short() {
		t.Skip("-short: building the packages generated from older headers takes minutes")
	}
	root, err := moduleRoot()
	require.NoError(t, err)
	mod := t.TempDir()
	const path = module + "/internal/olderheaders"
	var log bytes.Buffer
	err = run([]string{"-cuda-path", toolkit, "-specs", "../headers", "-all", "-skip-missing", "-out", mod, "-import-root", path}, &log)
	t.Logf("generated from %s:\n%s", toolkit, log.String())
	require.NoError(t, err)

	// The libraries CUDA 11.8 ships are generated, every declared function bound or excluded.
	var generated []string
	for _, line := range strings.Split(log.String(), "\n") {
		var lib string
		var declared, bound, excluded int
		if _, err := fmt.Sscanf(line, "gen: %s %d functions in the headers, %d bound, %d excluded", &lib, &declared, &bound, &excluded); err != nil {
			continue
		}
		lib = strings.TrimSuffix(lib, ":")
		generated = append(generated, lib)
		assert.Equal(t, declared, bound+excluded, "%s: every function bound or excluded", lib)
		funcs, err := os.ReadFile(filepath.Join(mod, lib, lib+"raw", "zz_generated_funcs.go"))
		require.NoError(t, err)
		assert.Equal(t, bound, strings.Count(string(funcs), " = library.NewProc("), "%s: one symbol per bound function", lib)
	}
	assert.Subset(t, generated, []string{"cuda", "cublas", "cufft", "curand", "cusparse"})

	require.NoError(t, os.WriteFile(filepath.Join(mod, "go.mod"), []byte(fmt.Sprintf(
		"module %s\n\ngo 1.26\n\nrequire %s v0.0.0-00010101000000-000000000000\n\nreplace %s => %s\n", path, module, module, root)), 0o644))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(mod, "go.sum"), sum, 0o644))
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local",
		"CUDA_PATH="+toolkit, "CUDA_HOME=")
	for _, args := range [][]string{
		{"build", "./..."},
		{"vet", "./..."},
		{"test", "-count=1", "-run", "^(TestLayout|TestPrototypes)$", "./..."},
	} {
		start := time.Now()
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = mod, env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s in the module generated from %s:\n%s", strings.Join(args, " "), toolkit, out)
		t.Logf("go %s: %v\n%s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond), out)
	}
}
