package vet_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/tools/go/analysis/checker"
	"golang.org/x/tools/go/packages"

	"github.com/gocuda/gocuda/vet"
)

// bugMark marks the line of a seeded bug and names the analyzer that must report it.
var bugMark = regexp.MustCompile(`// BUG\((\w+)\)`)

// TestSeeded runs every analyzer over the seeded-bug programs (testdata/seeded, one
// per directory) and checks that each program gets exactly the findings its BUG
// marks name: every seeded bug caught, by the analyzer named, and nothing else.
// docs/vet.md's table lists them. The README's first program gets no finding.
func TestSeeded(t *testing.T) {
	dir := testdata(t)
	cfg := &packages.Config{
		Mode: packages.LoadAllSyntax,
		Dir:  dir,
		Env:  append(os.Environ(), "GOWORK=off", "GOPROXY=off"),
	}
	pkgs, err := packages.Load(cfg, "./seeded/...", "./readme")
	require.NoError(t, err)
	require.Zero(t, packages.PrintErrors(pkgs), "the seeded programs must compile")
	g, err := checker.Analyze(vet.Analyzers, pkgs, nil)
	require.NoError(t, err)

	got := map[string][]string{} // program → "line analyzer", sorted
	for act := range g.All() {
		if !act.IsRoot {
			continue
		}
		for _, d := range act.Diagnostics {
			pos := act.Package.Fset.Position(d.Pos)
			prog := filepath.Base(filepath.Dir(pos.Filename))
			got[prog] = append(got[prog], fmt.Sprintf("%d %s", pos.Line, act.Analyzer.Name))
		}
	}
	doc, err := os.ReadFile(filepath.Join("..", "docs", "vet.md"))
	require.NoError(t, err)
	// The README's program, correct, gets no finding.
	pkgs = slices.DeleteFunc(pkgs, func(p *packages.Package) bool { return p.PkgPath == "vettest/readme" })
	assert.Empty(t, got["readme"], "findings in the README's program")
	require.GreaterOrEqual(t, len(pkgs), 20, "at least 20 seeded programs")
	for _, p := range pkgs {
		prog := filepath.Base(p.PkgPath)
		t.Run(prog, func(t *testing.T) {
			var want []string
			var analyzers []string
			for _, f := range p.GoFiles {
				src, err := os.ReadFile(f)
				require.NoError(t, err)
				for i, l := range strings.Split(string(src), "\n") {
					if m := bugMark.FindStringSubmatch(l); m != nil {
						want = append(want, fmt.Sprintf("%d %s", i+1, m[1]))
						analyzers = append(analyzers, m[1])
					}
				}
			}
			require.NotEmpty(t, want, "a seeded program marks its bug")
			slices.Sort(want)
			have := slices.Sorted(slices.Values(got[prog]))
			assert.Equal(t, want, have, "findings (line analyzer)")
			row := fmt.Sprintf("| `%s` |", prog)
			assert.Contains(t, string(doc), row, "docs/vet.md lists the program")
			for _, line := range strings.Split(string(doc), "\n") {
				if strings.HasPrefix(line, row) {
					assert.Contains(t, line, "| "+analyzers[0]+" |", "docs/vet.md names the analyzer that catches it")
				}
			}
		})
	}
}
