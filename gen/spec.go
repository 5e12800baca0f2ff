package main

import (
	"fmt"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

// Spec is one library's binding spec, read from headers/<name>.toml.
type Spec struct {
	// Name is the Go package name and directory (cuda, cublas, ...).
	Name string `toml:"name"`
	// Title is the library's human name, used in docs and errors.
	Title string `toml:"title"`
	// Order places the library in the header include order (cuda first).
	Order int `toml:"order"`
	// Entry lists the headers a C program includes to use the library.
	Entry []string `toml:"entry"`
	// Files lists the header files whose declarations belong to the library.
	Files []string `toml:"files"`
	// SharedFiles lists headers outside the library whose types this package defines
	// once for every library (cuda only: library_types.h, cuComplex.h).
	SharedFiles []string `toml:"shared_files"`
	// SharedTypes lists the C type names from SharedFiles that the package defines.
	SharedTypes []string `toml:"shared_types"`
	// Prefix is the function prefix dropped from Go names (cu, cublas, ...).
	Prefix string `toml:"prefix"`
	// MacroPrefixes select the #define integer constants that belong to the API.
	MacroPrefixes []string `toml:"macro_prefixes"`
	// Soname is the library file opened with dlopen; {MACRO} is replaced by the
	// value of that macro in the headers, so the major version always matches.
	Soname string `toml:"soname"`
	// Env names the environment variable that overrides Soname.
	Env string `toml:"env"`
	// Status is the C status type every call returns; it becomes an error type.
	Status string `toml:"status"`
	// Success is the status value that means success.
	Success string `toml:"success"`
	// ErrorPrefixes are stripped from status constant names to form Err* sentinels.
	ErrorPrefixes []string `toml:"error_prefixes"`
	// Rename maps C type names to Go names where the default rule is not wanted.
	Rename map[string]string `toml:"rename"`
	// Exclude lists functions that are not bound, each with its reason.
	Exclude []Exclusion `toml:"exclude"`
	// InContext lists functions (or "*" for all) that also get a variant
	// XIn(ctx, ...) which runs X with a given CUDA context current on the calling thread.
	InContext []string `toml:"in_context"`
	// Procs lists functions whose lazily resolved symbol is exported as ProcX, for C
	// code of the idiomatic layer that calls the function itself (a launch shim).
	Procs []string `toml:"procs"`
	// Resources is the resource table: handle types with create/destroy and their
	// blocking class.
	Resources []Resource `toml:"resource"`
	// Doc is the raw package's documentation after the generated first paragraph: how
	// the library's names map to C, its owner types and their release classes.
	Doc string `toml:"doc"`
	// ImportPath overrides the Go import path derived from the module and Name,
	// <module>/<name>/<name>raw (golden test packages live under gen/internal/golden).
	ImportPath string `toml:"import"`

	// Import is the Go import path of the generated package (set by the loader).
	Import string `toml:"-"`
	// Path is the spec file (set by the loader).
	Path string `toml:"-"`
}

// Exclusion is a function left out of the bindings, with the reason.
type Exclusion struct {
	Function string `toml:"function"`
	Reason   string `toml:"reason"`
}

// Resource is one row of the resource table.
type Resource struct {
	// Type is the C handle type (cublasHandle_t, CUstream, CUdeviceptr, ...).
	Type string `toml:"type"`
	// Go names the generated owner type (Owned<Go>, Own<Go>).
	Go string `toml:"go"`
	// Create lists functions that create the handle through an out-parameter of Type.
	Create []string `toml:"create"`
	// Destroy is the function that releases it; it takes the handle as its only argument.
	Destroy string `toml:"destroy"`
	// Blocking is true when Destroy may wait for the GPU (or stall other threads);
	// such releases are held for resource.Reclaim.
	Blocking bool `toml:"blocking"`
	// Why says where the blocking class comes from (a measurement or a reason).
	Why string `toml:"why"`
	// Handwritten names the package's handwritten type for the resource (cuda.Stream
	// for CUstream): no owner type is generated for the row, so that the resource has
	// one obvious type. The row stays: its blocking class is the one the handwritten
	// type releases in, and tools/blockprobe measures it.
	Handwritten string `toml:"handwritten"`
}

// loadSpecs reads every *.toml in dir, sorted by Order then name.
func loadSpecs(dir, module string) ([]*Spec, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.toml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no specs (*.toml) in %s", dir)
	}
	var specs []*Spec
	for _, f := range files {
		var s Spec
		md, err := toml.DecodeFile(f, &s)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", f, err)
		}
		if und := md.Undecoded(); len(und) != 0 {
			return nil, fmt.Errorf("%s: unknown keys %v", f, und)
		}
		s.Path = f
		if err := s.check(); err != nil {
			return nil, fmt.Errorf("%s: %v", f, err)
		}
		s.Import = rawImport(module, s.Name)
		if s.ImportPath != "" {
			s.Import = s.ImportPath
		}
		for _, o := range specs {
			if o.Name == s.Name {
				return nil, fmt.Errorf("%s: library %s is also specified by %s", f, s.Name, o.Path)
			}
		}
		specs = append(specs, &s)
	}
	sort.Slice(specs, func(i, j int) bool {
		if specs[i].Order != specs[j].Order {
			return specs[i].Order < specs[j].Order
		}
		return specs[i].Name < specs[j].Name
	})
	return specs, nil
}

