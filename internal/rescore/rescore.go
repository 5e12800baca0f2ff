// Package rescore is the one hook package of the module: where package resource,
// which imports nothing of CUDA, meets the packages above it. Everything here is
// a call that runs upward, from resource (or the cuda package) into packages it
// cannot import, so it cannot be an import:
//
//   - resource's implementation of the context hooks and the capture gate, which
//     resource hands over at initialization (Install) and the cuda package calls
//     (SetContextHooks once it has initialized the driver; BeginCapture and
//     EndCapture around a stream capture);
//   - the drops that run at the start of every resource.Reclaim (OnReclaim): the
//     caches above resource (the cuda package's staging and bounce buffers, the
//     handles that streams keep, the library packages' idle handles) let go of
//     what they hold, so that the Reclaim that runs them destroys it;
//   - the drops that run when the cuda package destroys a context
//     (OnContextDestroy): cudalib forgets the context's idle handles and settings.
//
// It is plumbing between the packages of this module, not API: in resource's
// public API a wrapper library could install hooks of its own and break the cuda
// package's. Package resource imports this package (not the reverse, or resource
// could not be imported by it). Every importer of this package that calls
// SetContextHooks or the capture gate links resource too (the cuda package imports
// both), so by the time they are called, resource's init has run.
package rescore

import "sync"

// ContextHooks connect package resource to a context-aware layer (the cuda package)
// without importing it. Any field may be nil. A context is a resource.Context: an
// opaque value chosen by the cuda package, which must not reference the objects
// whose releases are registered under it, or they would never become unreachable;
// nil means "no context".
type ContextHooks struct {
	// Current returns the context current on the calling goroutine's thread, or
	// nil. It is called once per registration (unless resource.WithContext is
	// given), so it should be cheap.
	Current func() any

	// Alive reports whether ctx still exists. Releases registered under a context
	// that no longer exists are dropped (not run) and counted in Stats.Dropped: the
	// driver freed their resources with the context. A nil Alive treats every
	// context as alive.
	Alive func(ctx any) bool

	// Run calls f exactly once with ctx current on the calling thread and restores
	// the previous current context afterwards. It returns an error if ctx could not
	// be made current, in which case f must not have been called; an error wrapping
	// resource.ErrContextDestroyed drops the release as Alive returning false does.
	// f never panics. A nil Run calls f without changing the current context.
	Run func(ctx any, f func()) error
}

// DirectContext is an optional interface of a context whose release functions make
// it current by themselves (the cuda package's own releases do, inside their cgo
// calls), so that they need no ContextHooks.Run. Releases registered under such a
// context run without calling Alive and Run: directly on the releasing goroutine,
// or, when ResourceDirect reports that the context no longer exists, dropped as with
// Alive (counted in Stats.Dropped). This saves the closure that calling Run takes,
// and its allocation, on every release. ResourceDirect must be cheap; a panic in it
// is a failed release. The context may still be destroyed between ResourceDirect and
// the release: a release function that finds it gone returns an error wrapping
// resource.ErrContextDestroyed, and is dropped the same way (this holds for every
// release function, whatever its context).
//
// The method is exported because the cuda package's context type implements it; the
// type that does is unexported there, so it shows in no public API.
type DirectContext interface {
	ResourceDirect() (alive bool)
}

// Core is package resource's implementation of the functions of this package,
// bound to its default queue. Every field is required.
type Core struct {
	// SetContextHooks, BeginCapture and EndCapture implement the functions of the
	// same names.
	SetContextHooks func(ContextHooks)
	BeginCapture    func() error
	EndCapture      func()
}

// core is set once, during package resource's initialization, which completes
// before any importer of resource runs: reading it needs no synchronization.
var core *Core

// Install hands over package resource's implementation. Only resource's init calls
// it; a second call panics, since two implementations would mean two release
// queues with one set of hooks.
func Install(c Core) {
	if c.SetContextHooks == nil || c.BeginCapture == nil || c.EndCapture == nil {
		panic("rescore: Install with a nil function")
	}
	if core != nil {
		panic("rescore: Install called twice")
	}
	core = &c
}

// installed returns the implementation, or panics with the reason it is missing.
func installed() *Core {
	if core == nil {
		panic("rescore: package resource is not linked into the program (nothing called Install)")
	}
	return core
}

// SetContextHooks installs the context hooks used by later registrations (Current)
// and by every release that runs from then on (Alive, Run). The cuda package calls
// it once, when it initializes the driver; the zero ContextHooks uninstalls them.
func SetContextHooks(h ContextHooks) { installed().SetContextHooks(h) }

// BeginCapture closes the capture gate: until the matching EndCapture, nothing is
// released (lanes keep queuing, resource.Drain and resource.Reclaim do nothing,
// Reclaim returning resource.ErrCaptureInProgress, and Registration.Release
// defers), because releasing during a stream capture (cuMemFree and friends) would
// invalidate the capture. Captures nest; the gate reopens when the last one ends.
// The cuda package calls it before it starts a stream capture.
//
// It first waits for releases already running on other goroutines (a routine
// drain, an explicit Release), which are short, but it does not wait for Reclaim:
// while Reclaim runs releases (which may block for hundreds of milliseconds) it
// fails with resource.ErrReclaimInProgress and the gate stays open.
func BeginCapture() error { return installed().BeginCapture() }

// EndCapture ends a capture started by a successful BeginCapture. When the last
// capture ends, the non-blocking releases queued meanwhile (including deferred
// explicit releases) run on the calling goroutine before it returns; blocking ones
// stay queued for Reclaim. It panics without a matching BeginCapture.
func EndCapture() { installed().EndCapture() }

// The drops that run at every resource.Reclaim (OnReclaim), in the order they were
// added.
var (
	reclaimMu sync.Mutex
	reclaims  []func()
)

// OnReclaim adds drop, to run at the start of every resource.Reclaim (which the cuda
// package's out-of-memory path calls too), before it collects garbage. drop must not
// call CUDA: it only lets go of references, and the owners' releases then run in
// that Reclaim.
func OnReclaim(drop func()) {
	reclaimMu.Lock()
	reclaims = append(reclaims, drop)
	reclaimMu.Unlock()
}

// RunReclaim runs the drops OnReclaim added: package resource calls it at the start
// of every Reclaim.
func RunReclaim() {
	reclaimMu.Lock()
	fs := append([]func(){}, reclaims...)
	reclaimMu.Unlock()
	for _, f := range fs {
		f()
	}
}
