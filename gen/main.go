// Command gen generates gocuda's raw bindings from the unedited CUDA headers.
//
// It parses one translation unit that includes every library's entry headers with
// modernc.org/cc/v4 (using the host C compiler's configuration), resolves it against
// the specs in headers/, and writes the zz_generated_*.go files of one library's raw
// package (<lib>/<lib>raw, beside the library's idiomatic package <lib>):
//
//	go run ../gen -lib cublas          (from the cublas directory, via go:generate: writes cublasraw/)
//	go run ./gen -stats [-v]           (print what is bound and excluded)
//	go run ./gen -all [-out dir]       (every library, each into <dir>/<lib>/<lib>raw)
//
// The CUDA headers are found through -cuda-path, $CUDA_PATH, $CUDA_HOME or
// /usr/local/cuda, in that order.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

const module = "github.com/gocuda/gocuda"

// runTimeout bounds a whole run of the command; generating a library takes a second
// or two.
const runTimeout = 5 * time.Minute

// stage says what run is doing, for the watchdog in main.
var stage atomic.Pointer[string]

func setStage(s string) { stage.Store(&s) }

func main() {
	// The last line of defence: cc cannot be stopped once it parses, and parseHeaders
	// checks the headers against every way known to make it run forever; should a
	// new one get past, the command still ends, saying where it was.
	watchdog := time.AfterFunc(runTimeout, func() {
		what := "generating"
		if s := stage.Load(); s != nil {
			what = *s
		}
		fmt.Fprintf(os.Stderr, "gen: %s did not finish within %v; giving up\n", what, runTimeout)
		os.Exit(1)
	})
	err := run(os.Args[1:], os.Stdout)
	watchdog.Stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

type options struct {
	cudaPath string
	include  string // include directory used as is (tests)
	specs    string
	lib      string
	all      bool
	out      string
	outSet   bool // -out was given
	stats    bool
	verbose  bool
	check    bool
	strict   bool
	skip     bool
	command  string
	// importRoot is the import path the generated packages live under; the packages
	// they use (dl, resource, internal/...) are always the module's own.
	importRoot string
	// layoutInclude is the include directory the generated layout test uses, relative
	// to the output package (golden tests); empty means the CUDA toolkit's.
	layoutInclude string
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.cudaPath, "cuda-path", "", "CUDA toolkit root (its include/ holds cuda.h)")
	fs.StringVar(&o.include, "include", "", "header directory to use as is instead of a CUDA toolkit")
	fs.StringVar(&o.specs, "specs", "", "directory of binding specs (default: headers/ of the module)")
	fs.StringVar(&o.lib, "lib", "", "library to generate (default: the current directory's name)")
	fs.BoolVar(&o.all, "all", false, "generate every library, each into <out>/<name> (default out: the module root)")
	fs.StringVar(&o.out, "out", "", "output directory (default: the raw package's directory under the library's, <lib>raw; with -all, the directory holding the libraries)")
	fs.BoolVar(&o.stats, "stats", false, "print what each library binds and excludes, write nothing")
	fs.BoolVar(&o.verbose, "v", false, "with -stats, list every function: its Go name, or why it is excluded")
	fs.BoolVar(&o.check, "check", false, "compare the generated files with the ones on disk, write nothing")
	fs.BoolVar(&o.strict, "strict", false, "fail where a spec names something the headers lack, instead of noting it")
	fs.BoolVar(&o.skip, "skip-missing", false, "skip libraries whose entry headers are missing, instead of failing")
	fs.StringVar(&o.importRoot, "import-root", module, "import path of the directory holding the generated packages (another module's, for a generated copy)")
	fs.StringVar(&o.command, "command", "", "generating command written in the files' header")
	fs.StringVar(&o.layoutInclude, "layout-include", "", "header directory, relative to -out, for the generated layout test (default: the CUDA toolkit's)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	fs.Visit(func(f *flag.Flag) { o.outSet = o.outSet || f.Name == "out" })
	if o.all && o.lib != "" {
		return fmt.Errorf("-all and -lib exclude each other")
	}
	if o.specs == "" || o.all && !o.outSet {
		root, err := moduleRoot()
		if err != nil {
			return err
		}
		if o.specs == "" {
			o.specs = filepath.Join(root, "headers")
		}
		if o.all && !o.outSet {
			o.out = root
		}
	}
	if o.lib == "" && !o.stats && !o.all {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		o.lib = filepath.Base(wd)
	}
	if o.out == "" {
		o.out = "."
	}
	inc := o.include
	if inc == "" {
		var err error
		if inc, err = findCUDA(o.cudaPath); err != nil {
			return err
		}
	}
	specs, err := loadSpecs(o.specs, o.importRoot)
	if err != nil {
		return err
	}
	if o.lib != "" && !o.stats && !slices.ContainsFunc(specs, func(s *Spec) bool { return s.Name == o.lib }) {
		return fmt.Errorf("no spec for library %q in %s", o.lib, o.specs)
	}
	// Libraries whose entry headers are missing (cuDNN is not part of the toolkit)
	// are left out of the translation unit. Generating the others would leave those
	// packages from other headers than the rest, so that takes -skip-missing.
	var avail []*Spec
	var missing []string
	for _, s := range specs {
		ok := true
		for _, e := range s.Entry {
			if _, err := os.Stat(filepath.Join(inc, e)); err != nil {
				ok = false
			}
		}
		switch {
		case ok:
			avail = append(avail, s)
		case o.stats || o.skip && s.Name != o.lib:
			fmt.Fprintf(stdout, "%-9s headers %v not found in %s: skipped\n", s.Name, s.Entry, inc)
		case s.Name == o.lib:
			return fmt.Errorf("%s: entry headers %v not found in %s", s.Name, s.Entry, inc)
		default:
			missing = append(missing, fmt.Sprintf("%s: entry headers %v not found in %s", s.Name, s.Entry, inc))
		}
	}
	if len(missing) != 0 {
		return fmt.Errorf("%s\n\tnothing written: every library in %s is generated from the same headers (-skip-missing leaves these out)", strings.Join(missing, "\n\t"), o.specs)
	}
	var entries []string
	for _, s := range avail {
		entries = append(entries, s.Entry...)
	}
	setStage(fmt.Sprintf("parsing %s in %s", strings.Join(entries, ", "), inc))
	ast, err := parseHeaders(inc, avail)
	if err != nil {
		return err
	}
	setStage("building the model of " + strings.Join(entries, ", "))
	m, err := buildModel(ast, avail)
	if err != nil {
		return err
	}
	if o.stats {
		for _, l := range m.Libs {
			if l.Err != nil {
				return l.Err
			}
		}
		printStats(stdout, m, o.verbose)
		return nil
	}
	return generate(m, o, stdout)
}

// generate emits every library of the model and, only when all of them succeed, writes
// (or with -check compares) the requested one, or all of them with -all. go generate
// runs the generator once per package, so each run checks every library: a failure in
// one fails them all, and a failed go generate ./... leaves the tree as it was instead
// of some packages from new headers beside others from old ones.
func generate(m *Model, o options, stdout io.Writer) error {
	type pkg struct {
		lib  *Lib
		dir  string
		outs []output
	}
	var pkgs []pkg
	var errs []string
	others := false // a library other than the one asked for failed
	for _, l := range m.Libs {
		err := l.Err
		if err == nil && o.strict && len(l.Notes) != 0 {
			err = notesError(l)
		}
		var outs []output
		if err == nil {
			command := o.command
			if command == "" {
				command = "go run ../gen -lib " + l.Spec.Name
			}
			setStage("emitting " + l.Spec.Name)
			outs, err = emitLib(m, l, command, o.layoutInclude)
		}
		switch {
		case err != nil:
			errs = append(errs, err.Error())
			others = others || l.Spec.Name != o.lib
		case o.all:
			pkgs = append(pkgs, pkg{l, filepath.Join(o.out, l.Spec.Name, rawDir(l.Spec)), outs})
		case l.Spec.Name == o.lib && o.outSet:
			pkgs = append(pkgs, pkg{l, o.out, outs})
		case l.Spec.Name == o.lib:
			pkgs = append(pkgs, pkg{l, filepath.Join(o.out, rawDir(l.Spec)), outs})
		}
	}
	if len(errs) != 0 {
		if others {
			errs = append(errs, "nothing written: every library must generate for any to be written")
		}
		return errors.New(strings.Join(errs, "\n"))
	}
	var files []output // paths in name
	for _, p := range pkgs {
		for _, n := range p.lib.Notes {
			fmt.Fprintf(stdout, "gen: %s: note: %s\n", p.lib.Spec.Name, n)
		}
		l := p.lib
		fmt.Fprintf(stdout, "gen: %s: %d functions in the headers, %d bound, %d excluded\n", l.Spec.Name, l.Declared, len(l.Funcs), len(l.Excluded))
		for _, out := range p.outs {
			files = append(files, output{filepath.Join(p.dir, out.name), out.data})
		}
	}
	if o.check {
		var stale []string
		for _, f := range files {
			if old, err := os.ReadFile(f.name); err != nil || !bytes.Equal(old, f.data) {
				stale = append(stale, f.name)
			}
		}
		if len(stale) != 0 {
			return fmt.Errorf("generated files differ from the output: %s", strings.Join(stale, ", "))
		}
		return nil
	}
	return writeFiles(files)
}

// rawDir is the directory of a library's raw package, relative to the library's own:
// its package name for the module's libraries, or the library's directory itself for
// a spec that sets its import path (the golden packages).
func rawDir(s *Spec) string {
	if s.ImportPath != "" {
		return "."
	}
	return s.pkgName()
}

// writeFiles writes every file that changed, as nearly all at once as a file system
// allows: each goes to a temporary file beside it first, and only when all are
// written are they renamed into place. A failure before that leaves the tree as it was.
func writeFiles(files []output) error {
	type pending struct{ tmp, path string }
	var todo []pending
	cleanup := func() {
		for _, p := range todo {
			os.Remove(p.tmp)
		}
	}
	for _, f := range files {
		if old, err := os.ReadFile(f.name); err == nil && bytes.Equal(old, f.data) {
			continue
		}
		dir := filepath.Dir(f.name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			cleanup()
			return err
		}
		// A leading dot keeps go build away from a temporary file left by a crash.
		tmp, err := os.CreateTemp(dir, "."+filepath.Base(f.name)+".tmp*")
		if err != nil {
			cleanup()
			return err
		}
		todo = append(todo, pending{tmp.Name(), f.name})
		_, err = tmp.Write(f.data)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Chmod(tmp.Name(), 0o644)
		}
		if err != nil {
			cleanup()
			return fmt.Errorf("writing %s: %v", f.name, err)
		}
	}
	for i, p := range todo {
		if err := os.Rename(p.tmp, p.path); err != nil {
			cleanup()
			return fmt.Errorf("writing %s: %v (%d of %d files written)", p.path, err, i, len(todo))
		}
	}
	return nil
}

