package vet

import (
	"go/ast"
	"go/token"
	"go/types"

	"golang.org/x/tools/go/ssa"
)

// Path questions on a function's SSA form, shared by the analyzers.

// closeCall returns the object that instr closes with its Close method (a call or a
// deferred call on a closer of the module), or nil.
func closeCall(instr ssa.Instruction) ssa.Value {
	ci, ok := instr.(ssa.CallInstruction)
	if !ok {
		return nil
	}
	c := ci.Common()
	if c.IsInvoke() || len(c.Args) != 1 {
		return nil
	}
	f := staticCallee(c)
	if f == nil || f.Name() != "Close" || f.Signature().Recv() == nil || !isCloser(c.Args[0].Type()) {
		return nil
	}
	return c.Args[0]
}

// aliases returns v and the values that are v under another type (interface
// conversions, changes of named type), each once.
func aliases(v ssa.Value) []ssa.Value {
	out := []ssa.Value{v}
	for i := 0; i < len(out); i++ {
		refs := out[i].Referrers()
		if refs == nil {
			continue
		}
		for _, r := range *refs {
			switch r := r.(type) {
			case *ssa.MakeInterface, *ssa.ChangeType, *ssa.ChangeInterface, *ssa.Convert:
				out = append(out, r.(ssa.Value))
			}
		}
	}
	return out
}

// usesValue reports whether the call passes v (as receiver or argument).
func usesValue(c *ssa.CallCommon, v ssa.Value) bool {
	if c.IsInvoke() && c.Value == v {
		return true
	}
	for _, a := range c.Args {
		if a == v {
			return true
		}
	}
	return false
}

// after calls visit with each instruction that may run after from on some path of
// its function, until visit returns false. A path ends where it would enter stop
// (the block of the value's definition: entering it again makes a new value).
func after(from ssa.Instruction, stop *ssa.BasicBlock, visit func(ssa.Instruction) bool) {
	b := from.Block()
	seen := map[*ssa.BasicBlock]bool{}
	var walk func(b *ssa.BasicBlock, instrs []ssa.Instruction) bool
	walk = func(b *ssa.BasicBlock, instrs []ssa.Instruction) bool {
		for _, in := range instrs {
			if !visit(in) {
				return false
			}
		}
		for _, s := range b.Succs {
			if s == stop || seen[s] {
				continue
			}
			seen[s] = true
			if !walk(s, s.Instrs) {
				return false
			}
		}
		return true
	}
	walk(b, b.Instrs[indexOf(b, from)+1:])
}

func indexOf(b *ssa.BasicBlock, instr ssa.Instruction) int {
	for i, in := range b.Instrs {
		if in == instr {
			return i
		}
	}
	return -1
}

// defBlock is the block that defines v, or nil for parameters and free variables
// (defined on entry).
func defBlock(v ssa.Value) *ssa.BasicBlock {
	if in, ok := v.(ssa.Instruction); ok {
		return in.Block()
	}
	return nil
}

// testsClose reports whether fn (or the function it is nested in) names ErrClosed or
// ErrReleased of the module: a test of what Close does to later calls, whose uses
// after Close are the point.
func testsClose(fn *ssa.Function, info *types.Info) bool {
	syn := outermost(fn).Syntax()
	return syn != nil && mentions(info, syn, func(o types.Object) bool {
		return inModule(o.Pkg()) && (o.Name() == "ErrClosed" || o.Name() == "ErrReleased")
	})
}

// mentions reports whether n names an object for which is returns true.
func mentions(info *types.Info, n ast.Node, is func(types.Object) bool) bool {
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && !found {
			if o := info.Uses[id]; o != nil && is(o) {
				found = true
			}
		}
		return !found
	})
	return found
}

// isModuleObj reports whether o is one of names of the module's package pkg.
func isModuleObj(o types.Object, pkg string, names ...string) bool {
	if o.Pkg() == nil || o.Pkg().Path() != module+"/"+pkg {
		return false
	}
	for _, n := range names {
		if o.Name() == n {
			return true
		}
	}
	return false
}

// line is the line of pos, for messages that point at another statement.
func line(fset *token.FileSet, pos token.Pos) int { return fset.Position(pos).Line }

// referrers returns v's referrers (none for constants, globals and functions).
func referrers(v ssa.Value) []ssa.Instruction {
	if r := v.Referrers(); r != nil {
		return *r
	}
	return nil
}
