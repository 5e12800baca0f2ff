// Package cudalib is what a Go wrapper of a CUDA library uses to call it on a
// *cuda.Stream: a Pool of the library's handles, cached per stream and per context,
// and calls queued through cuda.Enqueue, so that the hand-off orders each call after
// the work that produced its operands and keeps them alive until it is queued. This
// module's cublas, cudnn, cusolver and cusparse packages are built on it; a wrapper
// of another library (a third party's) gets the same from it.
//
// A wrapper makes one Pool per library, at package level, from the library's
// create function (run with the context current) and a function that owns a new
// handle, and runs each call through Pool.Run with the handle bound to the stream:
//
//	var fooHandles = cudalib.NewPool[fooHandle, *ownedFoo, struct{}](4, fooCreate, ownFoo, false)
//
//	func Fill(s *cuda.Stream, x *cuda.DeviceBuffer, v byte) error {
//		return fooHandles.Run(s, fooSetStream, func(c cudaraw.CUcontext, h fooHandle) error {
//			p, err := cuda.DevicePtr[byte](x)
//			if err != nil {
//				return err
//			}
//			return fooFill(c, h, p, v, x.Len())
//		}, cuda.Writes(x))
//	}
//
// The package's Example is such a wrapper, whole.
//
// A call takes the idle handle its stream keeps, else an idle handle of the
// stream's context — preferably the one last bound to the same stream — or makes
// one, binds it to the stream inside cuda.Enqueue, and gives it back afterwards: to
// its stream when it is bound to it and the stream keeps none, else to the context's
// cache.
//
// So each stream keeps at most one handle per library, and each context's cache at
// most the Pool's max more. The handle a stream keeps stays in its slot while a
// call uses it: the call claims it with one compare-and-swap on the handle's state
// and frees it with one store (calls in a row on a stream, and goroutines on their
// own streams, share no lock); a second call on the stream meanwhile takes another
// handle. A destroyed stream gives its handle to the cache, unless a call is using
// it (the handle is then dropped, to its owner, once the call gives it back);
// resource.Reclaim empties the streams and the cache.
//
// The Pool never destroys a handle: one it has no room for, or drops at
// resource.Reclaim, is left to its owner. A handle is made with its context current
// on a locked thread (cuda.Context.Locked) and owned at once by what NewPool's own
// returns, whose release must destroy it when the owner becomes unreachable:
// resource.ResourceFinalizer, in the blocking lane where the library's destroy call
// may wait for the GPU (cublasDestroy, cudnnDestroy), so that it runs in
// resource.Reclaim. The generated owner types of this module's raw packages
// (cublasraw.OwnHandle) are such owners.
//
// A wrapper's typed operations pick the library's routine for their element type
// from a per-precision table, a ByDataType indexed by the type's DataType, rather
// than by a type switch of their own.
package cudalib

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/internal/idlecache"
	"github.com/gocuda/gocuda/internal/streamslot"
)

// Handle is one cached handle: the raw handle R, its owner O, the stream it is bound
// to, and the library's own per-handle state X (cuBLAS's workspace).
type Handle[R comparable, O any, X any] struct {
	Raw   R
	Own   O
	State X

	ctx    cudaraw.CUcontext // the context it was made in: its cache's key
	stream cudaraw.CUstream
	bound  bool // stream is the handle's stream (SetStream was called)

	// busy is set while a call that claimed the handle in its stream's slot uses
	// it (Take to Put); a handle elsewhere (the cache, a call that took it from
	// there) is never claimed. inSlot is set by the Take that claimed it, for Put.
	busy   atomic.Bool
	inSlot bool
}

// Bind binds h to stream st (with the context c) unless it is bound to it already,
// and reports whether it called setStream.
func (h *Handle[R, O, X]) Bind(c cudaraw.CUcontext, st cudaraw.CUstream, setStream func(cudaraw.CUcontext, R, cudaraw.CUstream) error) (bool, error) {
	if h.bound && h.stream == st {
		return false, nil
	}
	if err := setStream(c, h.Raw, st); err != nil {
		return false, err
	}
	h.stream, h.bound = st, true
	return true, nil
}

// Unbind makes the next Bind call setStream whatever the stream.
func (h *Handle[R, O, X]) Unbind() { h.bound = false }

// Pool is a library's cache of handles, at most NewPool's max idle per context.
type Pool[R comparable, O any, X any] struct {
	cache  *idlecache.Cache[cudaraw.CUcontext, cudaraw.CUcontext, *Handle[R, O, X]]
	create func(*R) error // in the calling thread's current context
	own    func(R) O
	serial *sync.Mutex // nil, or held around create (cuDNN asks for it)
	lib    streamslot.Lib
	kept   bool // streams keep handles (lib is valid)
}

