package vet

import (
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/passes/buildssa"
	"golang.org/x/tools/go/ssa"
)

// Close reports objects of the module with a Close method (buffers, streams, events,
// modules, contexts, graphs, executables, library handles and plans, communicators)
// that a function makes and leaves, on some path out of it, neither closed, returned,
// stored, nor handed to code outside the module (which may take them over).
var Close = &analysis.Analyzer{
	Name:     "close",
	Doc:      "report gocuda objects that are not closed on every path (nor returned, stored or handed over)",
	URL:      "https://github.com/gocuda/gocuda/blob/main/docs/vet.md#close",
	Requires: []*analysis.Analyzer{buildssa.Analyzer},
	Run:      runClose,
}

// notMade are the module's functions and methods that return a closer they did not
// make, which the caller must not close: a buffer's or stream's Context, a device's
// primary context, a function's Module, a view (Slice), a stream carried in a
// context.Context.
var notMade = map[string]bool{"Context": true, "Module": true, "Slice": true, "StreamFromContext": true}

func runClose(pass *analysis.Pass) (any, error) {
	ssainput := pass.ResultOf[buildssa.Analyzer].(*buildssa.SSA)
	for _, fn := range ssainput.SrcFuncs {
		if testsFinalizers(fn, pass.TypesInfo) {
			continue
		}
		for _, b := range fn.Blocks {
			for _, instr := range b.Instrs {
				call, ok := instr.(*ssa.Call)
				if !ok {
					continue
				}
				obj, errv, made := madeObject(pass.Fset, call)
				if obj == nil {
					continue
				}
				// An object assigned to _ is dropped on purpose (a test of a call
				// that must fail).
				if len(referrers(obj)) == 0 || handedOver(pass.Pkg, obj) {
					continue
				}
				if leaks(call, obj, errv) {
					pass.Reportf(call.Pos(), "%s from %s is not closed on every path: defer its Close, return it, or hand it over", typeName(obj.Type()), made)
				}
			}
		}
	}
	return nil, nil
}

// madeObject returns the closer a call of the module makes, the error returned with
// it (nil if none), and the name of the function that made it.
func madeObject(fset *token.FileSet, call *ssa.Call) (obj, errv ssa.Value, made string) {
	f := staticCallee(&call.Call)
	// Only the module's API makes objects for its callers; an unexported function
	// of the module's own is its plumbing.
	if !isModuleFunc(f) || !f.Exported() || notMade[f.Name()] || f.Name() == "Close" || testHelper(fset, f) {
		return nil, nil, ""
	}
	// Objects of a context that the function closes go with it.
	if ctx := contextOf(call, 0); ctx != nil && closedIn(ctx) {
		return nil, nil, ""
	}
	res := f.Signature().Results()
	if res.Len() == 0 || internal(res.At(0).Type()) || !isCloser(call.Call.Signature().Results().At(0).Type()) {
		return nil, nil, ""
	}
	if res.Len() == 1 {
		return call, nil, f.Name()
	}
	last := res.Len() - 1
	isErr := types.Identical(res.At(last).Type(), errorType)
	for _, r := range referrers(call) {
		if ex, ok := r.(*ssa.Extract); ok {
			switch {
			case ex.Index == 0:
				obj = ex
			case ex.Index == last && isErr:
				errv = ex
			}
		}
	}
	return obj, errv, f.Name()
}

// handedOver reports whether obj (under any of its types) leaves the function's
// hands: returned, stored, sent, captured by a closure, or passed to code outside
// the module (a function of the program's own, a func value, an interface method),
// which may close it. Calls of the module and of packages that only look at values
// (fmt, testify) are uses.
func handedOver(pkg *types.Package, obj ssa.Value) bool {
	seen := map[ssa.Value]bool{}
	var over func(v ssa.Value) bool
	over = func(v ssa.Value) bool {
		if seen[v] {
			return false
		}
		seen[v] = true
		refs := v.Referrers()
		if refs == nil {
			return false
		}
		for _, r := range *refs {
			switch r := r.(type) {
			case *ssa.Phi, *ssa.MakeInterface, *ssa.ChangeType, *ssa.ChangeInterface, *ssa.Convert, *ssa.TypeAssert:
				if over(r.(ssa.Value)) {
					return true
				}
			case *ssa.Return, *ssa.Send, *ssa.MapUpdate, *ssa.MakeClosure, *ssa.Go, *ssa.Slice:
				return true
			case *ssa.Store:
				if r.Val == v && !onlyLooked(r) {
					return true
				}
			case *ssa.Defer:
				if closeCall(r) == nil {
					return true
				}
			case *ssa.Call:
				if closeCall(r) != nil {
					continue
				}
				// The module's functions use objects; the package's own (the program,
				// or the module's package itself) may keep them.
				f := staticCallee(&r.Call)
				if f == nil || f.Pkg() == pkg || (!isModuleFunc(f) && !isNonOwning(f)) {
					return true
				}
				if isNonOwning(f) && f.Name() == "Nil" { // assert.Nil(t, obj): none expected
					return true
				}
			}
		}
		return false
	}
	return over(obj)
}

