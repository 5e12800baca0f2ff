package main

import (
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"modernc.org/cc/v4"
	"modernc.org/token"
)

// The intermediate model: what the headers declare, grouped per library, with every
// C type name resolved to the one Go declaration that represents it.

type declKind int

const (
	kindScalar declKind = iota // typedef of an arithmetic type
	kindHandle                 // typedef of a pointer (opaque handle, function pointer)
	kindEnum
	kindStruct
	kindUnion
	kindOpaque // incomplete struct used only through pointers
	kindArray
)

// TypeDecl is one Go type declaration: a C type and every C name that denotes it.
type TypeDecl struct {
	Key     string   // identity of the C type
	CName   string   // the C name the Go declaration is named after
	GoName  string   // the Go name
	Aliases []string // other C typedef names of the same type
	Kind    declKind
	Type    cc.Type
	Lib     *Lib // owner; nil when no spec owns it
	File    string
	Pos     token.Position
}

// Func is one function declared in a library's headers.
type Func struct {
	CName  string
	GoName string
	Type   *cc.FunctionType
	Decl   *cc.Declarator // the declaration: the qualifiers cc keeps no type of (see declQuals)
	Params []Param
	Pos    token.Position
}

// Param is one function parameter.
type Param struct {
	CName  string
	GoName string
	Type   cc.Type
}

// Const is an integer or floating-point #define constant of the API.
type Const struct {
	Name  string
	Value cc.Value
	Ptr   bool // defined as ((void*)N): emitted as uintptr
}

// Lib is one library: its spec and what its headers declare.
type Lib struct {
	Spec     *Spec
	Funcs    []*Func
	Excluded []*Func
	Reasons  map[string]string
	Types    []*TypeDecl
	Consts   []Const
	Soname   string
	Declared int // functions declared in the library's headers
	// XAliases are typedefs in this library's headers of types another package owns.
	XAliases []XAlias
	// Resources and InContext are the spec's, less what these headers lack (reconcile).
	Resources []Resource
	InContext []string
	// Notes say what of the spec these headers lack, and what was done instead.
	Notes []string
	// Err is why the library cannot be generated from these headers, if it cannot.
	Err error
	// Aliases are macros that call a bound function by another name.
	Aliases []FuncAlias
}

// XAlias is a typedef of another package's type (cufftComplex = cuComplex).
type XAlias struct {
	CName  string
	GoName string
	Target *TypeDecl
}

// Model is the whole translation unit, resolved.
type Model struct {
	Libs    []*Lib
	libs    map[string]*Lib
	ast     *cc.AST
	byKey   map[string]*TypeDecl
	byName  map[string]*TypeDecl // typedef name → decl (also for foreign typedefs)
	foreign map[string]cc.Type   // typedef names no spec owns → type
	tags    map[string]bool      // "struct X", "union X", "enum X" defined by the headers
}

var versionSuffix = regexp.MustCompile(`_v[0-9]+$`)

// abiSymbol matches a symbol versioned by the library's release, __<name>_<major>_<minor>,
// which a static inline <name> of the header calls.
var abiSymbol = regexp.MustCompile(`^__([A-Za-z][A-Za-z0-9]*)_[0-9]+_[0-9]+$`)

// typeKey identifies a C type independently of the typedef names that denote it.
func typeKey(t cc.Type) string {
	switch x := t.(type) {
	case *cc.StructType:
		if tag := x.Tag(); tag.SrcStr() != "" {
			return "struct " + tag.SrcStr()
		}
	case *cc.UnionType:
		if tag := x.Tag(); tag.SrcStr() != "" {
			return "union " + tag.SrcStr()
		}
	case *cc.EnumType:
		if tag := x.Tag(); tag.SrcStr() != "" {
			return "enum " + tag.SrcStr()
		}
	case *cc.PointerType:
		if k := typeKey(x.Elem()); k != "" && x.Elem().Typedef() == nil {
			return "*" + k
		}
	}
	return ""
}

// aliasOf returns the typedef name a declaration merely renames (typedef A B;), if any.
func aliasOf(d *cc.Declaration, dr *cc.Declarator) string {
	if dr.Pointer != nil || dr.DirectDeclarator == nil || dr.DirectDeclarator.Case != cc.DirectDeclaratorIdent {
		return ""
	}
	for ds := d.DeclarationSpecifiers; ds != nil; ds = ds.DeclarationSpecifiers {
		if ts := ds.TypeSpecifier; ts != nil && ts.Case == cc.TypeSpecifierTypeName {
			return ts.Token.SrcStr()
		}
	}
	return ""
}

