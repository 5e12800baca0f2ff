package resource

import (
	"errors"
	"reflect"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/gocuda/gocuda/internal/errs"
)

// Errors returned by this package.
var (
	// ErrReleased is returned by Registration.Release when the registration
	// was already released (explicitly or through the finalizer path) or
	// cancelled. It is harmless: it only says that Release did nothing.
	ErrReleased = errs.ErrReleased

	// ErrReclaimInProgress is the error of closing the capture gate (the
	// cuda package, before a graph capture) while Reclaim is running
	// releases, which may block for hundreds of milliseconds: starting the
	// capture fails instead of waiting for them.
	ErrReclaimInProgress = errors.New("resource: reclaim in progress")

	// ErrCaptureInProgress is returned by Reclaim when the capture gate is
	// closed (a graph capture is in progress or about to start): nothing
	// may be released until the last capture ends, so Reclaim released
	// nothing.
	ErrCaptureInProgress = errors.New("resource: graph capture in progress")

	// ErrContextDestroyed is returned by Registration.Release when the
	// context captured at registration no longer exists; the release is
	// dropped and counted in Stats.Dropped. A release function (or the
	// cuda package's context hook) returns it, or wraps it, to report the
	// same thing: the context went with the resource, and nothing is left
	// to release.
	ErrContextDestroyed = errors.New("resource: context destroyed")
)

// Registration states. Every transition is a CAS; the goroutine that wins
// the transition to stateDone owns the release (runs it or cancels it).
const (
	stateArmed    uint32 = iota // finalizer set, nothing happened yet
	stateQueued                 // finalizer fired, record waiting in a lane
	stateDeferred               // Release during a capture, record waiting in a lane
	stateDone                   // claimed: released, being released, or cancelled
)

// Registration is the handle returned by ResourceFinalizer. It is the
// record that the finalizer pushes onto a lane, so queuing allocates
// nothing. Use Release for a deterministic Close, Cancel to drop the
// release altogether. All methods are safe for concurrent use and on a
// nil *Registration. The zero Registration is one that was never
// registered (the At option registers one in place): it behaves as a
// released one.
type Registration struct {
	next     *Registration // lane link (Treiber stack)
	q        *queue
	state    atomic.Uint32
	blocking bool // lane: blocking releases wait for Reclaim

	// addr is obj's address, hidden from the garbage collector so that the
	// registration (usually stored inside obj) does not keep obj alive. It
	// is turned back into a pointer only by the goroutine that moved the
	// state out of stateArmed, or by Finalized; see target.
	addr uintptr
	// obj holds the object strongly once the finalizer fired (resurrection)
	// or once Release deferred it. Accessed atomically.
	obj unsafe.Pointer

	fn   releaser // the release function with its per-type operations
	kind string
	ctx  Context
	site *callSite // creation stack, only in leak-tracking mode
}

// Option configures one registration. Options are plain values: passing
// them allocates nothing.
type Option struct {
	set  uint8
	kind string
	ctx  Context
	skip int
	q    *queue
	at   *Registration // At: the registration to fill in
	fin  any           // At: the caller's finalizer, a func(*T)
}

const (
	optKind uint8 = 1 << iota
	optCtx
	optSkip
	optQueue
	optAt
)

// Kind labels the resource (for example "cuMemFree") in failure reports,
// leak reports and diagnostics. Without it the Go type name of the object
// is used.
func Kind(name string) Option { return Option{set: optKind, kind: name} }

// WithContext registers the release under ctx instead of the context
// current on the calling thread (as the cuda package reports it). A nil ctx
// means "no context": the release then runs without making any context
// current.
func WithContext(ctx Context) Option { return Option{set: optCtx, ctx: ctx} }

// CallerSkip makes leak reports attribute the registration n frames further
// up the stack, so that a wrapper library (for example a Malloc function)
// can report its caller as the creation site instead of itself.
func CallerSkip(n int) Option { return Option{set: optSkip, skip: n} }

// At makes ResourceFinalizer register in place, for objects allocated at a
// high rate: the registration is *r, a field of the object (it must lie
// inside the object's memory), and ResourceFinalizer returns r and
// allocates nothing. fin becomes the object's runtime finalizer: a
// function that the caller declares at top level and whose body is
// r.Finalized() for the object's registration:
//
//	func finalizeHandle(h *Handle) { h.reg.Finalized() }
//
// fin must be a top-level function, not a closure: a func value that
// captures nothing costs no allocation, whereas a closure would cost one
// and, if it referenced the object or r, would keep the object reachable
// forever (a finalizer is a root of the garbage collector), so the release
// would never run. The generic constructor keeps fin's type, so that
// ResourceFinalizer can check that fin takes the registered object.
//
// *r must be the zero Registration and must not be copied afterwards.
// At panics if r or fin is nil.
func At[T any](r *Registration, fin func(*T)) Option {
	if r == nil || fin == nil {
		panic("resource.At: nil registration or finalizer")
	}
	return Option{set: optAt, at: r, fin: fin}
}