// leaks reports whether a path from the call that made obj returns from the
// function without passing a Close of obj (called or deferred). Paths on which the
// call failed (its error is not nil, or obj is nil) carry no object; a path that
// panics or comes back to the call leaks nothing here.
func leaks(call *ssa.Call, obj, errv ssa.Value) bool {
	closes := map[ssa.Instruction]bool{}
	for _, v := range aliases(obj) {
		for _, r := range referrers(v) {
			if closeCall(r) == v {
				closes[r] = true
			}
		}
	}
	start := call.Block()
	seen := map[*ssa.BasicBlock]bool{}
	var walk func(b *ssa.BasicBlock, instrs []ssa.Instruction) bool
	visit := func(s *ssa.BasicBlock) bool {
		if s == start || seen[s] {
			return false
		}
		seen[s] = true
		return walk(s, s.Instrs)
	}
	walk = func(b *ssa.BasicBlock, instrs []ssa.Instruction) bool {
		for _, in := range instrs {
			if closes[in] {
				return false
			}
			switch in := in.(type) {
			case *ssa.Return:
				return !errorReturn(in)
			case *ssa.Store:
				// return fmt.Errorf(...) in a function with defers: the result is
				// stored, then returned after the deferred calls.
				if _, ok := in.Addr.(*ssa.Alloc); ok && madeError(in.Val) {
					return false
				}
			case *ssa.Panic:
				return false
			case *ssa.If:
				for _, s := range live(in, obj, errv) {
					if visit(s) {
						return true
					}
				}
				return false
			}
		}
		for _, s := range b.Succs {
			if visit(s) {
				return true
			}
		}
		return false
	}
	return walk(start, start.Instrs[indexOf(start, call)+1:])
}

// live returns the successors of a branch that may carry the object: a test of the
// making call's error against nil, or of the object against nil, leads on one side
// only to paths without it.
func live(in *ssa.If, obj, errv ssa.Value) []*ssa.BasicBlock {
	succs := in.Block().Succs
	if c, ok := in.Cond.(*ssa.Call); ok {
		// if assert.NoError(t, err) {...}: the other side is an error path.
		if f := staticCallee(&c.Call); f != nil && isNonOwning(f) && f.Name() == "NoError" {
			return succs[:1]
		}
	}
	cmp, ok := in.Cond.(*ssa.BinOp)
	if !ok || (cmp.Op != token.EQL && cmp.Op != token.NEQ) {
		return succs
	}
	x, y := cmp.X, cmp.Y
	if isNil(x) {
		x, y = y, x
	}
	if !isNil(y) {
		return succs
	}
	var nilSide int // the successor taken when x is nil
	if cmp.Op == token.NEQ {
		nilSide = 1
	}
	switch {
	case errv != nil && x == errv: // the call failed where errv is not nil
		return succs[nilSide : nilSide+1]
	case types.Identical(x.Type(), errorType):
		// Another call failed: an error path, which may drop the object to the
		// finalizer fallback (every object has one).
		return succs[nilSide : nilSide+1]
	case slicesContains(aliases(obj), x): // no object where it is nil
		return succs[1-nilSide : 2-nilSide]
	}
	return succs
}

func isNil(v ssa.Value) bool {
	c, ok := v.(*ssa.Const)
	return ok && c.IsNil()
}

func slicesContains(vs []ssa.Value, v ssa.Value) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

