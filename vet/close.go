package vet

import (
	"go/token"
	"go/types"

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
		for _, b := range fn.Blocks {
			for _, instr := range b.Instrs {
				call, ok := instr.(*ssa.Call)
				if !ok {
					continue
				}
				obj, errv, made := madeObject(call)
				if obj == nil {
					continue
				}
				if handedOver(obj) {
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
func madeObject(call *ssa.Call) (obj, errv ssa.Value, made string) {
	f := staticCallee(&call.Call)
	if !isModuleFunc(f) || notMade[f.Name()] || f.Name() == "Close" {
		return nil, nil, ""
	}
	res := f.Signature().Results()
	if res.Len() == 0 || !isCloser(call.Call.Signature().Results().At(0).Type()) {
		return nil, nil, ""
	}
	if res.Len() == 1 {
		return call, nil, f.Name()
	}
	last := res.Len() - 1
	isErr := types.Identical(res.At(last).Type(), types.Universe.Lookup("error").Type())
	for _, r := range *call.Referrers() {
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
func handedOver(obj ssa.Value) bool {
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
				if r.Val == v {
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
				f := staticCallee(&r.Call)
				if f == nil || (!isModuleFunc(f) && !isNonOwning(f)) {
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
		for _, r := range *v.Referrers() {
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
				return true
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
