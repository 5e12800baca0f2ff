package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The golden tests generate two small libraries from headers written for the purpose
// (testdata/golden/include, specs in testdata/golden/specs) and compare the output byte
// for byte with the packages committed under internal/golden. Those packages are real:
// go build and go vet compile them, and their generated layout tests (plus handwritten
// tests beside them) check the Go types against gcc. After a deliberate generator change:
//
//	go test ./gen -run TestGolden -update
var update = flag.Bool("update", false, "rewrite the golden files")

// goldenLibs are the golden libraries: golda, and goldb which uses golda's types.
var goldenLibs = []string{"golda", "goldb"}

const (
	goldenCommand = "go test ./gen -run TestGolden -update"
	goldenSpecs   = "testdata/golden/specs"
	goldenInclude = "testdata/golden/include"
	// goldenLayoutInclude is goldenInclude seen from internal/golden/<lib>.
	goldenLayoutInclude = "../../../testdata/golden/include"
	goldenStats         = "testdata/golden/stats.txt"
)

// goldenArgs are the generator's arguments for one golden library.
func goldenArgs(t *testing.T, lib, out string, extra ...string) []string {
	t.Helper()
	inc, err := filepath.Abs(goldenInclude)
	require.NoError(t, err)
	args := []string{"-include", inc, "-specs", goldenSpecs, "-lib", lib, "-out", out,
		"-command", goldenCommand, "-layout-include", goldenLayoutInclude}
	return append(args, extra...)
}

func TestGolden(t *testing.T) {
	for _, lib := range goldenLibs {
		t.Run(lib, func(t *testing.T) {
			tmp := t.TempDir()
			var log bytes.Buffer
			require.NoError(t, run(goldenArgs(t, lib, tmp), &log), "generating %s", lib)
			got := readGenerated(t, tmp)
			require.NotEmpty(t, got, "the generator wrote nothing for %s", lib)
			dir := filepath.Join("internal", "golden", lib)
			if *update {
				require.NoError(t, os.MkdirAll(dir, 0o755))
				for name, data := range got {
					require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
				}
				for name := range readGenerated(t, dir) {
					if _, ok := got[name]; !ok {
						require.NoError(t, os.Remove(filepath.Join(dir, name)), "removing stale %s", name)
					}
				}
				t.Logf("updated %d files in %s", len(got), dir)
				return
			}
			want := readGenerated(t, dir)
			for _, name := range sortedKeys(got) {
				w, ok := want[name]
				if !ok {
					t.Errorf("%s: missing from the golden package; run %s", filepath.Join(dir, name), goldenCommand)
					continue
				}
				if !bytes.Equal(w, got[name]) {
					t.Errorf("%s differs from the generator's output (golden -, generated +):\n%s\nIf the change is intended, run %s and review the diff.",
						filepath.Join(dir, name), firstDiff(w, got[name]), goldenCommand)
				}
			}
			for _, name := range sortedKeys(want) {
				if _, ok := got[name]; !ok {
					t.Errorf("%s: golden file the generator no longer writes; run %s", filepath.Join(dir, name), goldenCommand)
				}
			}
		})
	}
}

// TestGoldenHandwritten checks the golden package for what the handwritten resource
// row of golda.toml (goldQueue_t, handwritten = "Queue") must and must not produce:
// its raw functions, and no owner type beside the handwritten Queue.
func TestGoldenHandwritten(t *testing.T) {
	dir := filepath.Join("internal", "golden", "golda")
	got := readGenerated(t, dir)
	res := string(got["zz_generated_resources.go"])
	assert.Contains(t, res, "type OwnedCtx struct", "the plain row keeps its owner")
	for _, name := range []string{"OwnedQueue", "OwnQueue", "GoldQueue"} {
		assert.NotContains(t, res, name, "the handwritten row gets no owner")
	}
	assert.Contains(t, string(got["zz_generated_funcs.go"]), "func QueueDestroy(queue GoldQueue) error")
	hand, err := os.ReadFile(filepath.Join(dir, "queue.go"))
	require.NoError(t, err)
	assert.Contains(t, string(hand), "type Queue struct", "the handwritten type the row names")
}

// TestGoldenStats compares the -stats report of the golden specs with testdata/golden/stats.txt.
func TestGoldenStats(t *testing.T) {
	inc, err := filepath.Abs(goldenInclude)
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, run([]string{"-include", inc, "-specs", goldenSpecs, "-stats"}, &out))
	if *update {
		require.NoError(t, os.WriteFile(goldenStats, out.Bytes(), 0o644))
		return
	}
	want, err := os.ReadFile(goldenStats)
	require.NoError(t, err, "run %s", goldenCommand)
	if !bytes.Equal(want, out.Bytes()) {
		t.Errorf("%s differs from -stats (golden -, generated +):\n%s\nIf the change is intended, run %s.", goldenStats, firstDiff(want, out.Bytes()), goldenCommand)
	}
}