// withQueue registers on an isolated queue (tests).
func withQueue(q *queue) Option { return Option{set: optQueue, q: q} }

// ResourceFinalizer arranges for f(obj) to run exactly once, on an ordinary
// goroutine, after obj becomes unreachable, unless the returned
// Registration is released or cancelled first. f is either a func(*T) or,
// for release functions that can fail, a func(*T) error: a non-nil error
// is treated like a panic, counted in Stats.Failed and reported through
// the failure handler (or returned by Registration.Release on the explicit
// path). Both forms are inferred from f, whether it is a func literal, a
// method expression such as (*Handle).destroy or a method value.
//
// When obj becomes unreachable the runtime finalizer only pushes the
// registration onto a lock-free queue; f never runs on the runtime's
// finalizer goroutine. If blocking is false (the release returns in
// microseconds, like cuMemFreeAsync or cuEventDestroy), f runs at the next
// Drain or within about 100 ms on a background goroutine. If blocking is
// true (the release may wait for the GPU, like cuMemFree), f is held until
// the next Reclaim. In both cases f runs with the context captured at
// registration current (see the package documentation, Contexts), and
// never while a graph capture is in progress.
//
// The os.File pattern: call Release from the object's Close, and the
// finalizer is only the fallback for objects that were never closed:
//
//	h := &Handle{raw: create()}
//	h.reg = resource.ResourceFinalizer(func(h *Handle) { destroy(h.raw) }, h, true)
//	...
//	func (h *Handle) Close() error {
//		err := h.reg.Release()
//		runtime.KeepAlive(h) // h must not become unreachable during Release
//		return err
//	}
//
// Options label the resource (Kind), pick its context (WithContext), move
// the creation site of leak reports outward (CallerSkip), and register in
// place without allocating (At). A registration costs two small
// allocations (the Registration and the finalizer's closure); with At, for
// objects allocated at a high rate, it costs none:
//
//	type Handle struct {
//		reg resource.Registration
//		raw uintptr
//	}
//
//	func finalizeHandle(h *Handle) { h.reg.Finalized() }
//
//	h := &Handle{raw: create()}
//	resource.ResourceFinalizer((*Handle).destroy, h, false, resource.At(&h.reg, finalizeHandle))
//
// ResourceFinalizer uses runtime.SetFinalizer on obj, with its rules:
// obj must point to the start of a heap allocation, must not already have
// a finalizer (the runtime aborts the program otherwise), and must not be
// part of a reference cycle (a cycle containing obj is never collected, so
// f never runs). f must not reference obj (through a closure or otherwise),
// or obj stays reachable forever; it receives obj as its argument. Package
// level variables never get finalizers, and objects smaller than 16 bytes
// without pointers may share a tiny allocation block with other objects,
// which can delay their finalizer indefinitely: give such types a pointer
// field (the *Registration does).
//
// ResourceFinalizer panics if f or obj is nil or if T has size zero (zero
// size objects cannot carry finalizers), and, with At, if the registration
// is already registered, does not lie inside obj, or if the finalizer does
// not take a *T.
func ResourceFinalizer[T any, F func(*T) | func(*T) error](f F, obj *T, blocking bool, opts ...Option) *Registration {
	// A func value converts to an interface without allocating.
	var fn releaser
	switch g := any(f).(type) {
	case func(*T):
		if g != nil {
			fn = plainFn[T](g)
		}
	case func(*T) error:
		if g != nil {
			fn = errFn[T](g)
		}
	}
	if fn == nil {
		panic("resource.ResourceFinalizer: nil release function")
	}
	checkObject(obj)
	o := merge(opts)
	if o.set&optAt == 0 {
		return register(fn, obj, blocking, &o)
	}
	fin, ok := o.fin.(func(*T))
	if !ok {
		panic("resource.ResourceFinalizer: finalizer " + reflect.TypeOf(o.fin).String() +
			" does not take " + reflect.TypeFor[*T]().String())
	}
	registerAt(o.at, fn, obj, fin, blocking, &o)
	return o.at
}