type typedefInfo struct {
	name  string
	file  string
	alias string
	typ   cc.Type
	pos   token.Position
}

// buildModel resolves the translation unit against the specs. An error in one
// library's declarations is its Lib.Err; the error returned concerns them all.
func buildModel(ast *cc.AST, specs []*Spec) (*Model, error) {
	m := &Model{ast: ast, libs: map[string]*Lib{}, byKey: map[string]*TypeDecl{}, byName: map[string]*TypeDecl{}, foreign: map[string]cc.Type{}, tags: map[string]bool{}}
	fileOwner := map[string]*Lib{}
	for _, s := range specs {
		l := &Lib{Spec: s, Reasons: map[string]string{}}
		m.Libs = append(m.Libs, l)
		m.libs[s.Name] = l
		for _, f := range s.Files {
			if o := fileOwner[f]; o != nil {
				return nil, fmt.Errorf("header %s claimed by both %s and %s", f, o.Spec.Name, s.Name)
			}
			fileOwner[f] = l
		}
	}
	sharedOwner := map[string]*Lib{} // shared type name → lib
	for _, l := range m.Libs {
		for _, n := range l.Spec.SharedTypes {
			sharedOwner[n] = l
		}
	}
	ownerOf := func(name, file string) *Lib {
		if l := fileOwner[file]; l != nil {
			return l
		}
		if l := sharedOwner[name]; l != nil && l.Spec.shares(file) {
			return l
		}
		return nil
	}

	var typedefs []typedefInfo
	var tagged []typedefInfo // tagged struct/union/enum definitions
	var errs []string
	for n := ast.TranslationUnit; n != nil; n = n.TranslationUnit {
		ed := n.ExternalDeclaration
		if ed == nil || ed.Case != cc.ExternalDeclarationDecl {
			continue
		}
		d := ed.Declaration
		file := filepath.Base(d.Position().Filename)
		for ds := d.DeclarationSpecifiers; ds != nil; ds = ds.DeclarationSpecifiers {
			ts := ds.TypeSpecifier
			if ts == nil {
				continue
			}
			var t cc.Type
			switch {
			case ts.StructOrUnionSpecifier != nil && ts.StructOrUnionSpecifier.StructDeclarationList != nil:
				t = ts.StructOrUnionSpecifier.Type()
			case ts.EnumSpecifier != nil && ts.EnumSpecifier.EnumeratorList != nil:
				t = ts.EnumSpecifier.Type()
			}
			if t == nil {
				continue
			}
			if k := typeKey(t); k != "" {
				m.tags[k] = true
				tagged = append(tagged, typedefInfo{name: strings.Fields(k)[1], file: file, typ: t, pos: ts.Position()})
			}
		}
		for l := d.InitDeclaratorList; l != nil; l = l.InitDeclaratorList {
			dr := l.InitDeclarator.Declarator
			name := dr.Name()
			if dr.IsTypename() {
				typedefs = append(typedefs, typedefInfo{name: name, file: file, alias: aliasOf(d, dr), typ: dr.Type(), pos: dr.Position()})
				continue
			}
			ft, ok := dr.Type().(*cc.FunctionType)
			if !ok || dr.IsStatic() || dr.IsInline() {
				continue
			}
			lib := fileOwner[file]
			if lib == nil {
				continue
			}
			lib.Declared++
			f := &Func{CName: name, Type: ft, Decl: dr, Pos: dr.Position()}
			if reason, ok := lib.Spec.excluded(name); ok {
				lib.Reasons[name] = reason
				lib.Excluded = append(lib.Excluded, f)
				continue
			}
			lib.Funcs = append(lib.Funcs, f)
		}
	}
	if len(errs) != 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}

	// Group typedef names by the type they denote.
	type group struct {
		key     string
		names   []typedefInfo
		typ     cc.Type
		tagOnly *typedefInfo
	}
	groups := map[string]*group{}
	var order []string
	root := map[string]string{} // typedef name → group key
	info := map[string]typedefInfo{}
	for _, td := range typedefs {
		info[td.name] = td
	}
	var resolve func(name string, depth int) string
	resolve = func(name string, depth int) string {
		if k, ok := root[name]; ok {
			return k
		}
		td, ok := info[name]
		if !ok || depth > 20 {
			return ""
		}
		var k string
		if td.alias != "" {
			k = resolve(td.alias, depth+1)
		}
		if k == "" {
			k = typeKey(td.typ)
		}
		if k == "" {
			k = "typedef " + name
		}
		root[name] = k
		return k
	}
	for _, td := range typedefs {
		k := resolve(td.name, 0)
		g := groups[k]
		if g == nil {
			g = &group{key: k, typ: td.typ}
			groups[k] = g
			order = append(order, k)
		}
		g.names = append(g.names, td)
	}
	for i := range tagged {
		td := tagged[i]
		k := typeKey(td.typ)
		g := groups[k]
		if g == nil {
			g = &group{key: k, typ: td.typ}
			groups[k] = g
			order = append(order, k)
		}
		if g.tagOnly == nil {
			g.tagOnly = &td
		}
	}

	for _, k := range order {
		g := groups[k]
		// Candidates: names in files a library owns.
		// The owner is the library that declares the type first; typedefs of it in
		// other libraries' headers become aliases in those packages.
		var owned []typedefInfo
		var owner *Lib
		var xaliases []typedefInfo
		for _, td := range g.names {
			l := ownerOf(td.name, td.file)
			switch {
			case l == nil:
			case owner == nil || owner == l:
				owner = l
				owned = append(owned, td)
			default:
				xaliases = append(xaliases, td)
			}
		}
		if owner == nil && len(g.names) == 0 && g.tagOnly != nil {
			if l := fileOwner[g.tagOnly.file]; l != nil {
				owner = l
				owned = []typedefInfo{*g.tagOnly}
			}
		}
		if owner == nil {
			for _, td := range g.names {
				m.foreign[td.name] = td.typ
			}
			continue
		}
		sort.SliceStable(owned, func(i, j int) bool {
			// The typedef of the type itself wins over typedefs of that typedef,
			// unless it carries a version suffix the others drop.
			vi, vj := versionSuffix.MatchString(owned[i].name), versionSuffix.MatchString(owned[j].name)
			ai, aj := owned[i].alias != "", owned[j].alias != ""
			if vi == vj && ai != aj {
				return !ai
			}
			return betterName(owned[i].name, owned[j].name)
		})
		c := owned[0]
		d := &TypeDecl{Key: k, CName: c.name, Lib: owner, File: c.file, Pos: c.pos, Type: c.typ}
		for _, td := range g.names {
			if td.name != c.name && ownerOf(td.name, td.file) == owner {
				d.Aliases = append(d.Aliases, td.name)
			}
		}
		sort.Strings(d.Aliases)
		d.GoName = goTypeName(owner.Spec, c.name)
		if !isGoIdent(d.GoName) {
			return nil, fmt.Errorf("%s: type %s has no Go name (%q); add a rename", c.pos, c.name, d.GoName)
		}
		switch t := c.typ.(type) {
		case *cc.EnumType:
			d.Kind = kindEnum
		case *cc.StructType:
			d.Kind = kindStruct
			if t.IsIncomplete() {
				d.Kind = kindOpaque
			}
		case *cc.UnionType:
			d.Kind = kindUnion
		case *cc.PointerType:
			d.Kind = kindHandle
		case *cc.ArrayType:
			d.Kind = kindArray
		case *cc.PredefinedType:
			d.Kind = kindScalar
		case *cc.FunctionType:
			return nil, fmt.Errorf("%s: function typedef %s is not supported", c.pos, c.name)
		default:
			return nil, fmt.Errorf("%s: typedef %s of unsupported type %T", c.pos, c.name, c.typ)
		}
		m.byKey[k] = d
		for _, td := range g.names {
			m.byName[td.name] = d
		}
		owner.Types = append(owner.Types, d)
		for _, td := range xaliases {
			l := ownerOf(td.name, td.file)
			l.XAliases = append(l.XAliases, XAlias{CName: td.name, GoName: goTypeName(l.Spec, td.name), Target: d})
		}
	}

	// A library that cannot be finished fails alone (Lib.Err): the run then says which
	// library kept it from writing the others.
	for _, l := range m.Libs {
		l.Err = m.finishLib(l)
	}
	return m, nil
}

