package resource

// Context is an opaque CUDA context handle as seen by this package. The
// cuda package decides what it is (typically a pointer to its context
// type); it must not reference the objects whose releases are registered
// under it, or they would never become unreachable. A nil Context means
// "no context".
type Context any

// ContextHooks connect this package to a context-aware layer (the cuda
// package) without importing it. Any field may be nil.
type ContextHooks struct {
	// Current returns the context current on the calling goroutine's
	// thread, or nil. It is called once per registration (unless the
	// WithContext option is given), so it should be cheap.
	Current func() Context

	// Alive reports whether ctx still exists. Releases registered under a
	// context that no longer exists are dropped (not run) and counted in
	// Stats.Dropped. A nil Alive treats every context as alive.
	Alive func(ctx Context) bool

	// Run calls f exactly once with ctx current on the calling thread and
	// restores the previous current context afterwards. It returns an
	// error if ctx could not be made current, in which case f must not
	// have been called; returning an error wrapping ErrContextDestroyed
	// drops the release as Alive returning false does. f never panics. A
	// nil Run calls f without changing the current context.
	Run func(ctx Context, f func()) error
}

// DirectContext is an optional interface of a Context whose release
// functions make it current by themselves (the cuda package's own releases
// do, inside their cgo calls), so that they need no ContextHooks.Run.
// Releases registered under such a context run without calling Alive and
// Run: directly on the releasing goroutine, or, when ResourceDirect reports
// that the context no longer exists, dropped as with Alive (counted in
// Stats.Dropped). This saves the closure that calling Run takes, and its
// allocation, on every release. ResourceDirect must be cheap; a panic in it
// is a failed release. The context may still be destroyed between
// ResourceDirect and the release: a release function that finds it gone
// returns an error wrapping ErrContextDestroyed, and is dropped the same way
// (this holds for every release function, whatever its context).
type DirectContext interface {
	ResourceDirect() (alive bool)
}

// SetContextHooks installs the context hooks used by later registrations
// (Current) and by every release that runs from now on (Alive, Run). It is
// meant to be called once, by the cuda package's initialization; the zero
// ContextHooks uninstalls them.
func SetContextHooks(h ContextHooks) { std.setContextHooks(h) }

func (q *queue) setContextHooks(h ContextHooks) {
	if h.Current == nil && h.Alive == nil && h.Run == nil {
		q.hooks.Store(nil)
		return
	}
	q.hooks.Store(&h)
}

// callAlive calls an Alive hook, turning a panic into an error.
func callAlive(alive func(Context) bool, ctx Context) (ok bool, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = newPanicError(v)
		}
	}()
	return alive(ctx), nil
}

// callDirect calls a DirectContext's ResourceDirect, turning a panic into
// an error.
func callDirect(ctx DirectContext) (alive bool, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = newPanicError(v)
		}
	}()
	return ctx.ResourceDirect(), nil
}

// callRun calls a Run hook, turning a panic into an error.
func callRun(run func(Context, func()) error, ctx Context, f func()) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = newPanicError(v)
		}
	}()
	return run(ctx, f)
}