//go:noinline
func register[T any](fn releaser, obj *T, blocking bool, o *Option) *Registration {
	r := new(Registration)
	if r.init(fn, unsafe.Pointer(obj), blocking, o) {
		// 0 Callers, 1 captureSite, 2 register, 3 ResourceFinalizer, 4 its caller.
		r.site = captureSite(4 + o.skip)
	}
	runtime.SetFinalizer(obj, func(p *T) { r.q.fire(r, unsafe.Pointer(p)) })
	return r
}

//go:noinline
func registerAt[T any](r *Registration, fn releaser, obj *T, fin func(*T), blocking bool, o *Option) {
	if off := uintptr(unsafe.Pointer(r)) - uintptr(unsafe.Pointer(obj)); off >= unsafe.Sizeof(*obj) ||
		unsafe.Sizeof(*obj)-off < unsafe.Sizeof(*r) {
		panic("resource.ResourceFinalizer: registration outside the object")
	}
	if r.q != nil {
		panic("resource.ResourceFinalizer: registration already in use")
	}
	if r.init(fn, unsafe.Pointer(obj), blocking, o) {
		// 0 Callers, 1 captureSite, 2 registerAt, 3 ResourceFinalizer, 4 its caller.
		r.site = captureSite(4 + o.skip)
	}
	runtime.SetFinalizer(obj, fin)
}

// Finalized is the body of the finalizer given to At: it queues the
// release of the object that r is registered for (or does nothing if r was
// released, cancelled or never registered), allocating nothing and calling
// nothing else. Call it from that finalizer only.
//
// It needs no object argument: r lies inside the object (At requires it),
// so the receiver keeps the object alive until the queued record holds it.
func (r *Registration) Finalized() {
	if r != nil && r.q != nil {
		r.q.fire(r, r.target())
	}
}

// checkObject panics for objects that cannot carry a finalizer.
func checkObject[T any](obj *T) {
	if obj == nil {
		panic("resource.ResourceFinalizer: nil object")
	}
	if unsafe.Sizeof(*obj) == 0 {
		panic("resource.ResourceFinalizer: zero-size object " + reflect.TypeFor[T]().String() + " cannot have a finalizer")
	}
}

// merge folds opts into one Option; of each setting the last one wins.
func merge(opts []Option) Option {
	var o Option
	for i := range opts {
		op := &opts[i]
		if op.set&optKind != 0 {
			o.kind = op.kind
		}
		if op.set&optCtx != 0 {
			o.ctx = op.ctx
		}
		if op.set&optSkip != 0 {
			o.skip = op.skip
		}
		if op.set&optQueue != 0 {
			o.q = op.q
		}
		if op.set&optAt != 0 {
			o.at, o.fin = op.at, op.fin
		}
		o.set |= op.set
	}
	return o
}

// init fills in a new registration of obj with the merged options o and
// counts it. It reports whether leak tracking is on: the caller then
// records the creation site.
func (r *Registration) init(fn releaser, obj unsafe.Pointer, blocking bool, o *Option) (track bool) {
	q := o.q
	if q == nil {
		q = &std
	}
	q.start()
	r.q = q
	r.blocking = blocking
	r.addr = uintptr(obj)
	r.fn = fn
	r.kind = o.kind
	if o.set&optCtx != 0 {
		r.ctx = o.ctx
	} else if h := q.hooks.Load(); h != nil && h.Current != nil {
		r.ctx = h.Current()
	}
	q.registered.Add(1)
	return q.leakOn.Load()
}

// target returns the registered object. Only the goroutine that moved the
// state out of stateArmed may call it: from then on obj cannot be freed,
// because it either still has its finalizer, sits in the runtime's
// finalizer queue, or was stored into r.obj by fire before fire tried (and
// failed) the same transition, and r itself is alive in the caller.
// Finalized calls it too: there r lies inside obj, which the finalizer
// running keeps alive through r.
func (r *Registration) target() unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&r.addr))
}

// lane returns the index of r's lane.
func (r *Registration) lane() int {
	if r.blocking {
		return laneBlocking
	}
	return laneNonBlocking
}

