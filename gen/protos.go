package main

import (
	"fmt"
	"strings"

	"github.com/dave/jennifer/jen"
	"modernc.org/cc/v4"
)

// The prototype test: every binding was generated from cc's reading of a function's
// declaration. The test compiles, against the same headers, a C program in which the
// prototype the binding was generated from is the only association of a _Generic
// selection on the function: where the compiler's reading differs, the program does
// not compile, and the compiler names both types. The selection's value, the number
// of parameters, and the size of each parameter and of the result are then compared
// with the Go function's, through reflect.

// cPredefined spells the C arithmetic types.
var cPredefined = map[cc.Kind]string{
	cc.Void: "void", cc.Bool: "_Bool", cc.Char: "char", cc.SChar: "signed char", cc.UChar: "unsigned char",
	cc.Short: "short", cc.UShort: "unsigned short", cc.Int: "int", cc.UInt: "unsigned",
	cc.Long: "long", cc.ULong: "unsigned long", cc.LongLong: "long long", cc.ULongLong: "unsigned long long",
	cc.Float: "float", cc.Double: "double", cc.LongDouble: "long double",
}

// cQualifiers spells the qualifiers of t, each followed by a space.
func cQualifiers(t cc.Type) string {
	var q string
	if a := t.Attributes(); a != nil {
		if a.IsConst() {
			q += "const "
		}
		if a.IsVolatile() {
			q += "volatile "
		}
	}
	return q
}

// cc's types lose the qualifiers written in a declarator ("int *const *p" reads as
// int **), which C's type compatibility does not ignore below the top level. They are
// taken from the declaration instead: declQuals lists, for each level of a declarator's
// type from the outside in (a pointer, an array or a function), the qualifiers written
// there, each followed by a space ("" for an array or a function).

// declQuals returns the qualifiers of each level of a declarator's type.
func declQuals(d *cc.Declarator) []string {
	if d == nil {
		return nil
	}
	return append(directQuals(d.DirectDeclarator), pointerQuals(d.Pointer)...)
}

func directQuals(dd *cc.DirectDeclarator) []string {
	switch {
	case dd == nil || dd.Case == cc.DirectDeclaratorIdent:
		return nil
	case dd.Case == cc.DirectDeclaratorDecl:
		return declQuals(dd.Declarator)
	}
	return append(directQuals(dd.DirectDeclarator), "") // an array or a function
}

// abstractQuals is declQuals for a declarator without a name.
func abstractQuals(d *cc.AbstractDeclarator) []string {
	if d == nil {
		return nil
	}
	return append(directAbstractQuals(d.DirectAbstractDeclarator), pointerQuals(d.Pointer)...)
}

func directAbstractQuals(dd *cc.DirectAbstractDeclarator) []string {
	switch {
	case dd == nil:
		return nil
	case dd.AbstractDeclarator != nil && dd.ParameterTypeList == nil && dd.DirectAbstractDeclarator == nil && dd.Token.SrcStr() == "(":
		return abstractQuals(dd.AbstractDeclarator) // ( abstract-declarator )
	}
	return append(directAbstractQuals(dd.DirectAbstractDeclarator), "")
}

// pointerQuals lists the qualifiers of a chain of pointers, the outermost level
// (written last) first.
func pointerQuals(p *cc.Pointer) []string {
	var r []string
	for ; p != nil; p = p.Pointer {
		var q string
		for l := p.TypeQualifiers; l != nil; l = l.TypeQualifiers {
			switch tq := l.TypeQualifier; tq.Case {
			case cc.TypeQualifierConst, cc.TypeQualifierVolatile, cc.TypeQualifierRestrict:
				q += tq.Token.SrcStr() + " "
			}
		}
		r = append([]string{q}, r...)
	}
	return r
}

// cSpelling writes a declaration of inner with type t, as C source: with the typedef
// names and qualifiers the headers wrote, so that the compiler can tell any other
// difference from the header's declaration. inner is "" for an abstract declarator
// (a type name); quals are the qualifiers of t's levels, from declQuals.
func cSpelling(t cc.Type, inner string, quals []string) (string, error) {
	join := func(spec string) string {
		if inner == "" {
			return spec
		}
		return spec + " " + inner
	}
	if td := t.Typedef(); td != nil {
		return join(cQualifiers(t) + td.Name()), nil
	}
	q, rest := "", []string(nil)
	if len(quals) != 0 {
		q, rest = quals[0], quals[1:]
	}
	switch x := t.(type) {
	case *cc.PointerType:
		if q == "" {
			q = cQualifiers(t)
		}
		d := "*" + strings.TrimSuffix(q, " ") + inner
		if k := x.Elem().Kind(); k == cc.Function || k == cc.Array {
			d = "(" + d + ")"
		}
		return cSpelling(x.Elem(), d, rest)
	case *cc.ArrayType:
		if x.IsIncomplete() || x.Len() < 0 {
			return cSpelling(x.Elem(), inner+"[]", rest)
		}
		return cSpelling(x.Elem(), fmt.Sprintf("%s[%d]", inner, x.Len()), rest)
	case *cc.FunctionType:
		ps, err := cParams(x)
		if err != nil {
			return "", err
		}
		return cSpelling(x.Result(), inner+"("+ps+")", rest)
	case *cc.StructType, *cc.UnionType, *cc.EnumType:
		k := typeKey(t)
		if k == "" {
			return "", fmt.Errorf("anonymous %s without a typedef name", t)
		}
		return join(cQualifiers(t) + k), nil
	case *cc.PredefinedType:
		if n, ok := cPredefined[x.Kind()]; ok {
			return join(cQualifiers(t) + n), nil
		}
	}
	return "", fmt.Errorf("C type %s (%v) cannot be spelled", t, t.Kind())
}

