package main

import (
	"fmt"
	"path/filepath"

	"github.com/dave/jennifer/jen"
	"modernc.org/cc/v4"
)

// How a value crosses into C through a trampoline.
type passKind int

const (
	passScalar passKind = iota // integer, float or enum: converted to a C scalar type
	passBool                   // C _Bool
	passPtr                    // a data pointer: unsafe.Pointer
	passHandle                 // an opaque pointer or function pointer held in a uintptr
	passStruct                 // a struct or union by value
	passVoid
)

// cval describes how a C type appears in Go and in the C trampoline.
type cval struct {
	goType jen.Code
	pass   passKind
	ctype  string    // type in the trampoline's C signature
	decl   *TypeDecl // named declaration, if any
}

// gen emits one package from the model.
type gen struct {
	m   *Model
	lib *Lib
	// byValue collects structs and unions passed by value, which need C definitions.
	byValue map[string]*TypeDecl
	// nested are anonymous struct/union types met inside other types, named Parent_field.
	nested    map[cc.Type]string
	nestedOrd []nestedDecl
	// sigs are the signatures of the bindings emitted, by C name, for their aliases.
	sigs map[string]signature
	// layoutInclude, when set, is the header directory (relative to the package) the
	// layout test compiles against, instead of the CUDA toolkit's.
	layoutInclude string
}

type nestedDecl struct {
	name string
	t    cc.Type
}

// primitive maps an arithmetic C type to its Go and C (stdint) spelling.
func primitive(t cc.Type) (goT, cT string, err error) {
	switch t.Kind() {
	case cc.Char:
		return "byte", "char", nil
	case cc.SChar:
		return "int8", "int8_t", nil
	case cc.UChar:
		return "uint8", "uint8_t", nil
	case cc.Short:
		return "int16", "int16_t", nil
	case cc.UShort:
		return "uint16", "uint16_t", nil
	case cc.Int:
		return "int32", "int32_t", nil
	case cc.UInt:
		return "uint32", "uint32_t", nil
	case cc.Long, cc.LongLong:
		if t.Size() == 8 {
			return "int64", "int64_t", nil
		}
		return "int32", "int32_t", nil
	case cc.ULong, cc.ULongLong:
		if t.Size() == 8 {
			return "uint64", "uint64_t", nil
		}
		return "uint32", "uint32_t", nil
	case cc.Float:
		return "float32", "float", nil
	case cc.Double:
		return "float64", "double", nil
	case cc.Bool:
		return "bool", "_Bool", nil
	case cc.Enum:
		return intType(t.Size(), isSignedEnum(t))
	}
	return "", "", fmt.Errorf("unsupported C type %s (%v)", t, t.Kind())
}

func intType(size int64, signed bool) (string, string, error) {
	bits := size * 8
	switch bits {
	case 8, 16, 32, 64:
	default:
		return "", "", fmt.Errorf("no integer type of %d bytes", size)
	}
	if signed {
		return fmt.Sprintf("int%d", bits), fmt.Sprintf("int%d_t", bits), nil
	}
	return fmt.Sprintf("uint%d", bits), fmt.Sprintf("uint%d_t", bits), nil
}

func isSignedEnum(t cc.Type) bool {
	e, ok := t.(*cc.EnumType)
	if !ok {
		return true
	}
	return e.Min() < 0 || e.UnderlyingType().Kind() == cc.Int
}

// ref names a declaration from this package or another one.
func (g *gen) ref(d *TypeDecl) jen.Code {
	if d.Lib == g.lib {
		return jen.Id(d.GoName)
	}
	return jen.Qual(d.Lib.Spec.Import, d.GoName)
}

