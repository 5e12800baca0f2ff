// Package resource runs the release functions of GPU resources (device
// memory, streams, library handles) whose Go wrappers became unreachable,
// without ever calling into CUDA from a finalizer.
//
// It is pure Go: no cgo, no CUDA import. The cuda package calls Drain and
// Reclaim, and connects its contexts (and, for the graph work to come, the
// capture gate) through an internal package, so that no other package can
// install hooks of its own; any wrapper library, including third-party
// ones, registers its handles with ResourceFinalizer.
//
// # Why finalizers must not call CUDA
//
// Many CUDA release calls wait for the GPU. Measured on a busy device:
//
//	call                           caller blocked   other threads' launches
//	cuMemFree                      ~499 ms          stalled ~479 ms
//	cuMemFreeHost                  ~499 ms          stalled ~479 ms
//	cuMemHostUnregister            ~499 ms          stalled ~479 ms
//	curandDestroyGenerator         ~499 ms          stalled ~479 ms
//	cudnnDestroy                   ~499 ms          stalled ~479 ms
//	cublasDestroy                  blocks           -
//	cufftDestroy                   blocks           -
//	cuModuleUnload                 blocks           -
//	cuMemFreeAsync, cuEventDestroy,
//	cuStreamDestroy, ...           µs               -
//
// Go runs all finalizers on a single runtime goroutine, so one such call
// in a finalizer stalls every other finalizer of the process (os.File's
// included) for half a second, and the device's other threads with it. So
// here the finalizer only pushes a record onto a lock-free queue (a
// Treiber stack: one CAS, no lock, no allocation, no CUDA), and the release
// runs later, on an ordinary goroutine.
//
// # Two lanes
//
// ResourceFinalizer's blocking argument picks the lane. Pass true when the
// release may wait for the GPU (the first two groups of the table), false
// when it returns in microseconds.
//
// Non-blocking releases run promptly: at the next Drain, which the cuda
// package calls at every allocation and synchronization (a single atomic
// load when nothing is queued), and otherwise within about 100 ms of the
// finalizer queuing them, on a background goroutine. That goroutine sleeps
// while there is nothing to do; the first finalizer that queues something
// wakes it (a non-blocking send on a one-slot channel), and it waits 100 ms
// so that a burst of finalizers is released as one batch. (The finalizer
// itself runs only after a garbage collection has found the object
// unreachable.)
//
// Blocking releases are held until Reclaim, so that they never stall the
// process at an arbitrary moment.
//
// # Reclaim
//
// Reclaim releases, in the call itself, everything that has become
// unreachable: it runs a garbage collection, waits until the runtime has
// run the finalizers that collection queued, then runs both lanes, and
// repeats while that freed something (objects referenced only by objects
// being released need one more cycle). The allocator calls it on
// out-of-memory before retrying. No lock is held while collecting garbage
// or running releases.
//
// # Registering, and the explicit release
//
// ResourceFinalizer(f, obj, blocking, options...) is the one way to
// register: f releases obj, and is a func(*T) or, when the release can
// fail, a func(*T) error. It returns a *Registration. Like os.File, a
// wrapper should offer Close, which calls Registration.Release: the
// release runs now, exactly once, and the finalizer is removed; the
// finalizer path is only the fallback for objects nobody closed:
//
//	type Handle struct {
//		raw uintptr
//		reg *resource.Registration
//	}
//
//	func NewHandle() *Handle {
//		h := &Handle{raw: create()}
//		h.reg = resource.ResourceFinalizer((*Handle).destroy, h, true, resource.Kind("destroy"))
//		return h
//	}
//
//	func (h *Handle) destroy() error { return destroy(h.raw) }
//
//	func (h *Handle) Close() error {
//		err := h.reg.Release()
//		runtime.KeepAlive(h) // h must not become unreachable during Release
//		return err
//	}
//
// Registration.Cancel drops the release altogether (for example when
// ownership of the handle moves elsewhere). Release and the finalizer path
// never both run f.
//
// The options are Kind (the label in reports), WithContext (the context of
// the release, instead of the current one), CallerSkip (the creation site
// of leak reports, for wrappers of wrappers) and At (registration in
// place, below).
//
// Release removes the finalizer (runtime.SetFinalizer(obj, nil)), which
// with setting it is most of the cost of a registration. Leaving it armed
// instead, for the finalizer to find the registration released and do
// nothing, was measured and rejected: the runtime's work for an object
// whose finalizer fires (queuing it, running it, and keeping the object
// for one more collection) costs several times more than removing the
// finalizer (BenchmarkRegisterRelease: about 1.6 µs instead of 0.45 µs).
//
// For objects allocated at a high rate (the cuda package's buffers), the At
// option registers without allocating: the Registration is a field of the
// object, and the finalizer a top-level function of the caller's (not a
// closure) whose body is Registration.Finalized.
//
// # Contexts
//
// At registration the calling thread's current CUDA context is captured
// (the cuda package reports it; WithContext gives one explicitly), and the
// release later runs with that context current. A release whose context
// has since been destroyed is dropped, not run, and counted in
// Stats.Dropped: the driver freed its resources with the context; so is a
// release function that finds the context gone and returns an error
// wrapping ErrContextDestroyed. Releases of the cuda package's own objects
// make their context current themselves, inside their cgo calls, and run
// without a context switch here. The hooks behind this are internal to the
// module: only the cuda package installs them, once, when it initializes
// the driver. Without them (a program that never initializes the cuda
// package) releases run with no context made current.
//
// # Graph capture
//
// Releasing (cuMemFree and friends) while a stream capture is in progress
// would invalidate the capture, so this package has a capture gate, which
// exists for the graph work to come: the cuda package is to close it
// before it starts a stream capture and reopen it after (internally;
// nothing closes it yet). While the gate is closed nothing is released:
// lanes keep queuing, Drain and Reclaim do nothing (Reclaim returns
// ErrCaptureInProgress) and an explicit Release is deferred. When the last
// capture ends, the non-blocking lane runs. Closing the gate waits for
// releases already running (they are short), except that it fails with
// ErrReclaimInProgress instead of waiting while Reclaim runs releases,
// which may take hundreds of milliseconds. Stats.Captures counts the
// captures in progress.
//
// # Failures
//
// A release function that panics (or, in its func(*T) error form, returns
// an error) never takes the process down and never stops the other
// releases. The failure is counted in Stats.Failed and, when no caller can
// receive it, reported to the handler set with SetFailureHandler (by
// default a log/slog Error record with the resource kind).
//
// # Status and leaks
//
// Status returns counters (registered, pending and released per lane,
// explicit, cancelled, failed, dropped) for tests, diagnostics and device
// reports.
//
// Leak-tracking mode (environment variable GOCUDA_LEAKS=1, or
// EnableLeakTracking) records the creation stack of every registration and
// counts, per creation site, the objects that were released by the
// finalizer path instead of an explicit Release; Leaks reports them, and
// resourcetest.CheckLeaks fails a test that leaked. When off it costs one
// atomic load per registration and captures no stack.
//
// # SetFinalizer, not AddCleanup
//
// The release function receives the object itself (f(obj)). With
// runtime.AddCleanup the cleanup's argument must not reference the object
// (it would keep it alive forever), so the object could not be handed to f.
// This package therefore uses runtime.SetFinalizer, with its semantics:
//
//   - The object is resurrected for f: the queued record holds it until f
//     has run, and its memory is freed by a later garbage collection. f must
//     not store it anywhere.
//   - An object can have only one finalizer: registering an object that
//     already has one (through this package or runtime.SetFinalizer)
//     aborts the program, as SetFinalizer does. The object must also be the
//     start of a heap allocation.
//   - An object that is part of a reference cycle is never finalized, so a
//     cycle through a registered object leaks its resource; so does a
//     release function that references its object. The Registration stored
//     inside the object is fine: it does not reference the object.
//   - Objects reachable only from another registered object are finalized
//     one garbage collection after it (Reclaim collects again for them).
//
// The Registration keeps the object's address hidden from the garbage
// collector and turns it back into a pointer only while the object is
// known to be alive (see Registration.Release), which is what lets the
// explicit path call f(obj) without a strong reference.
package resource