// printStats writes what each library binds and excludes, and the spec entries its
// headers lack; verbose lists every function.
func printStats(w io.Writer, m *Model, verbose bool) {
	total := 0
	for _, l := range m.Libs {
		total += l.Declared
		fmt.Fprintf(w, "%-9s %-18s functions %4d  bound %4d  excluded %3d  types %4d  constants %4d\n",
			l.Spec.Name, l.Soname, l.Declared, len(l.Funcs), len(l.Excluded), len(l.Types), len(l.Consts))
		if verbose {
			for _, f := range l.Funcs {
				fmt.Fprintf(w, "    bound %s: %s\n", f.CName, f.GoName)
			}
			for _, a := range l.Aliases {
				fmt.Fprintf(w, "    alias %s: %s, calling %s\n", a.CName, a.GoName, a.Target.CName)
			}
		}
		for _, f := range l.Excluded {
			fmt.Fprintf(w, "    excluded %s: %s\n", f.CName, l.Reasons[f.CName])
		}
		for _, n := range l.Notes {
			fmt.Fprintf(w, "    note: %s\n", n)
		}
	}
	fmt.Fprintf(w, "total     functions %d\n", total)
}

// moduleRoot finds the directory holding go.mod, from the working directory up.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("go.mod not found above the working directory; pass -specs")
		}
		dir = parent
	}
}
