package layers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/gocuda/gocuda"

// floors are the module's floors, top-down: a package imports packages of its own
// floor or of floors below it, never of a floor above. Every package of the module
// stands on one of them: a new package fails the test until it is placed here. A
// path ending in "/..." names a directory and everything under it; rawPackage
// names the raw layers.
//
// Folder by folder, internal/ is the lowest: none of its packages imports resource or
// anything above (rescore is resource's one hook package; errs holds the errors that
// resource exports). resource/owner, the raw layers' owner types, stands above
// resource, whose registrations it uses.
var floors = []struct {
	name string
	pkgs []string
}{
	// cmd/gocudavet and vet, its analyzers, import none of the module's packages:
	// they read programs that do, through go/types.
	{"tools and test beds", []string{"tools/...", "gen/...", "cuda/cudatest/...", "resource/resourcetest", "cmd/...", "vet/...", "nvml/nvmltest", "nvtx/nvtxtest"}},
	// worker runs the program's GPU work in processes of its own, over cuda; like
	// every production package it imports no library's idiomatic package.
	{"services", []string{"worker"}},
	{"adapters", []string{"cublas/gonumblas", "kernel", "nccl/etcdrendezvous", "cupti/cuptiotel"}},
	{"libraries", []string{"cublas", "cudnn", "cufft", "curand", "cusolver", "cusparse", "nccl", "nvrtc", "nvjitlink", "nvml", "cupti", "nvtx", "cublaslt"}},
	{"cudalib", []string{"cudalib"}},
	{"cuda", []string{"cuda"}},
	{"raw", []string{rawPackage}},
	{"owner", []string{"resource/owner"}},
	{"resource", []string{"resource"}},
	{"ground", []string{"dl", "dl/internal/dltest", "internal/errs", "internal/rescore", "internal/calltrace", "internal/streamslot", "internal/idlecache", "internal/cgen", "internal/layouttest", "internal/layers"}},
}

// rawPackage stands for the raw layers, <lib>/<lib>raw.
const rawPackage = "<lib>/<lib>raw"

var rawPath = regexp.MustCompile(`^(\w+)/(\w+)raw$`)

func isRaw(p string) bool {
	m := rawPath.FindStringSubmatch(p)
	return m != nil && m[1] == m[2]
}

// testBeds are the packages only tests and tools may import.
var testBeds = []string{"tools/...", "cmd/...", "vet/...", "gen/...", "cuda/cudatest/...", "resource/resourcetest", "dl/internal/dltest", "internal/layouttest", "nvml/nvmltest", "nvtx/nvtxtest"}

// rawImports is all that a raw layer may import besides its own floor's cuda/cudaraw
// (the driver's types, which every library's raw layer shares).
var rawImports = []string{"dl", "resource", "internal/errs", "resource/owner", "internal/cgen", "cuda/cudaraw"}

// rawShares are the raw layers that take another library's types, as its C header
// does: cusolverDn.h includes cublas_api.h, and cuSOLVER's functions take
// cublasFillMode_t and its kin, defined once in cublasraw.
var rawShares = map[string][]string{
	"cusolver/cusolverraw": {"cublas/cublasraw"},
	// cublasLt.h includes cublas_api.h: cuBLASLt returns cublasStatus_t and takes
	// cublasComputeType_t.
	"cublaslt/cublasltraw": {"cublas/cublasraw"},
}

// adapters are the documented adapters: the only packages that import a
// library's idiomatic package, apart from tools and tests.
var adapters = map[string]string{
	"cublas/gonumblas":    "gonum's blas64 and blas32 interfaces implemented with cuBLAS",
	"kernel":              "elementwise and reduction kernels from CUDA C expressions, compiled with NVRTC",
	"nccl/etcdrendezvous": "nccl's Rendezvous on etcd, apart so that only its users import etcd's client",
	"cupti/cuptiotel":     "a cupti Timeline's records as OpenTelemetry spans, apart so that only its users import OpenTelemetry",
}

// pkg is what the check reads of a package: its path in the module, its own
// imports and all it depends on (both as paths in the module; other packages are
// left out).
type pkg struct {
	Path    string
	Imports []string
	Deps    []string
}

func matches(p, pattern string) bool {
	if pattern == rawPackage {
		return isRaw(p)
	}
	if dir, ok := strings.CutSuffix(pattern, "/..."); ok {
		return p == dir || strings.HasPrefix(p, dir+"/")
	}
	return p == pattern
}

func matchesAny(p string, patterns []string) bool {
	return slices.ContainsFunc(patterns, func(pat string) bool { return matches(p, pat) })
}

// floorOf returns the index of p's floor in floors (0: the top), or -1.
func floorOf(p string) int {
	for i, f := range floors {
		if matchesAny(p, f.pkgs) {
			return i
		}
	}
	return -1
}

// check returns every forbidden import among pkgs, one message each.
func check(pkgs []pkg) []string {
	var bad []string
	report := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	libraries := floors[floorIndex("libraries")].pkgs
	for _, p := range pkgs {
		fp := floorOf(p.Path)
		if fp < 0 {
			report("%s stands on no floor: place it in the floors table of internal/layers", p.Path)
			continue
		}
		production := !matchesAny(p.Path, testBeds)
		for _, q := range p.Imports {
			fq := floorOf(q)
			if fq < 0 {
				continue // reported as a package of its own
			}
			if fq < fp {
				report("%s (floor %q) imports %s (floor %q, above it)", p.Path, floors[fp].name, q, floors[fq].name)
			}
			if production && matchesAny(q, testBeds) {
				report("%s, a production package, imports %s, a test bed or tool (only tests and tools may)", p.Path, q)
			}
			if slices.Contains(libraries, q) && production && adapters[p.Path] == "" {
				report("%s imports %s, another library's idiomatic package: only a documented adapter may (internal/layers' adapters)", p.Path, q)
			}
			if isRaw(p.Path) && !slices.Contains(rawImports, q) && !slices.Contains(rawShares[p.Path], q) {
				report("%s, a raw layer, imports %s: a raw layer imports only %s", p.Path, q, strings.Join(rawImports, ", "))
			}
		}
		if p.Path == "resource" {
			for _, q := range p.Deps {
				if floorOf(q) != floorIndex("ground") {
					report("resource depends on %s: it must import nothing of CUDA (only the ground floor)", q)
				}
			}
		}
	}
	return bad
}

