package vet

import (
	"go/types"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/passes/buildssa"
	"golang.org/x/tools/go/ssa"
)

// UseAfterClose reports calls that use an object of the module (as receiver or
// argument) on a path after its Close: they fail with ErrClosed at run time, or
// close twice. Functions that name ErrClosed or ErrReleased test exactly that, and
// are left alone.
var UseAfterClose = &analysis.Analyzer{
	Name:     "useafterclose",
	Doc:      "report uses of a gocuda object on a path after its Close",
	URL:      "https://github.com/gocuda/gocuda/blob/main/docs/vet.md#useafterclose",
	Requires: []*analysis.Analyzer{buildssa.Analyzer},
	Run:      runUseAfterClose,
}

func runUseAfterClose(pass *analysis.Pass) (any, error) {
	ssainput := pass.ResultOf[buildssa.Analyzer].(*buildssa.SSA)
	for _, fn := range ssainput.SrcFuncs {
		if testsClose(fn, pass.TypesInfo) {
			continue
		}
		reported := map[ssa.Instruction]bool{}
		eachClose(fn, func(cl ssa.CallInstruction, obj ssa.Value) {
			vals := carriers(obj)
			after(cl, defBlock(obj), func(in ssa.Instruction) bool {
				ci, ok := in.(*ssa.Call)
				if !ok || reported[in] {
					return true
				}
				if !isOperation(staticCallee(ci.Common())) || failureExpected(ci) {
					return true
				}
				for _, v := range vals {
					if usesValue(ci.Common(), v) {
						reported[in] = true
						pass.Reportf(ci.Pos(), "%s used after its Close on line %d", typeName(obj.Type()), line(pass.Fset, cl.Pos()))
						break
					}
				}
				return true
			})
		})
	}
	return nil, nil
}

// eachClose calls f with each Close call of a closer in fn (not deferred ones, which
// run at the end) and the object it closes.
func eachClose(fn *ssa.Function, f func(ssa.CallInstruction, ssa.Value)) {
	for _, b := range fn.Blocks {
		for _, instr := range b.Instrs {
			if c, ok := instr.(*ssa.Call); ok {
				if obj := closeCall(c); obj != nil {
					f(c, obj)
				}
			}
		}
	}
}

// isOperation reports whether f is an operation of the module, one that returns an
// error: those fail with ErrClosed on a closed object. Accessors (Len, Context) and
// functions that take an object as a key (a pool's Put) may be called after Close.
func isOperation(f *types.Func) bool {
	if !isModuleFunc(f) {
		return false
	}
	res := f.Signature().Results()
	for i := range res.Len() {
		if types.Identical(res.At(i).Type(), types.Universe.Lookup("error").Type()) {
			return true
		}
	}
	return false
}

// failureExpected reports whether the error of call is only looked at, not acted on:
// printed or asserted, as it is or as err != nil. Code that shows or tests that an
// operation on a closed object fails uses it after Close on purpose.
func failureExpected(call *ssa.Call) bool {
	var errv ssa.Value = call
	if _, ok := call.Type().(*types.Tuple); ok {
		errv = nil
		for _, r := range referrers(call) {
			if ex, ok := r.(*ssa.Extract); ok && types.Identical(ex.Type(), errorType) {
				errv = ex
			}
		}
	}
	if errv == nil || !types.Identical(errv.Type(), errorType) {
		return false
	}
	var looked func(v ssa.Value, depth int) bool
	looked = func(v ssa.Value, depth int) bool {
		refs := referrers(v)
		if len(refs) == 0 || depth > 8 {
			return false
		}
		for _, r := range refs {
			switch r := r.(type) {
			case *ssa.BinOp, *ssa.MakeInterface:
				if !looked(r.(ssa.Value), depth+1) {
					return false
				}
			case *ssa.Store: // an element of fmt.Println's ...any
				ia, ok := r.Addr.(*ssa.IndexAddr)
				if !ok {
					return false
				}
				if !looked(ia.X, depth+1) {
					return false
				}
			case *ssa.Slice:
				if !looked(r, depth+1) {
					return false
				}
			case *ssa.IndexAddr:
			case *ssa.Call:
				if f := staticCallee(r.Common()); f == nil || !isNonOwning(f) {
					return false
				}
			case *ssa.DebugRef:
			default:
				return false
			}
		}
		return true
	}
	return looked(errv, 0)
}

// carriers returns the values that carry obj into a call: obj under its other types,
// the markers that wrap it (cuda.In, cuda.Reads, cuda.Writes), and the ...any
// argument slices that hold any of them (Launch's).
func carriers(obj ssa.Value) []ssa.Value {
	out := aliases(obj)
	for i := 0; i < len(out); i++ {
		for _, r := range referrers(out[i]) {
			var v ssa.Value
			switch r := r.(type) {
			case *ssa.Call:
				if f := staticCallee(r.Common()); isFunc(f, "cuda", "", "In") || isFunc(f, "cuda", "", "Reads") || isFunc(f, "cuda", "", "Writes") {
					v = r
				}
			case *ssa.MakeInterface, *ssa.ChangeType, *ssa.ChangeInterface:
				v = r.(ssa.Value)
			case *ssa.Store:
				if ia, ok := r.Addr.(*ssa.IndexAddr); ok && r.Val == out[i] {
					if a, ok := ia.X.(*ssa.Alloc); ok {
						for _, ar := range referrers(a) {
							if sl, ok := ar.(*ssa.Slice); ok && !slicesContains(out, sl) {
								out = append(out, sl)
							}
						}
					}
				}
			}
			if v != nil && !slicesContains(out, v) {
				out = append(out, v)
			}
		}
	}
	return out
}
