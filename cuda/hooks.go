package cuda

import (
	"runtime"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/internal/rescore"
	"github.com/gocuda/gocuda/resource"
)

// selfSwitching is the resource context of this package's own releases: they make
// their context current themselves, inside their cgo calls (the in* functions), so
// running them needs no thread lock and no context switch; they enter the context
// themselves, and report resource.ErrContextDestroyed when it is gone.
type selfSwitching struct{ c *ctxState }

// res returns the resource context for a release of this package in c.
func (c *ctxState) res() resource.Context { return selfSwitching{c} }

// ResourceDirect makes selfSwitching a rescore.DirectContext: resource runs the
// package's own releases directly, without the Run hook and the closure it takes.
func (sc selfSwitching) ResourceDirect() (alive bool) { return !sc.c.dead.Load() }

// resource finds the method by a type assertion: a change of its signature would
// silently send every release through the Run hook.
var _ rescore.DirectContext = selfSwitching{}

// currentContext maps the thread's current context to its state (a
// resource.Context: the hooks see contexts as any).
func currentContext() any {
	var h cudaraw.CUcontext
	if cudaraw.CtxGetCurrent(&h) != nil || h == 0 {
		return nil
	}
	if v, ok := contexts.Load(h); ok {
		return v.(*ctxState)
	}
	return nil
}

// installHooks connects resource to contexts: releases run with their context
// current, and releases of a destroyed context are dropped. The hooks go through
// internal/rescore so that only this package can install them.
func installHooks() {
	rescore.SetContextHooks(rescore.ContextHooks{
		Current: currentContext,
		// Only the contexts Current reports come here: the package's own releases
		// (selfSwitching) are DirectContexts, which resource runs without hooks.
		Alive: func(ctx any) bool {
			c, ok := ctx.(*ctxState)
			return !ok || !c.dead.Load()
		},
		Run: func(ctx any, f func()) error {
			c, ok := ctx.(*ctxState)
			if !ok {
				f()
				return nil
			}
			if c.enter() != nil {
				return resource.ErrContextDestroyed
			}
			defer c.exit()
			// Push and pop: the driver restores what was current (which may be a
			// context destroyed since: not ours to set again).
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if err := cudaraw.CtxPushCurrent(c.h); err != nil {
				return err
			}
			f()
			var popped cudaraw.CUcontext
			return cudaraw.CtxPopCurrent(&popped)
		},
	})
}
