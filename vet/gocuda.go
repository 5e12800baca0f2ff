package vet

import (
	"go/ast"
	"go/types"
	"regexp"
	"strings"

	"golang.org/x/tools/go/ssa"
)

// module is the path of the module whose contracts the analyzers check. Types and
// functions are matched by package path and name through go/types, never by the
// text of the source, so that renamed imports and aliases change nothing.
const module = "github.com/gocuda/gocuda"

// inModule reports whether pkg is a package of the module.
func inModule(pkg *types.Package) bool {
	if pkg == nil {
		return false
	}
	p := pkg.Path()
	return p == module || strings.HasPrefix(p, module+"/")
}

var rawPath = regexp.MustCompile(`^` + regexp.QuoteMeta(module) + `/(\w+)/(\w+)raw$`)

// isRawPackage reports whether pkg is one of the module's raw layers (<lib>/<lib>raw).
func isRawPackage(pkg *types.Package) bool {
	if pkg == nil {
		return false
	}
	m := rawPath.FindStringSubmatch(pkg.Path())
	return m != nil && m[1] == m[2]
}

// namedOf returns the named type of t or of *t, or nil.
func namedOf(t types.Type) *types.Named {
	t = types.Unalias(t)
	if p, ok := t.(*types.Pointer); ok {
		t = types.Unalias(p.Elem())
	}
	n, _ := t.(*types.Named)
	return n
}

// isType reports whether t (or *t) is the type pkg.name of the module (pkg relative
// to the module: "cuda", "nvrtc").
func isType(t types.Type, pkg, name string) bool {
	n := namedOf(t)
	if n == nil || n.Obj().Pkg() == nil {
		return false
	}
	return n.Obj().Pkg().Path() == module+"/"+pkg && n.Obj().Name() == name
}

// isCloser reports whether t is a pointer to a type of the module that has a Close
// method without parameters: the objects whose release is Close.
func isCloser(t types.Type) bool {
	p, ok := types.Unalias(t).(*types.Pointer)
	if !ok {
		return false
	}
	n := namedOf(p)
	if n == nil || !inModule(n.Obj().Pkg()) {
		return false
	}
	// Internal packages' and tests' own types are no API of the module.
	if path := n.Obj().Pkg().Path(); strings.Contains(path+"/", "/internal/") || strings.HasSuffix(path, "_test") {
		return false
	}
	obj, _, _ := types.LookupFieldOrMethod(p, false, n.Obj().Pkg(), "Close")
	f, ok := obj.(*types.Func)
	return ok && f.Signature().Params().Len() == 0
}

// typeName is t's name as a message shows it: cuda.DeviceBuffer.
func typeName(t types.Type) string {
	if n := namedOf(t); n != nil && n.Obj().Pkg() != nil {
		return n.Obj().Pkg().Name() + "." + n.Obj().Name()
	}
	return t.String()
}

// isFunc reports whether f is pkg.name (recv "") or the method recv.name of the
// module's package pkg. Instances of generic functions match their origin.
func isFunc(f *types.Func, pkg, recv, name string) bool {
	if f == nil {
		return false
	}
	f = f.Origin()
	if f.Name() != name || f.Pkg() == nil || f.Pkg().Path() != module+"/"+pkg {
		return false
	}
	return recvName(f) == recv
}

// recvName is the name of f's receiver type, or "" for a function.
func recvName(f *types.Func) string {
	r := f.Signature().Recv()
	if r == nil {
		return ""
	}
	if n := namedOf(r.Type()); n != nil {
		return n.Obj().Name()
	}
	return ""
}

// isModuleFunc reports whether f is declared in a package of the module.
func isModuleFunc(f *types.Func) bool { return f != nil && inModule(f.Pkg()) }

// staticCallee returns the function that an SSA call calls: the origin of a generic
// instance, the interface method of an invoke, nil for a call of a func value.
func staticCallee(c *ssa.CallCommon) *types.Func {
	if c.IsInvoke() {
		return c.Method
	}
	fn := c.StaticCallee()
	if fn == nil {
		return nil
	}
	if o := fn.Origin(); o != nil {
		fn = o
	}
	f, _ := fn.Object().(*types.Func)
	return f
}

// astCallee returns the function or method that call calls, or nil.
func astCallee(info *types.Info, call *ast.CallExpr) *types.Func {
	fun := ast.Unparen(call.Fun)
	switch f := fun.(type) {
	case *ast.IndexExpr: // F[T](...)
		fun = f.X
	case *ast.IndexListExpr:
		fun = f.X
	}
	var id *ast.Ident
	switch f := fun.(type) {
	case *ast.Ident:
		id = f
	case *ast.SelectorExpr:
		if sel, ok := info.Selections[f]; ok {
			fn, _ := sel.Obj().(*types.Func)
			return fn
		}
		id = f.Sel
	default:
		return nil
	}
	fn, _ := info.Uses[id].(*types.Func)
	if fn != nil {
		fn = fn.Origin()
	}
	return fn
}

// isOrderingHelper reports whether f queues raw work the hand-off orders: its last
// parameter is ...cuda.Use (cuda.Enqueue, cudalib's Pool.Run and Take).
func isOrderingHelper(f *types.Func) bool {
	if f == nil {
		return false
	}
	sig := f.Signature()
	if !sig.Variadic() {
		return false
	}
	last := sig.Params().At(sig.Params().Len() - 1).Type().(*types.Slice)
	return isType(last.Elem(), "cuda", "Use")
}

// nonOwning are packages whose functions take an object only to look at it
// (printing, asserting): passing an object to them is a use, not a hand-over.
var nonOwning = []string{"fmt", "errors", "log", "log/slog", "testing", "github.com/stretchr/testify/"}

func isNonOwning(f *types.Func) bool {
	if f == nil || f.Pkg() == nil {
		return false
	}
	p := f.Pkg().Path()
	for _, n := range nonOwning {
		if p == n || (strings.HasSuffix(n, "/") && strings.HasPrefix(p, n)) {
			return true
		}
	}
	return false
}

// outermost returns the top-level function that fn is declared in (fn itself, or the
// function that an anonymous function is nested in).
func outermost(fn *ssa.Function) *ssa.Function {
	for fn.Parent() != nil {
		fn = fn.Parent()
	}
	return fn
}

var errorType = types.Universe.Lookup("error").Type()
