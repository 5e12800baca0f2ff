package vet

import (
	"go/ast"
	"go/constant"
	"go/types"
	"regexp"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/passes/inspect"
	"golang.org/x/tools/go/ast/inspector"
)

// ReadOnly reports buffers passed without cuda.In to a kernel parameter that the
// NVRTC source compiled in the same function declares const T*. Launch counts an
// unmarked buffer as written, so that launches on other streams that only read it
// wait for each other: a performance finding, not a wrong result.
var ReadOnly = &analysis.Analyzer{
	Name:     "readonly",
	Doc:      "report buffers passed to a const T* kernel parameter (of NVRTC source compiled in the function) without cuda.In",
	URL:      "https://github.com/gocuda/gocuda/blob/main/docs/vet.md#readonly",
	Requires: []*analysis.Analyzer{inspect.Analyzer},
	Run:      runReadOnly,
}

// kernelParam is one parameter of a kernel's declaration.
type kernelParam struct {
	decl     string // as written
	readOnly bool   // a pointer to const: const T*, T const*
}

var (
	comments  = regexp.MustCompile(`(?s)//[^\n]*|/\*.*?\*/`)
	lastIdent = regexp.MustCompile(`([A-Za-z_]\w*)\s*$`)
	constWord = regexp.MustCompile(`\bconst\b`)
)

// kernels returns the parameters of each __global__ function that src declares.
func kernels(src string) map[string][]kernelParam {
	src = comments.ReplaceAllString(src, " ")
	out := map[string][]kernelParam{}
	for rest := src; ; {
		i := strings.Index(rest, "__global__")
		if i < 0 {
			return out
		}
		rest = rest[i+len("__global__"):]
		// The kernel's name stands before the first parenthesis that is not an
		// attribute's (__launch_bounds__(256)).
		for {
			p := strings.IndexByte(rest, '(')
			if p < 0 {
				return out
			}
			m := lastIdent.FindStringSubmatch(rest[:p])
			end := matching(rest, p)
			if end < 0 {
				return out
			}
			if m == nil || strings.HasPrefix(m[1], "__") {
				rest = rest[end+1:]
				continue
			}
			out[m[1]] = params(rest[p+1 : end])
			rest = rest[end+1:]
			break
		}
	}
}

// matching returns the index of the parenthesis that closes the one at open, or -1.
func matching(s string, open int) int {
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			if depth--; depth == 0 {
				return i
			}
		}
	}
	return -1
}

// params splits a parameter list at its top-level commas.
func params(list string) []kernelParam {
	var out []kernelParam
	depth, start := 0, 0
	add := func(p string) {
		p = strings.TrimSpace(p)
		if p == "" || p == "void" {
			return
		}
		star := strings.LastIndexByte(p, '*')
		out = append(out, kernelParam{decl: p, readOnly: star >= 0 && constWord.MatchString(p[:star])})
	}
	for i, c := range list {
		switch c {
		case '(', '<', '[':
			depth++
		case ')', '>', ']':
			depth--
		case ',':
			if depth == 0 {
				add(list[start:i])
				start = i + 1
			}
		}
	}
	add(list[start:])
	return out
}

// kernelName is the kernel that a name expression names: scale<float> and
// ns::scale<float> name scale.
func kernelName(expr string) string {
	if i := strings.IndexByte(expr, '<'); i >= 0 {
		expr = expr[:i]
	}
	if i := strings.LastIndex(expr, "::"); i >= 0 {
		expr = expr[i+2:]
	}
	return strings.TrimSpace(expr)
}

// launchArgs are the calls that launch a kernel: the index of the *cuda.Function
// (-1: the receiver) and of its first kernel argument.
var launchArgs = []struct {
	recv, name string
	fn, first  int
}{
	{"Function", "Launch", -1, 4}, {"LaunchBatch", "Add", 0, 4}, {"Graph", "AddKernel", 0, 5},
}

