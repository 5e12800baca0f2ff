package main

import (
	"fmt"
	"slices"
	"strings"
)

// A spec is written against the newest headers, but the generator also runs on older
// ones (CUDA 11.8 lacks cuGraphInstantiateWithParams, CUlibrary, cuCtxCreate_v4, ...).
// reconcile resolves every name a spec gives against what the headers declare: a name
// they lack is dropped with a note instead of failing the run, so that one spec serves
// every header version. Notes are printed; -strict makes them errors, for the headers
// the committed packages come from, where a note can only be a mistake in the spec.

// note records that a spec entry was left out for these headers.
func (l *Lib) note(format string, args ...any) {
	l.Notes = append(l.Notes, fmt.Sprintf(format, args...))
}

// resolveFunc finds the bound function a spec names: the function itself or, where
// these headers declare another ABI version of it (cuEventElapsedTime for
// cuEventElapsedTime_v2), the bound function with the same Go name. It returns nil
// when neither is bound, and why.
func (l *Lib) resolveFunc(c string, bound, byGo map[string]*Func) (*Func, string) {
	if f := bound[c]; f != nil {
		return f, ""
	}
	if _, ok := l.Reasons[c]; ok {
		return nil, "it is excluded"
	}
	if f := byGo[goFuncName(l.Spec.Prefix, c)]; f != nil {
		return f, ""
	}
	return nil, "the headers do not declare it"
}

// reconcile fills l.Resources and l.InContext from the spec, keeping what these
// headers declare, and notes every entry it drops or substitutes.
func (m *Model) reconcile(l *Lib) {
	s := l.Spec
	bound := map[string]*Func{}
	byGo := map[string]*Func{}
	for _, f := range l.Funcs {
		bound[f.CName] = f
		byGo[f.GoName] = f
	}
	resolve := func(what, c string) string {
		f, why := l.resolveFunc(c, bound, byGo)
		switch {
		case f == nil:
			l.note("%s %s dropped: %s", what, c, why)
			return ""
		case f.CName != c:
			l.note("%s %s: not declared; %s, of the same Go name %s, used instead", what, c, f.CName, f.GoName)
		}
		return f.CName
	}

	for _, e := range s.Exclude {
		if _, ok := l.Reasons[e.Function]; !ok {
			l.note("exclusion of %s dropped: the headers do not declare it", e.Function)
		}
	}
	for _, c := range sortedKeys(s.Rename) {
		if !m.declaresType(c) {
			l.note("rename of %s dropped: the headers do not declare it", c)
		}
	}
	for _, c := range s.SharedTypes {
		if !m.declaresType(c) {
			l.note("shared type %s dropped: the headers do not declare it", c)
		}
	}

	l.InContext = nil
	for _, c := range s.InContext {
		if c == "*" {
			l.InContext = append(l.InContext, c)
			continue
		}
		if r := resolve("in_context function", c); r != "" {
			l.InContext = append(l.InContext, r)
		}
	}

	l.Resources = nil
	for _, r := range s.Resources {
		if !m.declaresType(r.Type) {
			l.note("resource %s dropped: the headers do not declare the type", r.Type)
			continue
		}
		destroy := resolve("resource "+r.Type+": destroy function", r.Destroy)
		if destroy == "" {
			l.note("resource %s dropped: it has no destroy function", r.Type)
			continue
		}
		r.Destroy = destroy
		var create []string
		for _, c := range r.Create {
			// An older ABI of a listed function may be listed already.
			if n := resolve("resource "+r.Type+": create function", c); n != "" && !slices.Contains(create, n) {
				create = append(create, n)
			}
		}
		r.Create = create
		l.Resources = append(l.Resources, r)
	}
}

// declaresType reports whether the headers declare a typedef, or a struct, union or
// enum tag, named c.
func (m *Model) declaresType(c string) bool {
	if m.byName[c] != nil || m.foreign[c] != nil {
		return true
	}
	for _, kw := range []string{"struct ", "union ", "enum "} {
		if m.byKey[kw+c] != nil || m.tags[kw+c] {
			return true
		}
	}
	return false
}

// notesError is the error -strict makes of a library's notes.
func notesError(l *Lib) error {
	return fmt.Errorf("%s: the spec names what the headers lack (-strict):\n\t%s", l.Spec.Path, strings.Join(l.Notes, "\n\t"))
}