func (s *Spec) check() error {
	switch {
	case s.Name == "":
		return fmt.Errorf("name is empty")
	case len(s.Entry) == 0:
		return fmt.Errorf("entry is empty")
	case len(s.Files) == 0:
		return fmt.Errorf("files is empty")
	case s.Prefix == "":
		return fmt.Errorf("prefix is empty")
	case s.Soname == "":
		return fmt.Errorf("soname is empty")
	case s.Env == "":
		return fmt.Errorf("env is empty")
	case !isGoIdent(s.Name):
		return fmt.Errorf("name %q is not a Go package name", s.Name)
	case s.Status != "" && s.Success == "":
		return fmt.Errorf("status is %s but success is empty", s.Status)
	case s.Success != "" && s.Status == "":
		return fmt.Errorf("success is %s but status is empty", s.Success)
	}
	for _, e := range s.Entry {
		if strings.TrimSpace(e) == "" {
			return fmt.Errorf("entry lists an empty header name")
		}
	}
	for _, c := range sortedKeys(s.Rename) {
		if !isGoIdent(s.Rename[c]) {
			return fmt.Errorf("rename of %s: %q is not a Go identifier", c, s.Rename[c])
		}
	}
	seen := map[string]bool{}
	for _, e := range s.Exclude {
		if strings.TrimSpace(e.Reason) == "" {
			return fmt.Errorf("exclusion of %s has no reason", e.Function)
		}
		if seen[e.Function] {
			return fmt.Errorf("%s excluded twice", e.Function)
		}
		seen[e.Function] = true
	}
	for _, r := range s.Resources {
		if r.Type == "" || r.Go == "" || r.Destroy == "" {
			return fmt.Errorf("resource %q: type, go and destroy are required", r.Type)
		}
		if strings.TrimSpace(r.Why) == "" {
			return fmt.Errorf("resource %s: why is empty (say where the blocking class comes from)", r.Type)
		}
		if !isGoIdent(r.Go) {
			return fmt.Errorf("resource %s: go = %q is not a Go identifier", r.Type, r.Go)
		}
		if h := r.Handwritten; h != "" && !(isGoIdent(h) && token.IsExported(h)) {
			return fmt.Errorf("resource %s: handwritten = %q is not an exported Go identifier", r.Type, r.Handwritten)
		}
	}
	return nil
}

// isGoIdent reports whether s can name a Go declaration or package.
func isGoIdent(s string) bool { return token.IsIdentifier(s) && s != "_" }

// owns reports whether file (a base name) belongs to the library or its shared files.
func (s *Spec) owns(file string) bool {
	for _, f := range s.Files {
		if f == file {
			return true
		}
	}
	return false
}

func (s *Spec) shares(file string) bool {
	for _, f := range s.SharedFiles {
		if f == file {
			return true
		}
	}
	return false
}

func (s *Spec) excluded(fn string) (string, bool) {
	for _, e := range s.Exclude {
		if e.Function == fn {
			return e.Reason, true
		}
	}
	return "", false
}

// pkgName returns the Go package name of the spec: the last element of its import
// path.
func (s *Spec) pkgName() string { return path.Base(s.Import) }

// rawImport is the import path of a library's raw package: <root>/<name>/<name>raw,
// inside the directory of the library's idiomatic package, and named so that a file
// can import both without an alias.
func rawImport(root, name string) string { return root + "/" + name + "/" + name + "raw" }

func readFileString(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}
