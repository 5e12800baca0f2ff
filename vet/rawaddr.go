package vet

import (
	"go/ast"
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/passes/buildssa"
	"golang.org/x/tools/go/analysis/passes/inspect"
	"golang.org/x/tools/go/ast/inspector"
	"golang.org/x/tools/go/ssa"
)

// RawAddr reports raw device addresses (Ptr, DevicePtr) and handles (Handle) that
// outlive the object or the scope that orders them: stored in a field or package
// variable, sent on a channel, used after their owner's Close; addresses passed to
// a raw call or a launch outside the function given to cuda.Enqueue (or another
// ordering helper, whose last parameter is ...cuda.Use), and addresses used in that
// function whose owner is not among the helper's uses.
var RawAddr = &analysis.Analyzer{
	Name:     "rawaddr",
	Doc:      "report raw device addresses and handles that outlive their owner or the ordering of cuda.Enqueue",
	URL:      "https://github.com/gocuda/gocuda/blob/main/docs/vet.md#rawaddr",
	Requires: []*analysis.Analyzer{buildssa.Analyzer, inspect.Analyzer},
	Run:      runRawAddr,
}

// rawSource returns the raw value a call gives (an address of Ptr or DevicePtr, a
// handle of Handle), its owner, and the accessor's name; nil if the call is none.
func rawSource(call *ssa.Call) (raw, owner ssa.Value, name string) {
	f := staticCallee(&call.Call)
	if !isModuleFunc(f) || len(call.Call.Args) == 0 {
		return nil, nil, ""
	}
	switch {
	case (f.Name() == "Ptr" || f.Name() == "Handle") && f.Signature().Recv() != nil:
		return call, call.Call.Args[0], f.Name()
	case isFunc(f, "cuda", "", "DevicePtr"):
		owner = call.Call.Args[0]
		if mi, ok := owner.(*ssa.MakeInterface); ok {
			owner = mi.X
		}
		for _, r := range referrers(call) {
			if ex, ok := r.(*ssa.Extract); ok && ex.Index == 0 {
				return ex, owner, "DevicePtr"
			}
		}
	}
	return nil, nil, ""
}

