package main

import (
	"fmt"
	"strings"

	"github.com/dave/jennifer/jen"
	"modernc.org/cc/v4"
)

// emitResources writes one owner type per row of the spec's resource table. An owner
// wraps a raw handle the way os.File wraps a descriptor: Close releases it now, and a
// handle that is dropped without Close is released through resource.ResourceFinalizer
// in the row's blocking class. A row with a handwritten type gets no owner (two types
// for one resource would leave users to pick), but is checked all the same: its
// create and destroy functions are what the handwritten type and blockprobe use.
func (g *gen) emitResources(f *jen.File) error {
	l := g.lib
	funcs := map[string]*Func{}
	for _, fn := range l.Funcs {
		funcs[fn.CName] = fn
	}
	for _, r := range l.Resources {
		d := g.m.byName[r.Type]
		if d == nil || d.Lib != l {
			return fmt.Errorf("resource type %s is not a type of %s", r.Type, l.Spec.Name)
		}
		destroy := funcs[r.Destroy]
		if destroy == nil {
			return fmt.Errorf("resource %s: destroy function %s is not bound", r.Type, r.Destroy)
		}
		if len(destroy.Params) != 1 || g.m.byName[typedefName(destroy.Params[0].Type)] != d {
			return fmt.Errorf("resource %s: %s must take the handle as its only parameter", r.Type, r.Destroy)
		}
		var simple *Func // a create function whose only parameter is the out-handle
		for _, c := range r.Create {
			fn := funcs[c]
			if fn == nil {
				return fmt.Errorf("resource %s: create function %s is not bound", r.Type, c)
			}
			out := 0
			for _, p := range fn.Params {
				if g.isOutHandle(p, d) {
					out++
				}
			}
			if out != 1 {
				return fmt.Errorf("resource %s: create function %s has no single %s* out-parameter", r.Type, c, r.Type)
			}
			if len(fn.Params) == 1 && simple == nil {
				simple = fn
			}
		}
		if r.Handwritten == "" {
			g.emitOwner(f, r, d, destroy, simple)
		}
	}
	return nil
}

// typedefName is the typedef name a C type is spelled with, if any.
func typedefName(t cc.Type) string {
	if td := t.Typedef(); td != nil {
		return td.Name()
	}
	return ""
}

// isOutHandle reports whether p is a pointer to the handle type d (an out-parameter).
func (g *gen) isOutHandle(p Param, d *TypeDecl) bool {
	pt, ok := p.Type.(*cc.PointerType)
	return ok && pt.Typedef() == nil && g.m.byName[typedefName(pt.Elem())] == d
}

func (g *gen) emitOwner(f *jen.File, r Resource, d *TypeDecl, destroy, simple *Func) {
	l := g.lib
	outer := "Owned" + r.Go
	raw := jen.Id(d.GoName)
	lane := "non-blocking"
	// resource runs the non-blocking lane at every Drain (the cuda package's allocations
	// and synchronizations) and otherwise on its background worker, 100 ms after the
	// first finalizer queued something (resource/queue.go, workerDelay).
	laneWhy := "returns promptly, so a dropped " + outer + " is released soon after a garbage collection finds it unreachable: at the next allocation or synchronization, or within about 100 ms"
	if r.Blocking {
		lane = "blocking"
		laneWhy = "may wait for the GPU, so a dropped " + outer + " is held until resource.Reclaim (which the allocator runs on out-of-memory)"
	}
	creators := strings.Join(r.Create, ", ")
	doc := fmt.Sprintf("%s owns a %s (created by %s) and releases it with %s.\n\n"+
		"Close releases it now. An %s that is dropped without Close is released through\n"+
		"resource.ResourceFinalizer in the %s lane: %s %s.\n"+
		"Blocking class: %s.\n\n"+
		"Handle returns the raw handle for the raw functions; keep the %s reachable\n"+
		"(runtime.KeepAlive) until the last call that uses it has returned, as with os.File.Fd.",
		outer, r.Type, creators, r.Destroy, outer, lane, r.Destroy, laneWhy, r.Why, outer)
	f.Add(docComment(doc))
	f.Type().Id(outer).Struct(jen.Id("o").Qual(ownerImport, "Owned").Types(raw))
	f.Add(docComment(fmt.Sprintf("Own%s takes ownership of h, a %s created through the raw layer: the returned\n%s releases it with %s.", r.Go, r.Type, outer, r.Destroy)))
	f.Func().Id("Own" + r.Go).Params(jen.Id("h").Add(raw)).Op("*").Id(outer).Block(
		jen.Return(jen.Op("&").Id(outer).Values(jen.Qual(ownerImport, "New").Call(
			jen.Id("h"), jen.Id(destroy.GoName), jen.Lit(r.Blocking), jen.Lit(r.Destroy)))),
	)
	if simple != nil {
		f.Add(docComment(fmt.Sprintf("NewOwned%s creates a %s with %s and owns it.", r.Go, r.Type, simple.CName)))
		f.Func().Id("NewOwned"+r.Go).Params().Params(jen.Op("*").Id(outer), jen.Error()).Block(
			jen.Var().Id("h").Add(raw),
			jen.If(jen.Err().Op(":=").Id(simple.GoName).Call(jen.Op("&").Id("h")), jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
			jen.Return(jen.Id("Own"+r.Go).Call(jen.Id("h")), jen.Nil()),
		)
	}
	recv := jen.Id("o").Op("*").Id(outer)
	f.Add(docComment(fmt.Sprintf("Handle returns the raw %s, or its zero value once closed.", r.Type)))
	f.Func().Params(recv).Id("Handle").Params().Add(raw).Block(
		jen.If(jen.Id("o").Op("==").Nil()).Block(jen.Return(jen.Lit(0))),
		jen.Return(jen.Id("o").Dot("o").Dot("Handle").Call()),
	)
	// owner.Close returns errs.Closed: the error of every second Close in gocuda.
	closed := "cuda.ErrClosed"
	f.Add(docComment(fmt.Sprintf("Close releases the %s with %s now and returns its error. Closing again, or\nclosing a nil %s, returns an error that matches %s and resource.ErrReleased.", r.Type, r.Destroy, outer, closed)))
	f.Func().Params(recv).Id("Close").Params().Error().Block(
		jen.Var().Id("owned").Qual(ownerImport, "Owned").Types(raw),
		jen.If(jen.Id("o").Op("!=").Nil()).Block(jen.Id("owned").Op("=").Id("o").Dot("o")),
		jen.Return(jen.Id("owned").Dot("Close").Call(jen.Lit(l.Spec.Name+": "+outer))),
	)
}