// testHelper reports whether f is a test bed's (cuda/cudatest and its kin, which
// close what they hand out at the test's end) or a test file's.
func testHelper(fset *token.FileSet, f *types.Func) bool {
	return strings.HasSuffix(f.Pkg().Path(), "test") || strings.HasSuffix(fset.Position(f.Pos()).Filename, "_test.go")
}

// closedIn reports whether the function closes v (a call or a deferred call).
func closedIn(v ssa.Value) bool {
	for _, a := range aliases(v) {
		for _, r := range referrers(a) {
			if closeCall(r) == a {
				return true
			}
		}
	}
	return false
}

// internal reports whether t is of an internal package, which programs cannot use.
func internal(t types.Type) bool {
	n := namedOf(t)
	return n != nil && n.Obj().Pkg() != nil && strings.Contains(n.Obj().Pkg().Path()+"/", "/internal/")
}

// testsFinalizers reports whether fn (or the function it is nested in) runs the
// garbage collector or package resource's reclaim, a test of the finalizer fallback,
// which drops objects on purpose; or names ErrFaulted: a context that faulted is
// lost with its objects.
func testsFinalizers(fn *ssa.Function, info *types.Info) bool {
	syn := outermost(fn).Syntax()
	return syn != nil && mentions(info, syn, func(o types.Object) bool {
		if o.Pkg() == nil {
			return false
		}
		switch o.Pkg().Path() {
		case "runtime":
			return o.Name() == "GC"
		case module + "/resource":
			return o.Name() == "Reclaim" || o.Name() == "Drain"
		case module + "/cuda":
			return o.Name() == "ErrFaulted"
		}
		return false
	})
}

// errorReturn reports whether ret returns an error made there (errors.New,
// fmt.Errorf, a value of an error type): an error path, which may drop objects to
// the finalizer fallback. (An error tested against nil leads to such paths too; see
// live.)
func errorReturn(ret *ssa.Return) bool {
	n := len(ret.Results)
	if n == 0 || !types.Identical(ret.Results[n-1].Type(), errorType) {
		return false
	}
	return madeError(ret.Results[n-1])
}

// madeError reports whether v is an error made where it is: errors.New(...),
// fmt.Errorf(...), a value of an error type.
func madeError(v ssa.Value) bool {
	if !types.Identical(v.Type(), errorType) {
		return false
	}
	switch e := v.(type) {
	case *ssa.MakeInterface:
		return true
	case *ssa.Call:
		f := staticCallee(&e.Call)
		return f != nil && f.Pkg() != nil && ((f.Pkg().Path() == "errors" && f.Name() == "New") || (f.Pkg().Path() == "fmt" && f.Name() == "Errorf"))
	}
	return false
}

// onlyLooked reports whether store puts a value into the ...any arguments of calls
// that only look at it (fmt.Println(b)) or of the module's.
func onlyLooked(store *ssa.Store) bool {
	ia, ok := store.Addr.(*ssa.IndexAddr)
	if !ok {
		return false
	}
	a, ok := ia.X.(*ssa.Alloc)
	if !ok {
		return false
	}
	sliced := false
	for _, r := range referrers(a) {
		switch r := r.(type) {
		case *ssa.IndexAddr:
		case *ssa.Slice:
			sliced = true
			for _, c := range referrers(r) {
				ci, ok := c.(ssa.CallInstruction)
				if !ok {
					return false
				}
				if f := staticCallee(ci.Common()); f == nil || (!isNonOwning(f) && !isModuleFunc(f)) {
					return false
				}
			}
		default:
			return false
		}
	}
	return sliced
}

// contextOf returns the *cuda.Context that call makes its object in, where the
// function has it: the call's first argument or receiver, or the context that the
// object there (a stream) was made in.
func contextOf(call *ssa.Call, depth int) ssa.Value {
	if len(call.Call.Args) == 0 || depth > 4 {
		return nil
	}
	a := call.Call.Args[0]
	if isType(a.Type(), "cuda", "Context") {
		return a
	}
	if !isCloser(a.Type()) {
		return nil
	}
	if ex, ok := a.(*ssa.Extract); ok {
		a = ex.Tuple
	}
	if c, ok := a.(*ssa.Call); ok && isModuleFunc(staticCallee(&c.Call)) {
		return contextOf(c, depth+1)
	}
	return nil
}
