package cupti

import (
	"runtime"
	"strconv"
	"strings"
)

// module is this module's import path, with the slash that ends it.
const module = "github.com/gocuda/gocuda/"

// plumbing are the module's packages that a call passes through on its way to the
// driver: neither the program's call site nor a library routine.
var plumbing = map[string]bool{"cuda": true, "cudalib": true, "internal": true, "cupti": true, "dl": true, "resource": true}

// program are the module's folders of programs (its commands and tools): their
// calls are a program's, not a library's.
var program = map[string]bool{"cmd": true, "tools": true}

// topOf is the first element of a package path of the module ("cublas" for
// github.com/gocuda/gocuda/cublas/gonumblas).
func topOf(pkg string) string {
	top, _, _ := strings.Cut(strings.TrimPrefix(pkg, module), "/")
	return top
}

// site is where a Go call came from: the program's frame, and the library routine
// it called, if any.
type site struct {
	function, file   string
	line             int
	library, routine string
}

// callSite walks the frames of pcs (innermost first) past the module's plumbing:
// the outermost frame of a library package (cublas.Gemm rather than its helpers)
// names the library and routine, the first frame outside the module (or in a test
// file) is the program's call.
func callSite(pcs []uintptr) site {
	var s site
	frames := runtime.CallersFrames(pcs)
	for {
		f, more := frames.Next()
		pkg, name := splitFunc(f.Function)
		inModule := strings.HasPrefix(pkg, module) && !strings.HasSuffix(f.File, "_test.go") && !program[topOf(pkg)]
		if !inModule {
			if pkg == "runtime" && more {
				continue
			}
			s.function, s.file, s.line = f.Function, f.File, f.Line
			return s
		}
		if !plumbing[topOf(pkg)] {
			s.library, s.routine = strings.TrimPrefix(pkg, module), name
		}
		if !more {
			return s
		}
	}
}

// splitFunc splits a function's full name ("github.com/a/b.(*T).M[...]") into its
// package path and its name in the package, without type arguments.
func splitFunc(full string) (pkg, name string) {
	slash := strings.LastIndexByte(full, '/')
	dot := strings.IndexByte(full[slash+1:], '.')
	if dot < 0 {
		return full, ""
	}
	pkg, name = full[:slash+1+dot], full[slash+2+dot:]
	if i := strings.IndexByte(name, '['); i >= 0 {
		if j := strings.LastIndexByte(name, ']'); j > i {
			name = name[:i] + name[j+1:]
		}
	}
	return pkg, name
}

// goroutineID is the calling goroutine's id, as its stack trace's first line
// ("goroutine 42 [running]:") gives it: the runtime exports no other way.
func goroutineID() uint64 {
	var buf [64]byte
	b, ok := strings.CutPrefix(string(buf[:runtime.Stack(buf[:], false)]), "goroutine ")
	if !ok {
		return 0
	}
	if i := strings.IndexByte(b, ' '); i > 0 {
		id, _ := strconv.ParseUint(b[:i], 10, 64)
		return id
	}
	return 0
}
