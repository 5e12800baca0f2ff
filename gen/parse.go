package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"modernc.org/cc/v4"
)

// findCUDA locates the CUDA include directory the way CUDA users expect: the flag,
// then $CUDA_PATH, then $CUDA_HOME, then /usr/local/cuda. The first candidate that
// has include/cuda.h wins; the error names everything tried. A relative path in
// the environment is tried from the working directory and then from the module
// root: go generate runs the generator in each package's directory, while the
// variable was set where `go generate ./...` was typed, usually the module root.
func findCUDA(flag string) (string, error) {
	type cand struct{ from, dir string }
	var cands []cand
	if flag != "" {
		cands = append(cands, cand{"-cuda-path", flag})
	}
	root, rootErr := moduleRoot()
	for _, env := range []string{"CUDA_PATH", "CUDA_HOME"} {
		if v := os.Getenv(env); v != "" {
			cands = append(cands, cand{"$" + env, v})
			if !filepath.IsAbs(v) && rootErr == nil {
				cands = append(cands, cand{"$" + env + " from the module root", filepath.Join(root, v)})
			}
		}
	}
	cands = append(cands, cand{"default", "/usr/local/cuda"})
	var tried []string
	for _, c := range cands {
		inc := filepath.Join(c.dir, "include")
		if _, err := os.Stat(filepath.Join(inc, "cuda.h")); err == nil {
			abs, err := filepath.Abs(inc)
			if err != nil {
				return "", err
			}
			return abs, nil
		}
		tried = append(tried, fmt.Sprintf("%s (%s)", filepath.Join(inc, "cuda.h"), c.from))
	}
	return "", fmt.Errorf("CUDA headers not found: no cuda.h in %s; set -cuda-path or CUDA_PATH to a CUDA toolkit", strings.Join(tried, ", "))
}

// hostConfig is the host C compiler's configuration. cc.NewConfig runs the compiler,
// so it is asked once per process; parseHeaders works on copies.
var hostConfig = sync.OnceValues(func() (*cc.Config, error) { return cc.NewConfig("", "") })

// tailName names the source parseHeaders appends after the headers.
const tailName = "<gocuda-tail>"

// parseHeaders preprocesses and type-checks one translation unit that includes the
// entry headers of every spec, using the host C compiler's configuration.
//
// cc cannot be stopped once it runs, and some malformed input makes it run forever
// (see checkHeaders), so the headers are first preprocessed alone and checked, and
// the translation unit ends in a tail that cc always parses to the end.
func parseHeaders(include string, specs []*Spec) (*cc.AST, error) {
	host, err := hostConfig()
	if err != nil {
		return nil, fmt.Errorf("C configuration: %v", err)
	}
	cfg := *host
	cfg.IncludePaths = append([]string{include}, host.IncludePaths...)
	cfg.SysIncludePaths = append([]string{include}, host.SysIncludePaths...)
	cfg.Header = true
	cfg.EvalAllMacros = true
	// The check bounds expansion in the text and in every macro; cc's evaluation of
	// a macro expands its replacement list, which can be a little more work than
	// expanding its name (a macro that names itself expands once more).
	cfg.ExpansionLimit = 4 * expansionLimit
	var src strings.Builder
	seen := map[string]bool{}
	for _, s := range specs {
		for _, e := range s.Entry {
			if !seen[e] {
				seen[e] = true
				fmt.Fprintf(&src, "#include <%s>\n", e)
			}
		}
	}
	sources := []cc.Source{
		{Name: "<predefined>", Value: cfg.Predefined},
		{Name: "<builtin>", Value: cc.Builtin},
		{Name: "gocuda-bindings.c", Value: src.String()},
	}
	noEval, err := checkHeaders(&cfg, sources)
	if err != nil {
		return nil, fmt.Errorf("parsing headers in %s: %v", include, err)
	}
	sources = append(sources, cc.Source{Name: tailName, Value: tail(noEval)})
	ast, err := translate(&cfg, sources)
	if err != nil {
		return nil, fmt.Errorf("parsing headers in %s: %s", include, shortErrors(err, tailName))
	}
	// Drop the tail's declarations: the rest of gen sees the headers only.
	var prev *cc.TranslationUnit
	for n := ast.TranslationUnit; n != nil; prev, n = n, n.TranslationUnit {
		if ed := n.ExternalDeclaration; ed != nil && ed.Position().Filename == tailName {
			if prev == nil {
				ast.TranslationUnit = nil
			} else {
				prev.TranslationUnit = nil
			}
			break
		}
	}
	return ast, nil
}

// translate runs cc.Translate, turning a panic inside cc (it has a few for input it
// does not expect) into an error.
func translate(cfg *cc.Config, sources []cc.Source) (ast *cc.AST, err error) {
	defer func() {
		if e := recover(); e != nil {
			ast, err = nil, fmt.Errorf("cc failed: %v", e)
		}
	}()
	return cc.Translate(cfg, sources)
}

// sentinel closes the translation unit. cc's parser loops forever when it reaches
// the end of its input inside some constructs (after a '*' whose declarator never
// comes, say), because skipping a token at the end of input does nothing. After the
// headers it meets these declarations instead: valid C at file scope, and holding
// every token those loops stop at, so a parser lost in a broken header finds its way
// back to file scope before the end. Three copies give it room to resynchronize.
const sentinel = "typedef struct __gocuda_tail_s%[1]d { int a : 1, b[1]; } __gocuda_tail_t%[1]d; int __gocuda_tail_f%[1]d(int, __gocuda_tail_t%[1]d *);\n"

// tail is the source after the headers: it undefines the macros that cc must not
// evaluate (see checkHeaders) and the words of the sentinel, then holds the sentinel.
func tail(noEval []string) string {
	var b strings.Builder
	for _, n := range noEval {
		fmt.Fprintf(&b, "#undef %s\n", n)
	}
	b.WriteString("#undef typedef\n#undef struct\n#undef int\n")
	for i := range 3 {
		fmt.Fprintf(&b, sentinel, i)
	}
	return b.String()
}

// Limits on what error messages show.
const (
	maxErrorLines = 5   // errors listed; the rest are counted
	maxErrorLen   = 300 // bytes of one error
)

// ccOrigin is the location in cc's own source that some of its errors end with.
var ccOrigin = regexp.MustCompile(` \([a-z0-9_]+\.go:[0-9]+:[A-Za-z0-9_.]*:\)$`)

// shortErrors renders cc's errors (one a line, possibly thousands for a broken
// header) as at most maxErrorLines lines, each at most maxErrorLen bytes, and the
// number of errors left out. Errors located in the source named skip are left out
// unless there are no others.
func shortErrors(err error, skip string) string {
	var lines, skipped []string
	for _, l := range strings.Split(err.Error(), "\n") {
		l = strings.TrimSpace(ccOrigin.ReplaceAllString(l, ""))
		switch {
		case l == "":
		case skip != "" && strings.HasPrefix(l, skip+":"):
			skipped = append(skipped, l)
		default:
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		lines = skipped
	}
	if len(lines) == 0 {
		return "unknown error"
	}
	n := len(lines)
	if n > maxErrorLines {
		lines = lines[:maxErrorLines]
	}
	for i, l := range lines {
		lines[i] = clip(l, maxErrorLen)
	}
	s := strings.Join(lines, "\n\t")
	if n > len(lines) {
		s += fmt.Sprintf("\n\t(and %d more errors)", n-len(lines))
	}
	return s
}

// clip shortens s to at most n bytes (on a rune boundary), marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
