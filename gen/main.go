// Command gen generates gocuda's raw bindings from the unedited CUDA headers.
//
// It parses one translation unit that includes every library's entry headers with
// modernc.org/cc/v4 (using the host C compiler's configuration), resolves it against
// the specs in headers/, and writes the zz_generated_*.go files of one package:
//
//	go run ../gen -lib cublas          (from the cublas directory, via go:generate)
//	go run ./gen -lib cublas -stats    (print what is bound and excluded)
//
// The CUDA headers are found through -cuda-path, $CUDA_PATH, $CUDA_HOME or
// /usr/local/cuda, in that order.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
	out      string
	stats    bool
	check    bool
	command  string
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
	fs.StringVar(&o.out, "out", ".", "output directory")
	fs.BoolVar(&o.stats, "stats", false, "print what each library binds and excludes, write nothing")
	fs.BoolVar(&o.check, "check", false, "compare the generated files with the ones on disk, write nothing")
	fs.StringVar(&o.command, "command", "", "generating command written in the files' header")
	fs.StringVar(&o.layoutInclude, "layout-include", "", "header directory, relative to -out, for the generated layout test (default: the CUDA toolkit's)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.specs == "" {
		root, err := moduleRoot()
		if err != nil {
			return err
		}
		o.specs = filepath.Join(root, "headers")
	}
	if o.lib == "" && !o.stats {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		o.lib = filepath.Base(wd)
	}
	if o.command == "" {
		o.command = "go run ../gen"
		if o.lib != "" {
			o.command += " -lib " + o.lib
		}
	}
	inc := o.include
	if inc == "" {
		var err error
		if inc, err = findCUDA(o.cudaPath); err != nil {
			return err
		}
	}
	specs, err := loadSpecs(o.specs, module)
	if err != nil {
		return err
	}
	// Libraries whose entry headers are missing (cuDNN is not part of the toolkit)
	// are left out of the translation unit.
	var avail []*Spec
	for _, s := range specs {
		ok := true
		for _, e := range s.Entry {
			if _, err := os.Stat(filepath.Join(inc, e)); err != nil {
				ok = false
			}
		}
		if ok {
			avail = append(avail, s)
		} else if o.stats {
			fmt.Fprintf(stdout, "%-9s headers %v not found in %s: skipped\n", s.Name, s.Entry, inc)
		} else if s.Name == o.lib {
			return fmt.Errorf("%s: entry headers %v not found in %s", s.Name, s.Entry, inc)
		}
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
		total := 0
		for _, l := range m.Libs {
			total += l.Declared
			fmt.Fprintf(stdout, "%-9s %-18s functions %4d  bound %4d  excluded %3d  types %4d  constants %4d\n",
				l.Spec.Name, l.Soname, l.Declared, len(l.Funcs), len(l.Excluded), len(l.Types), len(l.Consts))
			for _, f := range l.Excluded {
				fmt.Fprintf(stdout, "    excluded %s: %s\n", f.CName, l.Reasons[f.CName])
			}
		}
		fmt.Fprintf(stdout, "total     functions %d\n", total)
		return nil
	}
	lib := m.libs[o.lib]
	if lib == nil {
		return fmt.Errorf("no spec for library %q in %s", o.lib, o.specs)
	}
	setStage("emitting " + lib.Spec.Name)
	outs, err := emitLib(m, lib, o.command, o.layoutInclude)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "gen: %s: %d functions in the headers, %d bound, %d excluded\n", lib.Spec.Name, lib.Declared, len(lib.Funcs), len(lib.Excluded))
	var stale []string
	for _, out := range outs {
		path := filepath.Join(o.out, out.name)
		if o.check {
			old, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(old, out.data) {
				stale = append(stale, path)
			}
			continue
		}
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, out.data) {
			continue
		}
		if err := os.WriteFile(path, out.data, 0o644); err != nil {
			return err
		}
	}
	if len(stale) != 0 {
		return fmt.Errorf("generated files differ from the output: %s", strings.Join(stale, ", "))
	}
	return nil
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
