package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dave/jennifer/jen"
	"modernc.org/cc/v4"
)

// procVar names the lazily resolved symbol of a C function.
func procVar(c string) string { return "proc_" + c }

// statusDecl is the library's status type, if its spec names one.
func (g *gen) statusDecl() *TypeDecl {
	if g.lib.Spec.Status == "" {
		return nil
	}
	return g.m.byName[g.lib.Spec.Status]
}

// cProto renders a C prototype for documentation.
func cProto(f *Func) string {
	var ps []string
	for _, p := range f.Params {
		ps = append(ps, cDecl(p.Type, p.CName))
	}
	if len(ps) == 0 {
		ps = []string{"void"}
	}
	return cDecl(f.Type.Result(), f.CName) + "(" + strings.Join(ps, ", ") + ")"
}

func cDecl(t cc.Type, name string) string {
	sep := func(s string) string {
		if name == "" || strings.HasSuffix(s, "*") {
			return s + name
		}
		return s + " " + name
	}
	if td := t.Typedef(); td != nil {
		return sep(td.Name())
	}
	switch x := t.(type) {
	case *cc.PointerType:
		e := x.Elem()
		if e.Kind() == cc.Function {
			return sep("void (*)()")
		}
		inner := cDecl(e, "")
		if !strings.HasSuffix(inner, "*") {
			inner += " "
		}
		return sep(inner + "*")
	case *cc.ArrayType:
		return cDecl(x.Elem(), name) + "[]"
	case *cc.StructType:
		tg := x.Tag()
		return sep("struct " + tg.SrcStr())
	case *cc.UnionType:
		tg := x.Tag()
		return sep("union " + tg.SrcStr())
	case *cc.EnumType:
		tg := x.Tag()
		return sep("enum " + tg.SrcStr())
	}
	return sep(t.String())
}

func isCString(t cc.Type) bool {
	p, ok := t.(*cc.PointerType)
	return ok && p.Typedef() == nil && p.Elem().Kind() == cc.Char && p.Elem().Typedef() == nil
}