// paramSpelling spells a parameter's type as C adjusts it: an array parameter is a
// pointer.
func paramSpelling(p *cc.Parameter) (string, error) {
	t := p.Type()
	if at, ok := t.(*cc.ArrayType); ok {
		t = at.Elem().Pointer()
	}
	quals := abstractQuals(p.AbstractDeclarator)
	if p.Declarator != nil {
		quals = declQuals(p.Declarator)
	}
	return cSpelling(t, "", quals)
}

// cParams spells a function type's parameter list.
func cParams(ft *cc.FunctionType) (string, error) {
	var ps []string
	for _, p := range ft.Parameters() {
		if p.Type().Kind() == cc.Void {
			continue
		}
		s, err := paramSpelling(p)
		if err != nil {
			return "", err
		}
		ps = append(ps, s)
	}
	if ft.IsVariadic() {
		ps = append(ps, "...")
	}
	if len(ps) == 0 {
		return "void", nil
	}
	return strings.Join(ps, ", "), nil
}

// protoRow is one bound function as TestPrototypes checks it: its C name, the type of
// a pointer to it, its parameter types, and its result type where Go returns the C
// value as is (not a status, which is an error, a C string or nothing), else "".
type protoRow struct {
	c, ptr string
	params []string
	result string
	goName string
}

// prototypeRows spells the prototype of every bound function of the library. A
// function with a type C cannot name (an anonymous enum, say) cannot be selected by
// its prototype: it is listed in unchecked, with the reason.
func (g *gen) prototypeRows() (rows []protoRow, unchecked []string) {
	for _, fn := range g.lib.Funcs {
		r, err := g.prototypeRow(fn)
		if err != nil {
			unchecked = append(unchecked, fmt.Sprintf("%s (%v)", fn.CName, err))
			continue
		}
		rows = append(rows, r)
	}
	return rows, unchecked
}

func (g *gen) prototypeRow(fn *Func) (protoRow, error) {
	// The function's own level comes first in its declarator: the rest are its result's.
	var resultQuals []string
	if q := declQuals(fn.Decl); len(q) != 0 {
		resultQuals = q[1:]
	}
	r := protoRow{c: fn.CName, goName: fn.GoName}
	ps, err := cParams(fn.Type)
	if err != nil {
		return r, err
	}
	if r.ptr, err = cSpelling(fn.Type.Result(), "(*)("+ps+")", resultQuals); err != nil {
		return r, err
	}
	for _, p := range fn.Type.Parameters() {
		if p.Type().Kind() == cc.Void {
			continue
		}
		s, err := paramSpelling(p)
		if err != nil {
			return r, err
		}
		r.params = append(r.params, s)
	}
	rt := fn.Type.Result()
	if rv, err := g.val(rt, ""); err == nil && rv.pass != passVoid && !isCString(rt) && (g.statusDecl() == nil || rv.decl != g.statusDecl()) {
		if r.result, err = cSpelling(rt, "", resultQuals); err != nil {
			return r, err
		}
	}
	return r, nil
}

// emitPrototypeTest writes TestPrototypes: see the comment at the top of this file.
func (g *gen) emitPrototypeTest(f *jen.File) error {
	l := g.lib
	protos, unchecked := g.prototypeRows()
	var rows []jen.Code
	for _, r := range protos {
		var params []jen.Code
		for _, p := range r.params {
			params = append(params, jen.Lit(p))
		}
		rows = append(rows, jen.Qual(layoutImport, "Proto").Call(jen.Lit(r.c), jen.Lit(r.ptr), jen.Index().String().Values(params...), jen.Lit(r.result), jen.Id(r.goName)))
	}
	if len(rows) == 0 {
		return nil
	}
	headers := append(append([]string{}, l.Spec.Entry...), l.Spec.SharedFiles...)
	var hs []jen.Code
	for _, h := range headers {
		hs = append(hs, jen.Lit(h))
	}
	table := jen.Index().Qual(layoutImport, "Prototype").Custom(jen.Options{Open: "{", Close: "}", Separator: ",", Multi: true}, rows...)
	items := jen.Qual(layoutImport, "PrototypeItems").Call(table)
	check := jen.Qual(layoutImport, "Check").Call(jen.Id("t"), jen.Index().String().Values(hs...), items)
	if g.layoutInclude != "" {
		check = jen.Qual(layoutImport, "CheckIn").Call(jen.Id("t"), jen.Lit(g.layoutInclude), jen.Index().String().Values(hs...), items)
	}
	doc := fmt.Sprintf("TestPrototypes compiles a C program against the %s headers that selects each bound function\n"+
		"by the prototype its binding was generated from (a _Generic selection with no other\n"+
		"association, so a different declaration does not compile), and checks the Go function's\n"+
		"number of parameters and the size of each, and of the result, against C.", l.Spec.Title)
	if len(unchecked) != 0 {
		doc += "\n\nNot checked, a type of theirs having no name in C:\n"
		for _, u := range unchecked {
			doc += "\n  - " + u
		}
	}
	f.Add(docComment(doc))
	f.Func().Id("TestPrototypes").Params(jen.Id("t").Op("*").Qual("testing", "T")).Block(check)

	return nil
}