// betterName orders candidate C names for a type: no _vN suffix, then shorter, then alphabetical.
func betterName(a, b string) bool {
	va, vb := versionSuffix.MatchString(a), versionSuffix.MatchString(b)
	if va != vb {
		return !va
	}
	sa, sb := strings.HasSuffix(a, "_st"), strings.HasSuffix(b, "_st")
	if sa != sb {
		return !sa
	}
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// goTypeName names a C type in Go: a spec rename, else the C name with its first
// letter upper-cased and a trailing _t dropped (cublasHandle_t → CublasHandle).
func goTypeName(s *Spec, c string) string {
	if r, ok := s.Rename[c]; ok {
		return r
	}
	n := strings.TrimSuffix(c, "_t")
	return exportName(n)
}

func exportName(n string) string {
	if n == "" {
		return n
	}
	return strings.ToUpper(n[:1]) + n[1:]
}

// goFuncName drops the library prefix and the version suffix: cuMemAlloc_v2 → MemAlloc,
// cublasSgemm_v2_64 → Sgemm64, cusparseSpMV_bufferSize → SpMVBufferSize.
//
// A symbol that a header's static inline function calls under the library's ABI
// version (nvJitLink.h's nvJitLinkCreate calls __nvJitLinkCreate_13_0) is named after
// that function: Create.
func goFuncName(prefix, c string) string {
	if m := abiSymbol.FindStringSubmatch(c); m != nil && strings.HasPrefix(m[1], prefix) {
		c = m[1]
	}
	n := strings.TrimPrefix(c, prefix)
	is64 := strings.HasSuffix(n, "_64")
	n = strings.TrimSuffix(n, "_64")
	n = versionSuffix.ReplaceAllString(n, "")
	parts := strings.Split(n, "_")
	for i, p := range parts {
		parts[i] = exportName(p)
	}
	n = strings.Join(parts, "")
	if is64 {
		n += "64"
	}
	return n
}

var goKeywords = map[string]bool{
	"break": true, "case": true, "chan": true, "const": true, "continue": true, "default": true,
	"defer": true, "else": true, "fallthrough": true, "for": true, "func": true, "go": true,
	"goto": true, "if": true, "import": true, "interface": true, "map": true, "package": true,
	"range": true, "return": true, "select": true, "struct": true, "switch": true, "type": true,
	"var": true, "len": true, "cap": true, "string": true, "unsafe": true, "C": true, "err": true,
	"fn": true, "r": true, "error": true, "new": true, "make": true, "copy": true, "append": true,
	"runtime": true, "resource": true, "dl": true, "cuda": true, "nil": true, "true": true,
	"false": true, "iota": true, "byte": true, "int": true, "uint": true, "min": true, "max": true,
	"close": true, "delete": true, "panic": true, "print": true, "real": true, "imag": true,
	"complex": true, "clear": true, "recover": true, "println": true, "errors": true, "ok": true,
}

func (m *Model) finishLib(l *Lib) error {
	s := l.Spec
	// Soname from the headers' version macros.
	so := s.Soname
	for {
		i := strings.Index(so, "{")
		if i < 0 {
			break
		}
		j := strings.Index(so[i:], "}")
		if j < 0 {
			return fmt.Errorf("%s: bad soname template %q", s.Path, s.Soname)
		}
		name := so[i+1 : i+j]
		mac := m.ast.Macros[name]
		if mac == nil {
			return fmt.Errorf("%s: soname macro %s is not defined by the headers", s.Path, name)
		}
		v, ok := mac.Value().(cc.Int64Value)
		if !ok {
			return fmt.Errorf("%s: soname macro %s is not an integer (%v)", s.Path, name, mac.Value())
		}
		so = so[:i] + fmt.Sprint(int64(v)) + so[i+j+1:]
	}
	l.Soname = so

	// Function names and parameters.
	seen := map[string]string{}
	sort.Slice(l.Funcs, func(i, j int) bool { return l.Funcs[i].CName < l.Funcs[j].CName })
	sort.Slice(l.Excluded, func(i, j int) bool { return l.Excluded[i].CName < l.Excluded[j].CName })
	declared := map[string]bool{}
	for _, f := range append(append([]*Func{}, l.Funcs...), l.Excluded...) {
		declared[f.CName] = true
	}
	stem := func(c string) string {
		return versionSuffix.ReplaceAllString(strings.TrimSuffix(c, "_64"), "") + map[bool]string{true: "_64"}[strings.HasSuffix(c, "_64")]
	}
	stems := map[string]int{}
	for c := range declared {
		stems[stem(c)]++
	}
	for _, f := range l.Funcs {
		f.GoName = goFuncName(s.Prefix, f.CName)
		// cuCtxGetDevice_v2 beside cuCtxGetDevice, or cudnnRNNGetClip_v8 beside _v9, are
		// different functions, not newer ABIs of one: they keep their suffix (CtxGetDeviceV2).
		if base := versionSuffix.ReplaceAllString(strings.TrimSuffix(f.CName, "_64"), ""); base != strings.TrimSuffix(f.CName, "_64") && stems[stem(f.CName)] > 1 {
			v := versionSuffix.FindString(strings.TrimSuffix(f.CName, "_64"))
			f.GoName = goFuncName(s.Prefix, base) + "V" + v[2:]
			if strings.HasSuffix(f.CName, "_64") {
				f.GoName += "64"
			}
		}
		if !isGoIdent(f.GoName) {
			return fmt.Errorf("%s: %s has no Go name once its prefix %s is dropped (%q); exclude it with a reason", f.Pos, f.CName, s.Prefix, f.GoName)
		}
		if prev, ok := seen[f.GoName]; ok {
			return fmt.Errorf("%s: %s and %s both map to Go name %s; add a rename", f.Pos, prev, f.CName, f.GoName)
		}
		seen[f.GoName] = f.CName
		if f.Type.IsVariadic() {
			return fmt.Errorf("%s: %s is variadic; exclude it with a reason", f.Pos, f.CName)
		}
		used := map[string]bool{}
		for i, p := range f.Type.Parameters() {
			if p.Type().Kind() == cc.Void {
				continue
			}
			n := p.Name()
			if n == "" {
				n = fmt.Sprintf("p%d", i)
			}
			gn := n
			if goKeywords[gn] {
				gn += "_"
			}
			if !isGoIdent(gn) {
				return fmt.Errorf("%s: %s: parameter name %s is not a Go identifier", f.Pos, f.CName, n)
			}
			for used[gn] {
				gn += "_"
			}
			used[gn] = true
			f.Params = append(f.Params, Param{CName: n, GoName: gn, Type: p.Type()})
		}
	}
	m.reconcile(l)
	sort.Slice(l.XAliases, func(i, j int) bool { return l.XAliases[i].GoName < l.XAliases[j].GoName })
	for _, a := range l.XAliases {
		if prev, ok := seen[a.GoName]; ok {
			return fmt.Errorf("%s: alias %s and %s both map to Go name %s; add a rename", s.Path, a.CName, prev, a.GoName)
		}
		seen[a.GoName] = a.CName
	}
	for _, d := range l.Types {
		if prev, ok := seen[d.GoName]; ok {
			return fmt.Errorf("%s: type %s and %s both map to Go name %s; add a rename", d.Pos, d.CName, prev, d.GoName)
		}
		seen[d.GoName] = d.CName
	}
	sort.Slice(l.Types, func(i, j int) bool { return l.Types[i].GoName < l.Types[j].GoName })

	// #define integer constants of the API.
	var names []string
	for name, mac := range m.ast.Macros {
		if mac.IsFnLike || !mac.IsConst {
			continue
		}
		if !s.owns(filepath.Base(mac.Position().Filename)) {
			continue
		}
		ok := false
		for _, p := range s.MacroPrefixes {
			if strings.HasPrefix(name, p) {
				ok = true
			}
		}
		if !ok {
			continue
		}
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		mac := m.ast.Macros[name]
		switch v := mac.Value().(type) {
		case cc.Int64Value, cc.UInt64Value:
			ptr := mac.Type() != nil && mac.Type().Kind() == cc.Ptr
			l.Consts = append(l.Consts, Const{Name: name, Value: v, Ptr: ptr})
		case cc.Float64Value:
			f := float64(v)
			if mac.Type() != nil && mac.Type().Kind() == cc.Float {
				f = float64(float32(f)) // 1e-5f is a float in C: its value, not the decimal's
			}
			if !math.IsInf(f, 0) && !math.IsNaN(f) { // no Go constant holds these
				l.Consts = append(l.Consts, Const{Name: name, Value: cc.Float64Value(f)})
			}
		}
	}
	m.findAliases(l, seen)
	return nil
}

// lookupTypedef returns the Go declaration for a C typedef name, if a spec owns it.
func (m *Model) lookupTypedef(name string) *TypeDecl { return m.byName[name] }