// declFor returns the named declaration a C type refers to, if a spec owns one.
func (g *gen) declFor(t cc.Type) (*TypeDecl, error) {
	if td := t.Typedef(); td != nil {
		if d := g.m.byName[td.Name()]; d != nil {
			return d, nil
		}
		// A typedef no spec owns: arithmetic types (size_t, uint32_t, ...) resolve to
		// their Go equivalent; anything else must be owned by a spec.
		switch t.(type) {
		case *cc.PredefinedType:
			return nil, nil
		case *cc.PointerType:
			if t.(*cc.PointerType).Elem().Kind() == cc.Void {
				return nil, nil
			}
		}
		if k := typeKey(t); k != "" {
			if d := g.m.byKey[k]; d != nil {
				return d, nil
			}
		}
		return nil, fmt.Errorf("type %s (declared at %v) is used by %s but no spec owns it: add it to a spec's files or shared_types", td.Name(), td.Position(), g.lib.Spec.Name)
	}
	if k := typeKey(t); k != "" {
		if d := g.m.byKey[k]; d != nil {
			return d, nil
		}
		// A tagged type defined inside another declaration is named by its owner.
	}
	return nil, nil
}

// val maps a C type to its Go type and trampoline passing convention.
func (g *gen) val(t cc.Type, owner string) (cval, error) {
	d, err := g.declFor(t)
	if err != nil {
		return cval{}, err
	}
	if d != nil {
		v := cval{goType: g.ref(d), decl: d}
		switch d.Kind {
		case kindScalar, kindEnum:
			_, ct, err := primitive(d.Type)
			if err != nil {
				return cval{}, err
			}
			v.ctype = ct
			v.pass = passScalar
			if ct == "_Bool" {
				v.pass = passBool
			}
		case kindHandle:
			v.pass, v.ctype = passHandle, "uintptr_t"
		case kindStruct, kindUnion:
			v.pass, v.ctype = passStruct, "gocuda_"+d.GoName
		case kindOpaque, kindArray:
			v.pass = passStruct
			v.ctype = "gocuda_" + d.GoName
		}
		return v, nil
	}
	switch x := t.(type) {
	case *cc.PredefinedType:
		if x.Kind() == cc.Void {
			return cval{pass: passVoid, ctype: "void"}, nil
		}
		gt, ct, err := primitive(x)
		if err != nil {
			return cval{}, err
		}
		p := passScalar
		if ct == "_Bool" {
			p = passBool
		}
		return cval{goType: jen.Id(gt), pass: p, ctype: ct}, nil
	case *cc.EnumType:
		gt, ct, err := primitive(x)
		if err != nil {
			return cval{}, err
		}
		return cval{goType: jen.Id(gt), pass: passScalar, ctype: ct}, nil
	case *cc.PointerType:
		e := x.Elem()
		switch {
		case e.Kind() == cc.Function:
			return cval{goType: jen.Uintptr(), pass: passHandle, ctype: "uintptr_t"}, nil
		case e.Kind() == cc.Void && e.Typedef() == nil:
			return cval{goType: jen.Qual("unsafe", "Pointer"), pass: passPtr, ctype: "void*"}, nil
		}
		ev, err := g.val(e, owner)
		if err != nil {
			// A pointer to a type no spec owns (FILE from stdio.h) stays untyped.
			if td := e.Typedef(); td != nil && g.m.foreign[td.Name()] != nil && !g.ownsFile(td.Position().Filename) {
				return cval{goType: jen.Qual("unsafe", "Pointer"), pass: passPtr, ctype: "void*"}, nil
			}
			return cval{}, err
		}
		if ev.pass == passVoid {
			return cval{goType: jen.Qual("unsafe", "Pointer"), pass: passPtr, ctype: "void*"}, nil
		}
		if !g.hasPointers(e) {
			// The pointee holds no Go pointers: passing it as uint8_t* lets cgo skip
			// its pointer check, which for an unsafe.Pointer scans the whole allocation
			// (and rejects a field of a struct that holds other pointers).
			return cval{goType: jen.Op("*").Add(ev.goType), pass: passPtr, ctype: "uint8_t*"}, nil
		}
		return cval{goType: jen.Op("*").Add(ev.goType), pass: passPtr, ctype: "void*"}, nil
	case *cc.ArrayType:
		ev, err := g.val(x.Elem(), owner)
		if err != nil {
			return cval{}, err
		}
		if x.IsIncomplete() || x.Len() < 0 {
			return cval{goType: jen.Op("*").Add(ev.goType), pass: passPtr, ctype: "void*"}, nil
		}
		return cval{goType: jen.Index(jen.Lit(int(x.Len()))).Add(ev.goType), pass: passStruct}, nil
	case *cc.StructType, *cc.UnionType:
		// An anonymous struct or union nested in owner.
		if owner == "" {
			return cval{}, fmt.Errorf("anonymous %s outside a declaration", t)
		}
		name, ok := g.nested[t]
		if !ok {
			name = owner
			g.nested[t] = name
			g.nestedOrd = append(g.nestedOrd, nestedDecl{name: name, t: t})
		}
		return cval{goType: jen.Id(name), pass: passStruct, ctype: "gocuda_" + name}, nil
	}
	return cval{}, fmt.Errorf("unsupported C type %s (%T)", t, t)
}