// derived returns raw and the values computed from it that are the same address or
// handle: conversions, offsets, merges.
func derived(raw ssa.Value) []ssa.Value {
	out := []ssa.Value{raw}
	seen := map[ssa.Value]bool{raw: true}
	for i := 0; i < len(out); i++ {
		refs := out[i].Referrers()
		if refs == nil {
			continue
		}
		for _, r := range *refs {
			v, ok := r.(ssa.Value)
			if !ok || seen[v] {
				continue
			}
			switch r := r.(type) {
			case *ssa.Convert, *ssa.ChangeType, *ssa.MakeInterface, *ssa.Phi:
			case *ssa.BinOp:
				if r.Op != token.ADD && r.Op != token.SUB {
					continue
				}
			default:
				continue
			}
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

func runRawAddr(pass *analysis.Pass) (any, error) {
	ssainput := pass.ResultOf[buildssa.Analyzer].(*buildssa.SSA)
	for _, fn := range ssainput.SrcFuncs {
		for _, b := range fn.Blocks {
			for _, instr := range b.Instrs {
				if call, ok := instr.(*ssa.Call); ok {
					if raw, owner, name := rawSource(call); raw != nil {
						checkRawValue(pass, call, raw, owner, name)
					}
				}
			}
		}
	}
	checkRawCalls(pass)
	return nil, nil
}

// checkRawValue reports where the value of one accessor call outlives its owner:
// stored, sent, or used after the owner's Close.
func checkRawValue(pass *analysis.Pass, src *ssa.Call, raw, owner ssa.Value, name string) {
	testsClosed := testsClose(src.Parent(), pass.TypesInfo)
	what := "address"
	if name == "Handle" {
		what = "handle"
	}
	vals := derived(raw)
	in := func(v ssa.Value) bool { return slicesContains(vals, v) }
	for _, v := range vals {
		for _, r := range referrers(v) {
			switch r := r.(type) {
			case *ssa.Store:
				if !in(r.Val) {
					continue
				}
				switch addr := r.Addr.(type) {
				case *ssa.Global:
					pass.Reportf(r.Pos(), "raw %s from %s stored in package variable %s: it outlives the ordering of its owner (%s); keep the owner and take the %s where it is used", what, name, addr.Name(), typeName(owner.Type()), what)
				case *ssa.FieldAddr:
					if !localRoot(addr.X) {
						pass.Reportf(r.Pos(), "raw %s from %s stored in a field: it outlives the ordering of its owner (%s); store the owner and take the %s where it is used", what, name, typeName(owner.Type()), what)
					}
				}
			case *ssa.Send:
				if in(r.X) {
					pass.Reportf(r.Pos(), "raw %s from %s sent on a channel: the receiver uses it unordered with its owner (%s); send the owner", what, name, typeName(owner.Type()))
				}
			}
		}
	}
	// Uses after the owner's Close, where the accessor ran before it (one after it is
	// a use after Close of the owner itself).
	for _, ov := range aliases(owner) {
		for _, r := range referrers(ov) {
			cl, ok := r.(*ssa.Call)
			if !ok || closeCall(cl) != ov || testsClosed {
				continue
			}
			var reached []ssa.Instruction
			srcAfter := false
			after(cl, defBlock(owner), func(in ssa.Instruction) bool {
				if in == ssa.Instruction(src) {
					srcAfter = true
					return false
				}
				reached = append(reached, in)
				return true
			})
			if srcAfter {
				continue
			}
			for _, in := range reached {
				if handsOn(in, vals) {
					pass.Reportf(in.Pos(), "raw %s from %s used after %s's Close on line %d", what, name, typeName(owner.Type()), line(pass.Fset, cl.Pos()))
				}
			}
		}
	}
}

// handsOn reports whether in hands one of vals to code that may use it as an
// address or handle: a call (not one that only prints or asserts, as a comparison
// of addresses does), a store outside a call's arguments, a send.
func handsOn(in ssa.Instruction, vals []ssa.Value) bool {
	has := func(ops []*ssa.Value) bool {
		for _, op := range ops {
			if op != nil && slicesContains(vals, *op) {
				return true
			}
		}
		return false
	}
	switch in := in.(type) {
	case ssa.CallInstruction:
		f := staticCallee(in.Common())
		return (f == nil || !isNonOwning(f)) && has(in.Operands(nil))
	case *ssa.Send:
		return slicesContains(vals, in.X)
	case *ssa.Store:
		if !slicesContains(vals, in.Val) {
			return false
		}
		// An element of a call's ...any arguments counts as that call's use.
		if ia, ok := in.Addr.(*ssa.IndexAddr); ok {
			if a, ok := ia.X.(*ssa.Alloc); ok {
				for _, r := range referrers(a) {
					if sl, ok := r.(*ssa.Slice); ok {
						for _, c := range referrers(sl) {
							if ci, ok := c.(ssa.CallInstruction); ok {
								if f := staticCallee(ci.Common()); f == nil || !isNonOwning(f) {
									return true
								}
							}
						}
					}
				}
				return false
			}
		}
		return true
	}
	return false
}

func in2(vals []ssa.Value, v ssa.Value) bool { return slicesContains(vals, v) }

// launchers are the module's calls that take raw kernel arguments: an address
// passed to them is not ordered by the hand-off, which sees only buffers.
var launchers = [][3]string{
	{"cuda", "Function", "Launch"}, {"cuda", "LaunchBatch", "Add"},
	{"cuda", "Graph", "AddKernel"}, {"cuda", "Exec", "SetKernelArgs"},
}

func isRawCall(f *types.Func) bool {
	if f == nil {
		return false
	}
	if isRawPackage(f.Pkg()) {
		// A setter (SetWorkspace, SetWorkArea) keeps the address in a library
		// handle and queues no work: the calls that use it later are the ones
		// to order.
		return !strings.HasPrefix(f.Name(), "Set")
	}
	for _, l := range launchers {
		if isFunc(f, l[0], l[1], l[2]) {
			return true
		}
	}
	return false
}

// checkRawCalls reports, on the syntax, addresses passed to raw calls outside an
// ordering helper's function, and addresses used inside one whose owner is not
// among its uses.
func checkRawCalls(pass *analysis.Pass) {
	insp := pass.ResultOf[inspect.Analyzer].(*inspector.Inspector)
	info := pass.TypesInfo
	// Functions of the package given by name to an ordering helper run inside it
	// (cublas's bind, given to the handle pool's Run).
	orderedDecls := map[types.Object]bool{}
	for cur := range insp.Root().Preorder((*ast.CallExpr)(nil)) {
		call := cur.Node().(*ast.CallExpr)
		if isOrderingHelper(astCallee(info, call)) {
			for _, a := range call.Args {
				switch a := ast.Unparen(a).(type) {
				case *ast.Ident:
					if f, ok := info.Uses[a].(*types.Func); ok {
						orderedDecls[f] = true
					}
				case *ast.FuncLit: // and those it calls
					ast.Inspect(a.Body, func(n ast.Node) bool {
						if c, ok := n.(*ast.CallExpr); ok {
							if f := astCallee(info, c); f != nil && f.Pkg() == pass.Pkg {
								orderedDecls[f] = true
							}
						}
						return true
					})
				}
			}
		}
	}
	for cur := range insp.Root().Preorder((*ast.FuncDecl)(nil)) {
		decl := cur.Node().(*ast.FuncDecl)
		if decl.Body == nil || orderedDecls[info.Defs[decl.Name]] {
			continue
		}
		// A test of the stream checker hands unordered addresses to launches on
		// purpose.
		checksStreams := mentions(info, decl, func(o types.Object) bool {
			return isModuleObj(o, "cuda", "StreamRace", "EnableStreamCheck", "SetStreamCheckHandler")
		})
		vars := addrVars(pass.TypesInfo, decl.Body)
		funcVars := funcLitVars(info, decl.Body)
		// Function literals given to an ordering helper, with the owners its uses list
		// (nil: not known, such as uses passed as a slice).
		ordered := map[*ast.FuncLit]map[string]bool{}
		ast.Inspect(decl.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || !isOrderingHelper(astCallee(pass.TypesInfo, call)) {
				return true
			}
			owners := usesOwners(pass.TypesInfo, call)
			for _, a := range call.Args {
				switch a := ast.Unparen(a).(type) {
				case *ast.FuncLit:
					ordered[a] = owners
				case *ast.Ident:
					if lit := funcVars[info.Uses[a]]; lit != nil {
						ordered[lit] = nil // its uses may differ from call to call
					}
				}
			}
			return true
		})
		var stack []ast.Node
		ast.Inspect(decl.Body, func(n ast.Node) bool {
			if n == nil {
				stack = stack[:len(stack)-1]
				return true
			}
			stack = append(stack, n)
			// Addresses in an ordering helper's function must be the uses' memory.
			if lit, ok := n.(*ast.FuncLit); ok {
				if owners, ok := ordered[lit]; ok && owners != nil {
					for _, a := range addrsIn(pass.TypesInfo, vars, lit.Body) {
						if a.owner != "" && !owners[a.owner] {
							pass.Reportf(a.pos, "address of %s used in the function given to %s, but %s is not among its uses (cuda.Reads or cuda.Writes): nothing orders it with %s's other work", a.owner, "the ordering helper", a.owner, a.owner)
						}
					}
				}
			}
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			f := astCallee(pass.TypesInfo, call)
			if !isRawCall(f) || checksStreams || insideOrdered(stack, ordered) {
				return true
			}
			for _, arg := range call.Args {
				for _, a := range addrsIn(pass.TypesInfo, vars, arg) {
					if synchronizedBefore(info, decl.Body, a.owner, call.Pos()) {
						continue
					}
					owner := a.owner
					if owner == "" {
						owner = "its owner"
					}
					pass.Reportf(a.pos, "address of %s passed to %s outside cuda.Enqueue: nothing orders it with %s's work on other streams (queue it through cuda.Enqueue with %s among the uses)", owner, f.Name(), owner, owner)
				}
			}
			return true
		})
	}
}

func insideOrdered(stack []ast.Node, ordered map[*ast.FuncLit]map[string]bool) bool {
	for _, n := range stack {
		if lit, ok := n.(*ast.FuncLit); ok {
			if _, ok := ordered[lit]; ok {
				return true
			}
		}
	}
	return false
}

// addrSource is an address in the syntax: where, and its owner's expression.
type addrSource struct {
	pos   token.Pos
	owner string // "" if not known
}

// addrCall returns the owner's expression if call is an address accessor of the
// module (m.Ptr(), cuda.DevicePtr[T](m)).
func addrCall(info *types.Info, call *ast.CallExpr) (string, bool) {
	f := astCallee(info, call)
	if !isModuleFunc(f) {
		return "", false
	}
	switch {
	case f.Name() == "Ptr" && f.Signature().Recv() != nil && f.Signature().Params().Len() == 0:
		if sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr); ok {
			return types.ExprString(sel.X), true
		}
		return "", true
	case isFunc(f, "cuda", "", "DevicePtr") && len(call.Args) == 1:
		return types.ExprString(call.Args[0]), true
	}
	return "", false
}

// addrVars maps the variables that body assigns an address to (p := b.Ptr()) to
// their owner's expression.
func addrVars(info *types.Info, body *ast.BlockStmt) map[types.Object]string {
	vars := map[types.Object]string{}
	ast.Inspect(body, func(n ast.Node) bool {
		var lhs []ast.Expr
		var rhs []ast.Expr
		switch s := n.(type) {
		case *ast.AssignStmt:
			lhs, rhs = s.Lhs, s.Rhs
		case *ast.ValueSpec:
			for _, id := range s.Names {
				lhs = append(lhs, id)
			}
			rhs = s.Values
		default:
			return true
		}
		if len(rhs) != 1 || len(lhs) == 0 {
			return true
		}
		call, ok := ast.Unparen(rhs[0]).(*ast.CallExpr)
		if !ok {
			return true
		}
		if owner, ok := addrCall(info, call); ok {
			if id, ok := lhs[0].(*ast.Ident); ok {
				if o := info.ObjectOf(id); o != nil {
					vars[o] = owner
				}
			}
		}
		return true
	})
	return vars
}

// addrsIn returns the addresses that n holds: accessor calls and variables of vars.
func addrsIn(info *types.Info, vars map[types.Object]string, n ast.Node) []addrSource {
	var out []addrSource
	ast.Inspect(n, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if owner, ok := addrCall(info, n); ok {
				out = append(out, addrSource{n.Pos(), owner})
				return false
			}
		case *ast.Ident:
			if owner, ok := vars[info.Uses[n]]; ok {
				out = append(out, addrSource{n.Pos(), owner})
			}
		}
		return true
	})
	return out
}

