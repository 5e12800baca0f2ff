package resource

import "github.com/gocuda/gocuda/internal/rescore"

// Context is an opaque CUDA context handle as seen by this package. The
// cuda package decides what it is (typically a pointer to its context
// type); it must not reference the objects whose releases are registered
// under it, or they would never become unreachable. A nil Context means
// "no context".
type Context any

// The context hooks and the capture gate are the cuda package's business
// only: they are reached through internal/rescore, which this package
// imports (it cannot import this one) and hands its implementation to here.
func init() {
	rescore.Install(rescore.Core{
		SetContextHooks: std.setContextHooks,
		BeginCapture:    std.beginCapture,
		EndCapture:      std.endCapture,
	})
}

// setContextHooks installs h (rescore.SetContextHooks); the zero hooks
// uninstall them, so that a release costs no hook load.
func (q *queue) setContextHooks(h rescore.ContextHooks) {
	if h.Current == nil && h.Alive == nil && h.Run == nil {
		q.hooks.Store(nil)
		return
	}
	q.hooks.Store(&h)
}

// callAlive calls an Alive hook, turning a panic into an error.
func callAlive(alive func(any) bool, ctx Context) (ok bool, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = newPanicError(v)
		}
	}()
	return alive(ctx), nil
}

// callDirect calls a DirectContext's ResourceDirect, turning a panic into
// an error.
func callDirect(ctx rescore.DirectContext) (alive bool, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = newPanicError(v)
		}
	}()
	return ctx.ResourceDirect(), nil
}

// callRun calls a Run hook, turning a panic into an error.
func callRun(run func(any, func()) error, ctx Context, f func()) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = newPanicError(v)
		}
	}()
	return run(ctx, f)
}