func (g *gen) emitFuncs(f *jen.File) error {
	l := g.lib
	s := l.Spec
	var tramp strings.Builder
	status := g.statusDecl()

	type fnOut struct {
		decl jen.Code
	}
	if len(l.InContext) != 0 {
		if err := g.checkInContext(); err != nil {
			return err
		}
	}
	var funcs []jen.Code
	for _, fn := range l.Funcs {
		code, c, err := g.function(fn, status)
		if err != nil {
			return fmt.Errorf("%v: %s: %v", fn.Pos, fn.CName, err)
		}
		funcs = append(funcs, code)
		tramp.WriteString(c)
	}
	var pre strings.Builder
	pre.WriteString("#include <stdint.h>\n#include <stddef.h>\n")
	for _, k := range sortedKeys(g.byValue) {
		d := g.byValue[k]
		rec, err := g.cRecord(d.Type, "gocuda_"+d.GoName)
		if err != nil {
			return fmt.Errorf("C definition of %s: %v", d.CName, err)
		}
		fmt.Fprintf(&pre, "typedef %s;\n_Static_assert(sizeof(gocuda_%s) == %d, \"layout of %s\");\n", rec, d.GoName, d.Type.Size(), d.CName)
	}
	pre.WriteString(tramp.String())
	f.CgoPreamble(pre.String())

	// Constants, so that code and tests name the library as generated from these headers.
	f.Const().Defs(
		jen.Comment(fmt.Sprintf("Soname is the file name the %s library is opened by, unless $SonameEnv names another.", s.Title)),
		jen.Id("Soname").Op("=").Lit(l.Soname),
		jen.Comment("SonameEnv names the environment variable that overrides Soname."),
		jen.Id("SonameEnv").Op("=").Lit(s.Env),
	)
	f.Comment(fmt.Sprintf("library is %s, opened at first use by its soname %s (or $%s).", s.Title, l.Soname, s.Env))
	f.Var().Id("library").Op("=").Qual(dlImport, "NewLibrary").Call(jen.Lit(s.Name), jen.Id("Soname"), jen.Id("SonameEnv"))
	f.Comment(fmt.Sprintf("Library returns the dynamically loaded %s library: its soname is %s, $%s overrides it.", s.Title, l.Soname, s.Env))
	f.Func().Id("Library").Params().Op("*").Qual(dlImport, "Library").Block(jen.Return(jen.Id("library")))

	var procs []jen.Code
	for _, fn := range l.Funcs {
		procs = append(procs, jen.Id(procVar(fn.CName)).Op("=").Id("library").Dot("NewProc").Call(jen.Lit(fn.CName)))
	}
	if len(procs) != 0 {
		f.Var().Defs(procs...)
	}
	if err := g.emitExportedProcs(f); err != nil {
		return err
	}
	if l == g.m.libs["cuda"] {
		for _, c := range []string{"cuCtxGetCurrent", "cuCtxSetCurrent"} {
			if !slices.ContainsFunc(l.Funcs, func(fn *Func) bool { return fn.CName == c }) {
				return fmt.Errorf("%s: %s is not bound, and the in-context functions of every raw package need it (%s)", s.Path, c, ctxSwitchProcs)
			}
		}
		f.Add(docComment("CtxSwitchProcs returns the addresses of cuCtxGetCurrent and cuCtxSetCurrent, resolved\n" +
			"at first use, which the in-context functions (XIn) of every raw package pass to C: the\n" +
			"context is made current in the same cgo call as the function, so a goroutine that\n" +
			"moves between threads never runs it in another context."))
		f.Func().Id(ctxSwitchProcs).Params().Params(jen.Id("get"), jen.Id("set").Uintptr(), jen.Err().Error()).Block(
			jen.If(jen.List(jen.Id("get"), jen.Err()).Op("=").Id(procVar("cuCtxGetCurrent")).Dot("Addr").Call(), jen.Err().Op("!=").Nil()).Block(jen.Return()),
			jen.List(jen.Id("set"), jen.Err()).Op("=").Id(procVar("cuCtxSetCurrent")).Dot("Addr").Call(),
			jen.Return(),
		)
	}
	for _, c := range funcs {
		f.Add(c)
	}
	for _, a := range l.Aliases {
		sig, ok := g.sigs[a.Target.CName]
		if !ok {
			return fmt.Errorf("alias %s: no binding of %s", a.CName, a.Target.CName)
		}
		f.Add(docComment(fmt.Sprintf("%s is %s under the name C code calls it by:\n%s #defines %s as %s.",
			a.GoName, a.Target.GoName, a.File, a.CName, a.Target.CName)))
		f.Func().Id(a.GoName).Params(sig.params...).Add(sig.results).Block(jen.Return(jen.Id(a.Target.GoName).Call(sig.names...)))
	}
	return nil
}

// signature is what a binding's aliases repeat of it.
type signature struct {
	params  []jen.Code // name and type
	names   []jen.Code // name
	results jen.Code
}