func floorIndex(name string) int {
	for i, f := range floors {
		if f.name == name {
			return i
		}
	}
	panic("no floor " + name)
}

// list returns the module's packages, read with go list (imports of the packages
// themselves, not of their tests: tests may import test beds).
func list(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,Deps,Error", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []pkg
	inModule := func(paths []string) []string {
		var in []string
		for _, p := range paths {
			if rel, ok := strings.CutPrefix(p, module+"/"); ok {
				in = append(in, rel)
			}
		}
		return in
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath    string
			Imports, Deps []string
			Error         *struct{ Err string }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list's output: %v", err)
		}
		if p.Error != nil {
			t.Errorf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		rel, ok := strings.CutPrefix(p.ImportPath, module+"/")
		if !ok {
			t.Fatalf("go list: %s is not in the module", p.ImportPath)
		}
		pkgs = append(pkgs, pkg{Path: rel, Imports: inModule(p.Imports), Deps: inModule(p.Deps)})
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	return pkgs
}

// TestLayers fails on every import that runs up a floor or breaks a rule of the
// layers.
func TestLayers(t *testing.T) {
	for _, msg := range check(list(t)) {
		t.Error(msg)
	}
}

// TestCheck makes sure that each rule catches what it forbids, on a module made up
// for it.
func TestCheck(t *testing.T) {
	base := []pkg{
		{Path: "dl"},
		{Path: "internal/rescore"},
		{Path: "resource", Imports: []string{"internal/rescore"}, Deps: []string{"internal/rescore"}},
		{Path: "resource/owner", Imports: []string{"resource"}},
		{Path: "cuda/cudaraw", Imports: []string{"dl", "resource/owner"}},
		{Path: "cublas/cublasraw", Imports: []string{"cuda/cudaraw", "dl"}},
		{Path: "cusolver/cusolverraw", Imports: []string{"cublas/cublasraw", "cuda/cudaraw"}},
		{Path: "cuda", Imports: []string{"cuda/cudaraw", "resource"}},
		{Path: "cuda/cudatest", Imports: []string{"cuda"}},
		{Path: "cudalib", Imports: []string{"cuda"}},
		{Path: "cublas", Imports: []string{"cudalib", "cublas/cublasraw"}},
		{Path: "cusolver", Imports: []string{"cudalib", "cublas/cublasraw"}},
		{Path: "cublas/gonumblas", Imports: []string{"cublas"}},
		{Path: "tools/bench", Imports: []string{"cublas", "cuda/cudatest"}},
	}
	if bad := check(base); len(bad) > 0 {
		t.Fatalf("the made-up module breaks no rule, yet:\n%s", strings.Join(bad, "\n"))
	}
	for _, c := range []struct {
		name string
		pkg  pkg // added to base, or replacing the package of its path
		want string
	}{
		{"up a floor", pkg{Path: "resource/owner", Imports: []string{"resource", "cuda"}}, `resource/owner (floor "owner") imports cuda (floor "cuda", above it)`},
		{"resource depends on CUDA", pkg{Path: "resource", Imports: []string{"internal/rescore"}, Deps: []string{"internal/rescore", "cuda/cudaraw"}}, "resource depends on cuda/cudaraw"},
		{"resource imports cuda", pkg{Path: "resource", Imports: []string{"cuda"}, Deps: []string{"cuda"}}, `resource (floor "resource") imports cuda`},
		{"a raw layer imports streamslot", pkg{Path: "cublas/cublasraw", Imports: []string{"cuda/cudaraw", "internal/streamslot"}}, "cublas/cublasraw, a raw layer, imports internal/streamslot"},
		{"a raw layer imports another one", pkg{Path: "cublas/cublasraw", Imports: []string{"cuda/cudaraw", "cusparse/cusparseraw"}}, "cublas/cublasraw, a raw layer, imports cusparse/cusparseraw"},
		{"a library imports another", pkg{Path: "cusolver", Imports: []string{"cudalib", "cublas"}}, "cusolver imports cublas, another library's idiomatic package"},
		{"production imports a test bed", pkg{Path: "cublas", Imports: []string{"cudalib", "cuda/cudatest"}}, "cublas, a production package, imports cuda/cudatest"},
		{"production imports a tool", pkg{Path: "cudalib", Imports: []string{"cuda", "tools/bench/callbench"}}, "cudalib, a production package, imports tools/bench/callbench"},
		{"internal imports cudalib", pkg{Path: "internal/idlecache", Imports: []string{"cudalib"}}, `internal/idlecache (floor "ground") imports cudalib`},
		{"a package on no floor", pkg{Path: "internal/drawer"}, "internal/drawer stands on no floor"},
	} {
		t.Run(c.name, func(t *testing.T) {
			pkgs := slices.DeleteFunc(slices.Clone(base), func(p pkg) bool { return p.Path == c.pkg.Path })
			bad := check(append(pkgs, c.pkg))
			if !slices.ContainsFunc(bad, func(msg string) bool { return strings.Contains(msg, c.want) }) {
				t.Errorf("want a message with %q, got:\n%s", c.want, strings.Join(bad, "\n"))
			}
		})
	}
}
