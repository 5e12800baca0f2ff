package vet

import (
	"go/ast"
	"go/types"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/passes/inspect"
	"golang.org/x/tools/go/ast/inspector"
)

// Capture reports calls in a function given to Context.Capture (or Graph.CaptureInto,
// ExecCache.Launch) that a graph cannot record: the operations that fail the capture
// with a *cuda.CaptureError at run time (synchronizing or querying the capturing
// stream, copying into Go memory on it, launching an Exec on it), and host waits and
// synchronous copies, which run once, now, outside the graph, so that its replays
// neither wait nor copy.
var Capture = &analysis.Analyzer{
	Name:     "capture",
	Doc:      "report calls in a stream capture that cannot be captured (synchronization, host waits, synchronous copies)",
	URL:      "https://github.com/gocuda/gocuda/blob/main/docs/vet.md#capture",
	Requires: []*analysis.Analyzer{inspect.Analyzer},
	Run:      runCapture,
}

// capturers are the calls whose last argument is a function that queues work on a
// capturing stream.
var capturers = [][3]string{
	{"cuda", "Context", "Capture"}, {"cuda", "Graph", "CaptureInto"}, {"cuda", "ExecCache", "Launch"},
}

func runCapture(pass *analysis.Pass) (any, error) {
	insp := pass.ResultOf[inspect.Analyzer].(*inspector.Inspector)
	decls := map[types.Object]*ast.FuncDecl{}
	for cur := range insp.Root().Preorder((*ast.FuncDecl)(nil)) {
		d := cur.Node().(*ast.FuncDecl)
		if o := pass.TypesInfo.Defs[d.Name]; o != nil {
			decls[o] = d
		}
	}
	for cur := range insp.Root().Preorder((*ast.FuncDecl)(nil)) {
		decl := cur.Node().(*ast.FuncDecl)
		// A test of the refusals makes them on purpose.
		if decl.Body == nil || mentions(pass.TypesInfo, decl, func(o types.Object) bool { return isModuleObj(o, "cuda", "CaptureError") }) {
			continue
		}
		ast.Inspect(decl.Body, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				checkCaptureCall(pass, decls, call)
			}
			return true
		})
	}
	return nil, nil
}

// checkCaptureCall checks the function given to call, if call is a capture.
func checkCaptureCall(pass *analysis.Pass, decls map[types.Object]*ast.FuncDecl, call *ast.CallExpr) {
	{
		f := astCallee(pass.TypesInfo, call)
		isCapture := false
		for _, c := range capturers {
			isCapture = isCapture || isFunc(f, c[0], c[1], c[2])
		}
		if !isCapture || len(call.Args) == 0 {
			return
		}
		var ftype *ast.FuncType
		var body *ast.BlockStmt
		switch fa := ast.Unparen(call.Args[len(call.Args)-1]).(type) {
		case *ast.FuncLit:
			ftype, body = fa.Type, fa.Body
		case *ast.Ident:
			if d := decls[pass.TypesInfo.Uses[fa]]; d != nil && d.Body != nil {
				ftype, body = d.Type, d.Body
			}
		}
		if body == nil {
			return
		}
		var stream types.Object // the capturing stream, the function's parameter
		if ps := ftype.Params.List; len(ps) > 0 && len(ps[0].Names) > 0 {
			stream = pass.TypesInfo.Defs[ps[0].Names[0]]
		}
		checkCaptured(pass, body, stream)
	}
}

// checkCaptured reports the calls in body (a capture's function; s its stream) that
// a capture cannot record. Functions that body starts with go, and nested captures
// (checked on their own), are left out.
func checkCaptured(pass *analysis.Pass, body *ast.BlockStmt, s types.Object) {
	info := pass.TypesInfo
	onS := func(e ast.Expr) bool {
		id, ok := ast.Unparen(e).(*ast.Ident)
		return ok && s != nil && info.Uses[id] == s
	}
	ast.Inspect(body, func(n ast.Node) bool {
		if _, ok := n.(*ast.GoStmt); ok {
			return false
		}
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		f := astCallee(info, call)
		if !isModuleFunc(f) {
			return true
		}
		for _, c := range capturers {
			if isFunc(f, c[0], c[1], c[2]) {
				return false
			}
		}
		recv := ""
		if sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr); ok && f.Signature().Recv() != nil {
			recv = types.ExprString(sel.X) + "."
		}
		name := recv + f.Name()
		if f.Signature().Recv() == nil {
			name = f.Pkg().Name() + "." + f.Name()
		}
		firstArgOnS := len(call.Args) > 0 && onS(call.Args[0])
		refused := func(what string) {
			pass.Reportf(call.Pos(), "%s %s cannot be captured: it fails the capture with a *cuda.CaptureError", name, what)
		}
		hostWait := func() {
			pass.Reportf(call.Pos(), "%s waits on the host during a capture: the graph records no wait and its replays will not wait (order with Event.Record and Stream.WaitEvent on the capture stream)", name)
		}
		syncCopy := func() {
			pass.Reportf(call.Pos(), "%s is synchronous: it runs once now, outside the graph, and waits; queue the Async form on the capture stream", name)
		}
		r := recvName(f)
		switch {
		case r == "Stream" && (f.Name() == "Synchronize" || f.Name() == "SynchronizeContext" || f.Name() == "Query"):
			if sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr); ok && onS(sel.X) {
				refused("(the capturing stream)")
			} else {
				hostWait()
			}
		case (r == "Exec" || r == "ExecCache") && f.Name() == "Launch" && firstArgOnS:
			refused("(a graph launched on the capturing stream)")
		case isFunc(f, "cuda", "", "CopyFromDeviceAsync") && firstArgOnS:
			refused("(a copy into Go memory on the capturing stream; copy through a HostBuffer)")
		case isFunc(f, "cuda", "", "ToSlice"):
			if firstArgOnS {
				refused("(a copy into Go memory on the capturing stream; copy through a HostBuffer)")
			} else {
				hostWait()
			}
		case f.Name() == "Synchronize" || f.Name() == "SynchronizeContext":
			hostWait() // contexts, events, buffers
		case r == "Event" && f.Name() == "Query":
			hostWait()
		case isFunc(f, "cuda", "", "Copy"), isFunc(f, "cuda", "", "CopyToDevice"), isFunc(f, "cuda", "", "CopyFromDevice"),
			r == "DeviceBuffer" && (f.Name() == "Memset8" || f.Name() == "Memset16" || f.Name() == "Memset32"):
			syncCopy()
		}
		return true
	})
}
