package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

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

// parseHeaders preprocesses and type-checks one translation unit that includes the
// entry headers of every spec, using the host C compiler's configuration.
func parseHeaders(include string, specs []*Spec) (*cc.AST, error) {
	cfg, err := cc.NewConfig("", "")
	if err != nil {
		return nil, fmt.Errorf("C configuration: %v", err)
	}
	cfg.IncludePaths = append([]string{include}, cfg.IncludePaths...)
	cfg.SysIncludePaths = append([]string{include}, cfg.SysIncludePaths...)
	cfg.Header = true
	cfg.EvalAllMacros = true
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
	ast, err := cc.Translate(cfg, []cc.Source{
		{Name: "<predefined>", Value: cfg.Predefined},
		{Name: "<builtin>", Value: cc.Builtin},
		{Name: "gocuda-bindings.c", Value: src.String()},
	})
	if err != nil {
		return nil, fmt.Errorf("parsing headers in %s: %v", include, err)
	}
	return ast, nil
}