func runReadOnly(pass *analysis.Pass) (any, error) {
	info := pass.TypesInfo
	insp := pass.ResultOf[inspect.Analyzer].(*inspector.Inspector)
	for cur := range insp.Root().Preorder((*ast.FuncDecl)(nil)) {
		decl := cur.Node().(*ast.FuncDecl)
		if decl.Body == nil {
			continue
		}
		// The kernels of the sources the function compiles, and its *cuda.Function
		// variables of those kernels.
		ks := map[string][]kernelParam{}
		fns := map[types.Object]string{}
		ast.Inspect(decl.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			f := astCallee(info, call)
			switch {
			case isFunc(f, "nvrtc", "", "Compile") && len(call.Args) > 0:
				if tv, ok := info.Types[call.Args[0]]; ok && tv.Value != nil && tv.Value.Kind() == constant.String {
					for k, ps := range kernels(constant.StringVal(tv.Value)) {
						ks[k] = ps
					}
				}
			}
			return true
		})
		if len(ks) == 0 {
			continue
		}
		ast.Inspect(decl.Body, func(n ast.Node) bool {
			as, ok := n.(*ast.AssignStmt)
			if !ok || len(as.Rhs) != 1 {
				return true
			}
			call, ok := ast.Unparen(as.Rhs[0]).(*ast.CallExpr)
			if !ok {
				return true
			}
			f := astCallee(info, call)
			var nameArg ast.Expr
			switch {
			case isFunc(f, "nvrtc", "Output", "Function") && len(call.Args) == 2:
				nameArg = call.Args[1]
			case isFunc(f, "cuda", "Module", "Function") && len(call.Args) == 1:
				nameArg = call.Args[0]
			default:
				return true
			}
			tv, ok := info.Types[nameArg]
			if !ok || tv.Value == nil || tv.Value.Kind() != constant.String {
				return true
			}
			if id, ok := as.Lhs[0].(*ast.Ident); ok {
				if o := info.ObjectOf(id); o != nil {
					fns[o] = kernelName(constant.StringVal(tv.Value))
				}
			}
			return true
		})
		ast.Inspect(decl.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || call.Ellipsis.IsValid() {
				return true
			}
			f := astCallee(info, call)
			for _, l := range launchArgs {
				if !isFunc(f, "cuda", l.recv, l.name) {
					continue
				}
				var fexpr ast.Expr
				if l.fn < 0 {
					if sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr); ok {
						fexpr = sel.X
					}
				} else if l.fn < len(call.Args) {
					fexpr = call.Args[l.fn]
				}
				id, ok := ast.Unparen(fexpr).(*ast.Ident)
				if !ok {
					continue
				}
				k, ok := fns[info.Uses[id]]
				if !ok {
					continue
				}
				ps := ks[k]
				for i := l.first; i < len(call.Args) && i-l.first < len(ps); i++ {
					p := ps[i-l.first]
					if p.readOnly && isBuffer(info.TypeOf(call.Args[i])) {
						pass.Reportf(call.Args[i].Pos(), "%s is passed to kernel %s's read-only parameter %q without cuda.In: the launch counts it as written, so launches on other streams that only read it wait for each other (performance)", types.ExprString(call.Args[i]), k, p.decl)
					}
				}
			}
			return true
		})
	}
	return nil, nil
}

// isBuffer reports whether t is memory of package cuda that Launch orders (a
// *DeviceBuffer, *HostBuffer, *ManagedBuffer or *WrappedBuffer, or cuda.Memory).
func isBuffer(t types.Type) bool {
	if t == nil {
		return false
	}
	n := namedOf(t)
	if n == nil || n.Obj().Pkg() == nil || n.Obj().Pkg().Path() != module+"/cuda" {
		return false
	}
	name := n.Obj().Name()
	return strings.HasSuffix(name, "Buffer") || name == "Memory"
}