// usesOwners returns the memory that an ordering helper's call lists in its uses
// (cuda.Reads(x), cuda.Writes(x)), as expressions; nil if the list is not known.
func usesOwners(info *types.Info, call *ast.CallExpr) map[string]bool {
	if call.Ellipsis.IsValid() {
		return nil
	}
	f := astCallee(info, call)
	first := f.Signature().Params().Len() - 1
	owners := map[string]bool{}
	for _, a := range call.Args[min(first, len(call.Args)):] {
		c, ok := ast.Unparen(a).(*ast.CallExpr)
		if !ok || len(c.Args) != 1 {
			return nil
		}
		uf := astCallee(info, c)
		if !isFunc(uf, "cuda", "", "Reads") && !isFunc(uf, "cuda", "", "Writes") {
			return nil
		}
		owners[types.ExprString(c.Args[0])] = true
	}
	return owners
}

// funcLitVars maps the variables that body assigns a function literal to (gemm :=
// func(...) {...}) to it.
func funcLitVars(info *types.Info, body *ast.BlockStmt) map[types.Object]*ast.FuncLit {
	vars := map[types.Object]*ast.FuncLit{}
	ast.Inspect(body, func(n ast.Node) bool {
		if as, ok := n.(*ast.AssignStmt); ok && len(as.Lhs) == len(as.Rhs) {
			for i, r := range as.Rhs {
				if lit, ok := ast.Unparen(r).(*ast.FuncLit); ok {
					if id, ok := as.Lhs[i].(*ast.Ident); ok && info.ObjectOf(id) != nil {
						vars[info.ObjectOf(id)] = lit
					}
				}
			}
		}
		return true
	})
	return vars
}

// synchronizedBefore reports whether body waits on the host, before pos, for every
// use of owner (owner.Synchronize) or of a whole context (Context.Synchronize): code
// that the package cannot order may then use the address (see DeviceBuffer.Ptr).
func synchronizedBefore(info *types.Info, body *ast.BlockStmt, owner string, pos token.Pos) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || found || call.Pos() >= pos {
			return !found
		}
		f := astCallee(info, call)
		if !isModuleFunc(f) || (f.Name() != "Synchronize" && f.Name() != "SynchronizeContext") {
			return true
		}
		sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
		found = ok && (recvName(f) == "Context" || (owner != "" && types.ExprString(sel.X) == owner))
		return true
	})
	return found
}

// localRoot reports whether addr (a field's or element's base) is within memory that
// the function made itself: a local variable or composite literal.
func localRoot(v ssa.Value) bool {
	for {
		switch x := v.(type) {
		case *ssa.Alloc:
			return true
		case *ssa.FieldAddr:
			v = x.X
		case *ssa.IndexAddr:
			v = x.X
		case *ssa.Slice:
			v = x.X
		default:
			return false
		}
	}
}