// function emits one binding and returns its C trampoline.
func (g *gen) function(fn *Func, status *TypeDecl) (code jen.Code, trampoline string, err error) {
	var params, args []jen.Code
	var cparams, cargs, ctypes []string
	args = append(args, jen.Qual("C", "uintptr_t").Call(jen.Id("fn")))
	for i, p := range fn.Params {
		v, err := g.val(p.Type, "")
		if err != nil {
			return nil, "", fmt.Errorf("parameter %s: %v", p.CName, err)
		}
		params = append(params, jen.Id(p.GoName).Add(v.goType))
		a := fmt.Sprintf("a%d", i)
		cparams = append(cparams, v.ctype+" "+a)
		cargs = append(cargs, a)
		ctypes = append(ctypes, v.ctype)
		switch v.pass {
		case passScalar, passBool:
			args = append(args, jen.Qual("C", v.ctype).Call(jen.Id(p.GoName)))
			if v.ctype == "_Bool" {
				args[len(args)-1] = jen.Qual("C", "_Bool").Call(jen.Id(p.GoName))
			}
		case passPtr:
			if v.ctype == "uint8_t*" {
				args = append(args, jen.Parens(jen.Op("*").Qual("C", "uint8_t")).Call(jen.Qual("unsafe", "Pointer").Call(jen.Id(p.GoName))))
			} else {
				args = append(args, jen.Qual("unsafe", "Pointer").Call(jen.Id(p.GoName)))
			}
		case passHandle:
			args = append(args, jen.Qual("C", "uintptr_t").Call(jen.Id(p.GoName)))
		case passStruct:
			if v.decl == nil {
				return nil, "", fmt.Errorf("parameter %s: anonymous aggregate by value", p.CName)
			}
			g.byValue[v.decl.GoName] = v.decl
			args = append(args, jen.Op("*").Parens(jen.Op("*").Qual("C", v.ctype)).Call(jen.Qual("unsafe", "Pointer").Call(jen.Op("&").Id(p.GoName))))
		default:
			return nil, "", fmt.Errorf("parameter %s: cannot pass %s", p.CName, p.Type)
		}
	}
	rt := fn.Type.Result()
	rv, err := g.val(rt, "")
	if err != nil {
		return nil, "", fmt.Errorf("result: %v", err)
	}
	isStatus := status != nil && rv.decl == status
	cret := rv.ctype
	if isCString(rt) {
		cret = "void*"
	}
	if rv.pass == passStruct {
		if rv.decl == nil {
			return nil, "", fmt.Errorf("anonymous aggregate result")
		}
		g.byValue[rv.decl.GoName] = rv.decl
	}

	// C trampoline: cast the resolved address to the function's type and call it.
	cp := "uintptr_t fn"
	if len(cparams) != 0 {
		cp += ", " + strings.Join(cparams, ", ")
	}
	ct := strings.Join(ctypes, ", ")
	if ct == "" {
		ct = "void"
	}
	call := fmt.Sprintf("((%s (*)(%s))fn)(%s)", cret, ct, strings.Join(cargs, ", "))
	body := "return " + call + ";"
	if rv.pass == passVoid {
		body = call + ";"
	}
	trampoline = fmt.Sprintf("static %s gocuda_%s(%s) { %s }\n", cret, fn.CName, cp, body)

	ccall := jen.Qual("C", "gocuda_"+fn.CName).Call(args...)
	var results jen.Code
	var stmts []jen.Code
	fail := []jen.Code{}
	switch {
	case isStatus || rv.pass == passVoid:
		results = jen.Error()
		fail = append(fail, jen.Err())
	default:
		results = jen.Params(jen.Add(goResultType(rv, rt)), jen.Error())
		fail = append(fail, jen.Id("r"), jen.Err())
	}
	var names []jen.Code
	for _, p := range fn.Params {
		names = append(names, jen.Id(p.GoName))
	}
	g.sigs[fn.CName] = signature{params: params, names: names, results: results}
	stmts = append(stmts, jen.List(jen.Id("fn"), jen.Err()).Op(":=").Id(procVar(fn.CName)).Dot("Addr").Call())
	if len(fail) == 2 {
		stmts = append(stmts, jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(fail...)))
	} else {
		stmts = append(stmts, jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Err())))
	}
	switch {
	case isStatus:
		stmts = append(stmts, jen.Return(jen.Add(g.ref(status)).Call(ccall).Dot("Err").Call()))
	case rv.pass == passVoid:
		stmts = append(stmts, ccall, jen.Return(jen.Nil()))
	case isCString(rt):
		stmts = append(stmts, jen.Return(jen.Qual("C", "GoString").Call(jen.Parens(jen.Op("*").Qual("C", "char")).Call(ccall)), jen.Nil()))
	case rv.pass == passPtr:
		stmts = append(stmts, jen.Return(jen.Parens(rv.goType).Call(ccall), jen.Nil()))
	case rv.pass == passStruct:
		stmts = append(stmts, jen.Id("c").Op(":=").Add(ccall),
			jen.Return(jen.Op("*").Parens(jen.Op("*").Add(rv.goType)).Call(jen.Qual("unsafe", "Pointer").Call(jen.Op("&").Id("c"))), jen.Nil()))
	default:
		stmts = append(stmts, jen.Return(jen.Add(rv.goType).Call(ccall), jen.Nil()))
	}
	if len(fail) == 2 {
		// Named results are not used; declare r for the early return's zero value.
		stmts = append([]jen.Code{jen.Var().Id("r").Add(goResultType(rv, rt))}, stmts...)
	}

	if g.inContext(fn.CName) {
		if !isStatus {
			return nil, "", fmt.Errorf("in_context lists %s, which does not return %s", fn.CName, g.lib.Spec.Status)
		}
		inCode, inTramp, err := g.inContextVariant(fn, status, params, args[1:], cparams, cargs, ctypes, cret)
		if err != nil {
			return nil, "", err
		}
		defer func() { code = jen.Add(code).Line().Line().Add(inCode) }()
		trampoline += inTramp
	}

	doc := fmt.Sprintf("%s calls %s:\n\n\t%s", fn.GoName, fn.CName, cProto(fn))
	switch {
	case isStatus:
		doc += fmt.Sprintf("\n\nIt returns nil on %s, else the %s as an error.", g.lib.Spec.Success, status.GoName)
	case rv.pass != passVoid:
		doc += "\n\nThe error is non-nil only when the library or symbol cannot be loaded."
	}
	code = docComment(doc).Line().Func().Id(fn.GoName).Params(params...).Add(results).Block(stmts...)
	return code, trampoline, nil
}