// Cancel stops the release: f will not run, through the finalizer or
// through Release, and obj's finalizer is removed. It reports whether it
// stopped anything: false if the registration was already released, is
// being released, or was cancelled. A release that the finalizer queued but
// that has not started yet is still cancelled.
func (r *Registration) Cancel() bool {
	if r == nil || r.q == nil {
		return false
	}
	for {
		switch r.state.Load() {
		case stateArmed:
			if r.state.CompareAndSwap(stateArmed, stateDone) {
				r.fn.unset(r.target())
				r.fn, r.ctx = nil, nil
				r.q.cancelled.Add(1)
				return true
			}
		case stateQueued:
			if r.state.CompareAndSwap(stateQueued, stateDone) {
				// The record stays in its lane; the drainer skips it.
				r.q.lanes[r.lane()].pending.Add(-1)
				atomic.StorePointer(&r.obj, nil)
				r.fn, r.ctx = nil, nil
				r.q.cancelled.Add(1)
				return true
			}
		default:
			return false
		}
	}
}

// Release runs the release function now, synchronously, with the
// registration's context current, and removes obj's finalizer: the
// explicit Close path. f runs at most once over the registration's life;
// later calls (and calls after Cancel or after the finalizer path ran f)
// return ErrReleased and do nothing. Release returns f's error, a
// *PanicError if f panicked, or ErrContextDestroyed if the context is gone
// (f is then not run and the release is counted as dropped). Failures are
// counted but not sent to the failure handler, since the caller gets them.
// An explicit release never counts as a leak.
//
// While a graph capture is in progress (or about to start) the release is
// deferred instead: it is queued, runs when the last capture ends, and
// Release returns nil; a failure is then reported through the failure
// handler. (If the finalizer had already queued it in the blocking lane,
// it runs at the next Reclaim instead.)
//
// As with any finalizer, the object may become unreachable, and its
// finalizer fire, while a method that only uses its registration is still
// running. If the finalizer queued the release but it has not started,
// Release still runs it here, synchronously; to rule out that the
// background worker started it first (Release then returns ErrReleased),
// keep the object alive until Release returns:
//
//	func (h *Handle) Close() error {
//		err := h.reg.Release()
//		runtime.KeepAlive(h)
//		return err
//	}
func (r *Registration) Release() error {
	if r == nil || r.q == nil {
		return ErrReleased
	}
	q := r.q
	if !q.enter() {
		return r.deferRelease()
	}
	for {
		switch r.state.Load() {
		case stateArmed:
			if r.state.CompareAndSwap(stateArmed, stateDone) {
				p := r.target()
				r.fn.unset(p)
				return q.runExplicit(r, p)
			}
		case stateQueued:
			if r.state.CompareAndSwap(stateQueued, stateDone) {
				// Queued by the finalizer, not started: run it here. The
				// record stays in its lane; the drainer skips it.
				q.lanes[r.lane()].pending.Add(-1)
				return q.runExplicit(r, atomic.LoadPointer(&r.obj))
			}
		default:
			q.leave(false)
			return ErrReleased
		}
	}
}

// deferRelease queues an explicit release while the capture gate is closed.
func (r *Registration) deferRelease() error {
	q := r.q
	for {
		switch r.state.Load() {
		case stateArmed:
			if r.state.CompareAndSwap(stateArmed, stateDeferred) {
				p := r.target()
				r.fn.unset(p)
				atomic.StorePointer(&r.obj, p)
				q.lanes[laneNonBlocking].pending.Add(1)
				q.push(laneNonBlocking, r, true)
				return nil
			}
		case stateQueued:
			// Already in a lane: it now runs as an explicit release.
			if r.state.CompareAndSwap(stateQueued, stateDeferred) {
				return nil
			}
		default:
			return ErrReleased
		}
	}
}

// releaser is a release function together with the per-type operations
// a Registration needs without being generic itself. Its implementations
// are func types, so converting a release function to a releaser does not
// allocate.
type releaser interface {
	call(p unsafe.Pointer) error
	unset(p unsafe.Pointer)
	name() string
}

type plainFn[T any] func(*T)

func (f plainFn[T]) call(p unsafe.Pointer) error {
	f((*T)(p))
	return nil
}

func (plainFn[T]) unset(p unsafe.Pointer) { runtime.SetFinalizer((*T)(p), nil) }

func (plainFn[T]) name() string { return reflect.TypeFor[T]().String() }

type errFn[T any] func(*T) error

func (f errFn[T]) call(p unsafe.Pointer) error { return f((*T)(p)) }

func (errFn[T]) unset(p unsafe.Pointer) { runtime.SetFinalizer((*T)(p), nil) }

func (errFn[T]) name() string { return reflect.TypeFor[T]().String() }

// kindName returns the label used in reports. It must be called before
// the registration's fields are cleared.
func (r *Registration) kindName() string {
	if r.kind != "" || r.fn == nil {
		return r.kind
	}
	return r.fn.name()
}
