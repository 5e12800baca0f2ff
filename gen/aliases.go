package main

import (
	"go/token"
	"path/filepath"
	"sort"
	"strings"

	"modernc.org/cc/v4"
)

// FuncAlias is a macro under which C code calls a bound function by another name
// (#define cuGraphInstantiate cuGraphInstantiateWithFlags): Go gets that name too,
// where no other declaration has it.
type FuncAlias struct {
	CName  string // the macro
	GoName string
	Target *Func
	File   string // the header that defines the macro
}

// maxAliasDepth bounds the macros followed from an alias to the function it names.
const maxAliasDepth = 8

// aliasTarget returns the identifier an object-like macro finally stands for, through
// other object-like macros and through function-like macros of one parameter whose
// expansion is that parameter (cuda.h's __CUDA_API_PTSZ(api) without per-thread
// streams), or "" when it stands for anything else.
func (m *Model) aliasTarget(mac *cc.Macro) string {
	toks := mac.ReplacementList()
	expanded := map[string]bool{mac.Name.SrcStr(): true}
	for range maxAliasDepth {
		switch {
		case len(toks) == 1 && token.IsIdentifier(toks[0].SrcStr()):
			id := toks[0].SrcStr()
			next := m.ast.Macros[id]
			// A macro's own name in its expansion is not expanded again.
			if next == nil || next.IsFnLike || expanded[id] {
				return id
			}
			expanded[id] = true
			toks = next.ReplacementList()
		case len(toks) == 4 && toks[1].SrcStr() == "(" && token.IsIdentifier(toks[2].SrcStr()) && toks[3].SrcStr() == ")":
			fn := m.ast.Macros[toks[0].SrcStr()]
			if fn == nil || !fn.IsFnLike || len(fn.Params) != 1 || fn.VarArg >= 0 {
				return ""
			}
			body := fn.ReplacementList()
			if len(body) != 1 || body[0].SrcStr() != fn.Params[0].SrcStr() {
				return ""
			}
			toks = toks[2:3]
		default:
			return ""
		}
	}
	return ""
}

// findAliases collects the library's macro aliases whose Go name is free: taken maps
// the Go names of its functions and types.
func (m *Model) findAliases(l *Lib, taken map[string]string) {
	s := l.Spec
	bound := map[string]*Func{}
	for _, f := range l.Funcs {
		bound[f.CName] = f
	}
	used := map[string]bool{"Library": true, "Soname": true, "SonameEnv": true}
	for n := range taken {
		used[n] = true
	}
	for _, d := range l.Types {
		for _, a := range d.Aliases {
			used[goTypeName(s, a)] = true
		}
		for _, en := range enumerators(d.Type) {
			used[exportName(en.Token.SrcStr())] = true
		}
	}
	for _, c := range l.Consts {
		used[exportName(c.Name)] = true
	}
	for _, r := range l.Resources {
		used["Owned"+r.Go], used["Own"+r.Go], used["NewOwned"+r.Go] = true, true, true
	}
	var names []string
	for name, mac := range m.ast.Macros {
		if !mac.IsFnLike && strings.HasPrefix(name, s.Prefix) && s.owns(filepath.Base(mac.Position().Filename)) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		mac := m.ast.Macros[name]
		target := bound[m.aliasTarget(mac)]
		if target == nil || target.CName == name {
			continue
		}
		gn := goFuncName(s.Prefix, name)
		// Status sentinels are Err*: an alias never takes such a name.
		if !isGoIdent(gn) || !token.IsExported(gn) || used[gn] || strings.HasPrefix(gn, "Err") {
			continue
		}
		used[gn] = true
		l.Aliases = append(l.Aliases, FuncAlias{CName: name, GoName: gn, Target: target, File: filepath.Base(mac.Position().Filename)})
	}
}