// NewPool returns a pool that makes handles with create (run with the context
// current) and owns them with own, keeping at most max idle ones per context. With
// serial, handles are made one at a time (a library whose create is not safe to
// call concurrently: cuDNN's). Each pool takes one of the few library indices that
// streams keep handles for (eight in all, four of them this module's), for the life
// of the process: make pools once, at package level.
func NewPool[R comparable, O any, X any](max int, create func(*R) error, own func(R) O, serial bool) *Pool[R, O, X] {
	p := &Pool[R, O, X]{
		cache:  idlecache.New[cudaraw.CUcontext, cudaraw.CUcontext, *Handle[R, O, X]](max, func(c cudaraw.CUcontext) cudaraw.CUcontext { return c }),
		create: create,
		own:    own,
	}
	if serial {
		p.serial = new(sync.Mutex)
	}
	// A destroyed stream's handle goes to the cache (unbound: a new stream may get
	// the same CUstream value), or is dropped when the cache is full; one a call is
	// using is left to it (see Take): it is in no slot and no cache any more, so it
	// is dropped once the call gives it back.
	p.lib, p.kept = streamslot.NewLib(func(ptr unsafe.Pointer) {
		h := (*Handle[R, O, X])(ptr)
		if !h.busy.CompareAndSwap(false, true) {
			return
		}
		h.Unbind()
		h.busy.Store(false)
		p.cache.Put(h.ctx, h)
	})
	return p
}

// Take returns the idle handle s keeps, else an idle handle of ctx (s's context),
// preferably the one last bound to s, or else a new one; a new one only once
// cuda.CheckEnqueue(s, uses...) passed, so that a bad argument is reported before the
// library is loaded (with an idle handle, the checks are left to cuda.Enqueue, which
// makes them too).
func (p *Pool[R, O, X]) Take(ctx *cuda.Context, s *cuda.Stream, uses ...cuda.Use) (*Handle[R, O, X], error) {
	if p.kept && s.Context() != nil {
		// The stream's handle, claimed in place; then still the stream's: a Close
		// of the stream that moved it on before the claim finds it claimed and
		// leaves it (the claim is let go, and the handle dropped).
		sl := streamslot.Of(s)
		if h := (*Handle[R, O, X])(sl.Peek(p.lib)); h != nil && h.busy.CompareAndSwap(false, true) {
			if sl.Peek(p.lib) == unsafe.Pointer(h) {
				h.inSlot = true
				return h, nil
			}
			h.busy.Store(false)
		}
	}
	return p.take(ctx, s, uses)
}

// take is Take when s keeps no handle (out of line: Take runs at every call).
func (p *Pool[R, O, X]) take(ctx *cuda.Context, s *cuda.Stream, uses []cuda.Use) (*Handle[R, O, X], error) {
	st := s.Handle()
	if h, ok := p.cache.TakePrefer(ctx.Handle(), func(h *Handle[R, O, X]) bool { return h.bound && h.stream == st }); ok {
		return h, nil
	}
	if err := cuda.CheckEnqueue(s, uses...); err != nil {
		return nil, err
	}
	if p.serial != nil {
		p.serial.Lock()
		defer p.serial.Unlock()
	}
	h := &Handle[R, O, X]{ctx: ctx.Handle()}
	err := ctx.Locked(func() error {
		if err := p.create(&h.Raw); err != nil {
			return err
		}
		h.Own = p.own(h.Raw) // its release captures the context current here
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("creating a handle: %w", err)
	}
	return h, nil
}

// Put gives back h, which Take returned for a call on s: a handle claimed in s's slot
// stays there (or is dropped if s was destroyed meanwhile); any other, s keeps if h is
// bound to s and s keeps no other; else it goes to its context's cache, or is dropped
// (to its owner) if the cache is full.
func (p *Pool[R, O, X]) Put(s *cuda.Stream, h *Handle[R, O, X]) {
	if h.inSlot {
		// Claimed in s's slot: it stays there, unless a Close or Reclaim took it
		// meanwhile (then it is dropped).
		h.inSlot = false
		h.busy.Store(false)
		return
	}
	if p.kept && h.bound && h.stream == s.Handle() {
		if streamslot.Of(s).Keep(p.lib, unsafe.Pointer(h)) {
			return
		}
	}
	p.cache.Put(h.ctx, h)
}

// Idle returns the number of idle handles in ctx's cache.
func (p *Pool[R, O, X]) Idle(ctx *cuda.Context) int { return p.cache.Idle(ctx.Handle()) }

// Kept returns the number of ctx's handles that streams keep and no call is using.
func (p *Pool[R, O, X]) Kept(ctx *cuda.Context) int {
	n, c := 0, ctx.Handle()
	if !p.kept {
		return 0
	}
	streamslot.Each(p.lib, func(ptr unsafe.Pointer) {
		if h := (*Handle[R, O, X])(ptr); h.ctx == c && !h.busy.Load() {
			n++
		}
	})
	return n
}

// Run takes a handle of s's context (Take: the arguments are checked before one is
// made) and queues f through cuda.Enqueue with the handle bound to s (setStream)
// and the uses held and ordered; the handle goes back afterwards (Put).
func (p *Pool[R, O, X]) Run(s *cuda.Stream, setStream func(cudaraw.CUcontext, R, cudaraw.CUstream) error,
	f func(c cudaraw.CUcontext, h R) error, uses ...cuda.Use) error {
	ctx := s.Context()
	if ctx == nil {
		return cuda.CheckEnqueue(s, uses...) // the nil stream's error
	}
	h, err := p.Take(ctx, s, uses...)
	if err != nil {
		return err
	}
	defer p.Put(s, h)
	return cuda.Enqueue(s, func(c cudaraw.CUcontext, st cudaraw.CUstream) error {
		if _, err := h.Bind(c, st, setStream); err != nil {
			return err
		}
		return f(c, h.Raw)
	}, uses...)
}
