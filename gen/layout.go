package main

import (
	"fmt"
	"strings"

	"github.com/dave/jennifer/jen"
	"modernc.org/cc/v4"
)

// cTypeExpr is how C code names a declaration's type.
func cTypeExpr(d *TypeDecl) string {
	for _, kw := range []string{"struct ", "union ", "enum "} {
		if strings.HasPrefix(d.Key, kw) && d.Key == kw+d.CName {
			return d.Key
		}
	}
	return d.CName
}

// emitLayoutTest writes a test that compiles a C program against the real headers
// and compares sizeof, _Alignof, offsetof and constant values with the Go side.
func (g *gen) emitLayoutTest(f *jen.File) error {
	l := g.lib
	var items []jen.Code
	item := func(expr string, signed bool, v jen.Code) {
		if signed {
			items = append(items, jen.Values(jen.Dict{jen.Id("Expr"): jen.Lit(expr), jen.Id("Signed"): jen.True(), jen.Id("I"): jen.Int64().Call(v)}))
		} else {
			items = append(items, jen.Values(jen.Dict{jen.Id("Expr"): jen.Lit(expr), jen.Id("U"): jen.Uint64().Call(v)}))
		}
	}
	for _, d := range l.Types {
		ce := cTypeExpr(d)
		switch d.Kind {
		case kindStruct, kindUnion:
			if d.Type.IsIncomplete() {
				continue
			}
			zero := jen.Id(d.GoName).Values()
			item("sizeof("+ce+")", false, jen.Qual("unsafe", "Sizeof").Call(zero))
			if d.Type.Align() > 8 {
				// Go cannot align beyond 8: check the C alignment the docs state.
				item("_Alignof("+ce+")", false, jen.Lit(d.Type.Align()))
			} else {
				item("_Alignof("+ce+")", false, jen.Qual("unsafe", "Alignof").Call(jen.Id(d.GoName).Values()))
			}
			if d.Kind == kindStruct {
				n, field := recordFields(d.Type)
				for i := 0; i < n; i++ {
					fl := field(i)
					if fl.IsBitfield() || fl.IsFlexibleArrayMember() || fl.Name() == "" {
						continue
					}
					item(fmt.Sprintf("offsetof(%s, %s)", ce, fl.Name()), false,
						jen.Qual("unsafe", "Offsetof").Call(jen.Id(d.GoName).Values().Dot(fieldName(fl, i))))
					item(fmt.Sprintf("sizeof(((%s*)0)->%s)", ce, fl.Name()), false,
						jen.Qual("unsafe", "Sizeof").Call(jen.Id(d.GoName).Values().Dot(fieldName(fl, i))))
				}
			}
		case kindScalar, kindHandle, kindEnum:
			var zero jen.Code = jen.Id(d.GoName).Call(jen.Lit(0))
			item("sizeof("+ce+")", false, jen.Qual("unsafe", "Sizeof").Call(zero))
		}
		if d.Kind == kindEnum {
			gt, _, _ := primitive(d.Type)
			for _, en := range enumerators(d.Type) {
				c := en.Token.SrcStr()
				item(c, strings.HasPrefix(gt, "int"), jen.Id(exportName(c)))
			}
		}
	}
	taken := map[string]bool{}
	for _, d := range l.Types {
		for _, en := range enumerators(d.Type) {
			taken[en.Token.SrcStr()] = true
		}
	}
	for _, c := range l.Consts {
		if taken[c.Name] {
			continue
		}
		if _, ok := c.Value.(cc.Float64Value); ok {
			// The bits of the C double against the bits of the Go constant as a float64.
			item(fmt.Sprintf("((union { double d; uint64_t u; }){ .d = (%s) }).u", c.Name), false,
				jen.Qual("math", "Float64bits").Call(jen.Id(exportName(c.Name))))
			continue
		}
		_, signed := c.Value.(cc.Int64Value)
		expr := c.Name
		if c.Ptr {
			expr = "(uintptr_t)" + c.Name
			signed = false
		}
		item(expr, signed, jen.Id(exportName(c.Name)))
	}
	headers := append(append([]string{}, l.Spec.Entry...), l.Spec.SharedFiles...)
	var hs []jen.Code
	for _, h := range headers {
		hs = append(hs, jen.Lit(h))
	}
	f.Comment(fmt.Sprintf("TestLayout compiles a C program against the %s headers and checks every", l.Spec.Title))
	f.Comment("struct's size, alignment and field offsets and every constant's value against Go.")
	check := jen.Qual(layoutImport, "Check").Call(jen.Id("t"), jen.Index().String().Values(hs...), jen.Index().Qual(layoutImport, "Item").Custom(jen.Options{Open: "{", Close: "}", Separator: ",", Multi: true}, items...))
	if g.layoutInclude != "" {
		// Golden packages check against their own small headers.
		check = jen.Qual(layoutImport, "CheckIn").Call(jen.Id("t"), jen.Lit(g.layoutInclude), jen.Index().String().Values(hs...),
			jen.Index().Qual(layoutImport, "Item").Custom(jen.Options{Open: "{", Close: "}", Separator: ",", Multi: true}, items...))
	}
	f.Func().Id("TestLayout").Params(jen.Id("t").Op("*").Qual("testing", "T")).Block(check)
	return nil
}