// TestGoldenCheck runs the generator with -check: quiet on the committed golden packages,
// and an error naming exactly the stale file when one differs.
func TestGoldenCheck(t *testing.T) {
	if *update {
		t.Skip("-update rewrites the golden files")
	}
	for _, lib := range goldenLibs {
		dir := filepath.Join("internal", "golden", lib)
		require.NoError(t, run(goldenArgs(t, lib, dir, "-check"), io.Discard), "%s is not up to date; run %s", dir, goldenCommand)
	}
	// A copy with one file changed and one missing.
	tmp := t.TempDir()
	dir := filepath.Join("internal", "golden", "golda")
	for name, data := range readGenerated(t, dir) {
		require.NoError(t, os.WriteFile(filepath.Join(tmp, name), data, 0o644))
	}
	funcs := filepath.Join(tmp, "zz_generated_funcs.go")
	require.NoError(t, os.WriteFile(funcs, []byte("package golda\n"), 0o644))
	status := filepath.Join(tmp, "zz_generated_status.go")
	require.NoError(t, os.Remove(status))
	err := run(goldenArgs(t, "golda", tmp, "-check"), io.Discard)
	require.Error(t, err)
	require.Contains(t, err.Error(), funcs)
	require.Contains(t, err.Error(), status)
	require.NotContains(t, err.Error(), "zz_generated_types.go")
	// -check writes nothing.
	b, err := os.ReadFile(funcs)
	require.NoError(t, err)
	require.Equal(t, "package golda\n", string(b))
}

// readGenerated reads the zz_generated_* files of dir (handwritten files are left alone).
func readGenerated(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return files
	}
	require.NoError(t, err)
	for _, e := range ents {
		if e.IsDir() || !strings.HasPrefix(e.Name(), "zz_generated_") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		files[e.Name()] = b
	}
	return files
}

// firstDiff shows where two texts differ: the lines between their common prefix and
// common suffix (golden -, generated +), with a few lines of context.
func firstDiff(want, got []byte) string {
	w := strings.Split(string(want), "\n")
	g := strings.Split(string(got), "\n")
	pre := 0
	for pre < len(w) && pre < len(g) && w[pre] == g[pre] {
		pre++
	}
	suf := 0
	for suf < len(w)-pre && suf < len(g)-pre && w[len(w)-1-suf] == g[len(g)-1-suf] {
		suf++
	}
	const context, most = 3, 12
	var b strings.Builder
	for k := max(pre-context, 0); k < pre; k++ {
		fmt.Fprintf(&b, "  %5d   %s\n", k+1, w[k])
	}
	hunk := func(sign string, lines []string) {
		end := len(lines) - suf
		for k := pre; k < end && k < pre+most; k++ {
			fmt.Fprintf(&b, "  %5d %s %s\n", k+1, sign, lines[k])
		}
		if end-pre > most {
			fmt.Fprintf(&b, "        %s ... %d more lines\n", sign, end-pre-most)
		}
	}
	hunk("-", w)
	hunk("+", g)
	for k := len(w) - suf; k < len(w) && k < len(w)-suf+context; k++ {
		fmt.Fprintf(&b, "  %5d   %s\n", k+1, w[k])
	}
	fmt.Fprintf(&b, "  (golden %d lines, generated %d lines)", len(w), len(g))
	return b.String()
}

// TestGoldenAliases checks the macro aliases of golda.h: a Go function under the
// macro's name where it is free and the target is bound, and nothing otherwise.
func TestGoldenAliases(t *testing.T) {
	funcs := string(readGenerated(t, filepath.Join("internal", "golden", "golda"))["zz_generated_funcs.go"])
	assert.Contains(t, funcs, "func Quick(ctx GoldCtx, n int64, flags GoldFlags) error {\n\treturn BarV2(ctx, n, flags)\n}")
	assert.Contains(t, funcs, "func Fast(ctx GoldCtx, n int64, alpha float32, x *float32) error {\n\treturn Scale64(ctx, n, alpha, x)\n}", "through GOLDA_API(f)")
	assert.Equal(t, 1, strings.Count(funcs, "func Scale64("), "goldScale64 leaves the binding of goldScale_64 alone")
	assert.NotContains(t, funcs, "func Print(", "goldLog is not bound")
}
