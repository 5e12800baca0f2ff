package vet

import (
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
			vals := aliases(obj)
			after(cl, defBlock(obj), func(in ssa.Instruction) bool {
				ci, ok := in.(*ssa.Call)
				if !ok || reported[in] {
					return true
				}
				if f := staticCallee(ci.Common()); f != nil && isNonOwning(f) {
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