// ctxSwitchProcs is the function of the cuda raw package that hands cuCtxGetCurrent and
// cuCtxSetCurrent to the in-context functions.
const ctxSwitchProcs = "CtxSwitchProcs"

// emitExportedProcs exports the symbols the spec lists in procs as ProcX, for C code
// of the idiomatic layer that calls the function itself.
func (g *gen) emitExportedProcs(f *jen.File) error {
	byC := map[string]*Func{}
	for _, fn := range g.lib.Funcs {
		byC[fn.CName] = fn
	}
	var defs []jen.Code
	for _, c := range g.lib.Spec.Procs {
		fn := byC[c]
		if fn == nil {
			return fmt.Errorf("%s: procs lists %s, which is not a bound function of %s", g.lib.Spec.Path, c, g.lib.Spec.Name)
		}
		defs = append(defs,
			jen.Comment(fmt.Sprintf("Proc%s is the symbol %s, resolved at first use, for C code that calls it itself.", fn.GoName, c)),
			jen.Id("Proc"+fn.GoName).Op("=").Id(procVar(c)))
	}
	if len(defs) != 0 {
		f.Var().Defs(defs...)
	}
	return nil
}

// inContext reports whether the spec asks for a context-switching variant of c.
func (g *gen) inContext(c string) bool {
	for _, n := range g.lib.InContext {
		if n == "*" || n == c {
			return true
		}
	}
	return false
}

// checkInContext checks what the in_context variants of the library's functions need:
// the cuda raw package's CUcontext, Result and CtxSwitchProcs, so the cuda spec must be
// among the libraries (with its headers), and every function listed must be bound.
func (g *gen) checkInContext() error {
	s := g.lib.Spec
	cuda := g.m.libs["cuda"]
	if cuda == nil {
		return fmt.Errorf("%s: in_context needs the cuda library (CUcontext, Result), but no cuda spec is loaded (none among the specs, or its headers are missing)", s.Path)
	}
	if d := g.m.byName["CUcontext"]; d == nil || d.Lib != cuda {
		return fmt.Errorf("%s: in_context needs the type CUcontext, which the cuda headers do not declare", s.Path)
	}
	bound := map[string]bool{}
	for _, fn := range g.lib.Funcs {
		bound[fn.CName] = true
	}
	for _, n := range g.lib.InContext {
		if n != "*" && !bound[n] {
			return fmt.Errorf("%s: in_context lists %s, which is not a bound function of %s", s.Path, n, s.Name)
		}
	}
	return nil
}