// cSpell renders a C type as C source for the trampolines' struct definitions:
// the same layout as the header's, written with stdint types.
func (g *gen) cSpell(t cc.Type, name string) (string, error) {
	switch x := t.(type) {
	case *cc.PointerType:
		return "void* " + name, nil
	case *cc.ArrayType:
		inner, err := g.cSpell(x.Elem(), fmt.Sprintf("%s[%d]", name, x.Len()))
		return inner, err
	case *cc.StructType, *cc.UnionType:
		return g.cRecord(t, name)
	}
	_, ct, err := primitive(t)
	if err != nil {
		return "", err
	}
	return ct + " " + name, nil
}

func (g *gen) cRecord(t cc.Type, name string) (string, error) {
	kw := "struct"
	var n int
	var field func(int) *cc.Field
	switch x := t.(type) {
	case *cc.StructType:
		n, field = x.NumFields(), x.FieldByIndex
	case *cc.UnionType:
		kw, n, field = "union", x.NumFields(), x.FieldByIndex
	}
	s := kw + " __attribute__((aligned(" + fmt.Sprint(t.Align()) + "))) { "
	for i := 0; i < n; i++ {
		f := field(i)
		fn := f.Name()
		if fn == "" {
			fn = fmt.Sprintf("anon%d", i)
		}
		if f.IsBitfield() {
			_, ct, err := primitive(f.Type())
			if err != nil {
				return "", err
			}
			s += fmt.Sprintf("%s %s : %d; ", ct, fn, f.ValueBits())
			continue
		}
		fs, err := g.cSpell(f.Type(), fn)
		if err != nil {
			return "", err
		}
		s += fs + "; "
	}
	return s + "} " + name, nil
}

// ownsFile reports whether any spec owns or shares the header file at path.
func (g *gen) ownsFile(path string) bool {
	base := filepath.Base(path)
	for _, l := range g.m.Libs {
		if l.Spec.owns(base) || l.Spec.shares(base) {
			return true
		}
	}
	return false
}

// hasPointers reports whether the Go type generated for t holds Go pointers
// (unsafe.Pointer or *T): handles, function pointers and unions (bytes) do not.
func (g *gen) hasPointers(t cc.Type) bool {
	if d, err := g.declFor(t); err == nil && d != nil {
		switch d.Kind {
		case kindScalar, kindEnum, kindHandle, kindUnion, kindOpaque:
			return false
		case kindArray:
			return g.hasPointers(d.Type.(*cc.ArrayType).Elem())
		}
		t = d.Type
	}
	switch x := t.(type) {
	case *cc.PointerType:
		return x.Elem().Kind() != cc.Function
	case *cc.ArrayType:
		return g.hasPointers(x.Elem())
	case *cc.UnionType:
		return false
	case *cc.StructType:
		for i := 0; i < x.NumFields(); i++ {
			if f := x.FieldByIndex(i); !f.IsBitfield() && g.hasPointers(f.Type()) {
				return true
			}
		}
		return false
	case *cc.PredefinedType:
		return false
	}
	return true
}