// inContextVariant emits XIn(ctx, ...): X called with the CUDA context ctx current on the
// calling thread. The C side makes ctx current only when cuCtxGetCurrent says it is not,
// in the same cgo call as X, so a goroutine that moves between threads never runs X in
// the wrong context. A failure to switch comes back as a cudaraw.Result (flagged in bit 32).
func (g *gen) inContextVariant(fn *Func, status *TypeDecl, params, args []jen.Code, cparams, cargs, ctypes []string, cret string) (jen.Code, string, error) {
	cuda := g.m.libs["cuda"]
	if cuda == nil {
		return nil, "", fmt.Errorf("in_context: no cuda library")
	}
	ctxT := jen.Qual(cuda.Spec.Import, "CUcontext")
	result := jen.Qual(cuda.Spec.Import, "Result")
	procs := jen.Qual(cuda.Spec.Import, ctxSwitchProcs)
	if g.lib == cuda {
		ctxT, result, procs = jen.Id("CUcontext"), jen.Id("Result"), jen.Id(ctxSwitchProcs)
	}
	cp := "uintptr_t fn, uintptr_t get, uintptr_t set, uintptr_t ctx"
	if len(cparams) != 0 {
		cp += ", " + strings.Join(cparams, ", ")
	}
	ct := strings.Join(ctypes, ", ")
	if ct == "" {
		ct = "void"
	}
	tramp := fmt.Sprintf("static int64_t gocuda_in_%s(%s) { "+
		"uintptr_t cur = 0; int32_t s = ((int32_t (*)(uintptr_t*))get)(&cur); "+
		"if (s == 0 && cur != ctx) s = ((int32_t (*)(uintptr_t))set)(ctx); "+
		"if (s != 0) return ((int64_t)1 << 32) | (uint32_t)s; "+
		"return (uint32_t)((%s (*)(%s))fn)(%s); }\n", fn.CName, cp, cret, ct, strings.Join(cargs, ", "))
	name := fn.GoName + "In"
	cargsGo := append([]jen.Code{jen.Qual("C", "uintptr_t").Call(jen.Id("fn")), jen.Qual("C", "uintptr_t").Call(jen.Id("get")),
		jen.Qual("C", "uintptr_t").Call(jen.Id("set")), jen.Qual("C", "uintptr_t").Call(jen.Id("ctx"))}, args...)
	body := []jen.Code{
		jen.List(jen.Id("fn"), jen.Err()).Op(":=").Id(procVar(fn.CName)).Dot("Addr").Call(),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Err())),
		jen.List(jen.Id("get"), jen.Id("set"), jen.Err()).Op(":=").Add(procs).Call(),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Err())),
		jen.Id("r").Op(":=").Int64().Call(jen.Qual("C", "gocuda_in_"+fn.CName).Call(cargsGo...)),
		jen.If(jen.Id("r").Op(">>").Lit(32).Op("!=").Lit(0)).Block(jen.Return(jen.Add(result).Call(jen.Int32().Call(jen.Id("r"))))),
		jen.Return(jen.Add(g.ref(status)).Call(jen.Id("r")).Dot("Err").Call()),
	}
	doc := fmt.Sprintf("%s calls %s with the CUDA context ctx current on the calling thread.", name, fn.CName)
	code := docComment(doc).Line().Func().Id(name).Params(append([]jen.Code{jen.Id("ctx").Add(ctxT)}, params...)...).Error().Block(body...)
	return code, tramp, nil
}

func goResultType(rv cval, rt cc.Type) jen.Code {
	if isCString(rt) {
		return jen.String()
	}
	return rv.goType
}

// docComment renders text as consecutive // lines (jennifer turns a multi-line
// Comment into a /* */ block, which godoc shows the same but reads worse).
func docComment(text string) *jen.Statement {
	var s *jen.Statement
	for i, l := range strings.Split(text, "\n") {
		switch {
		case l == "":
			l = "//"
		case strings.HasPrefix(l, "\t"):
			l = "//" + l
		default:
			l = "// " + l
		}
		if i == 0 {
			s = jen.Comment(l)
		} else {
			s = s.Line().Comment(l)
		}
	}
	return s
}
