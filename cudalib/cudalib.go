// Package cudalib is what a Go wrapper of a CUDA library uses to call it on a
// *cuda.Stream: a Pool of the library's handles, cached per stream and per context;
// calls queued through cuda.Enqueue, so that the hand-off orders each call after
// the work that produced its operands and keeps them alive until it is queued; and
// the library's Settings that belong to a context. This module's cublas, cudnn,
// cufft, curand, cusolver and cusparse packages are built on it; a wrapper of
// another library (a third party's) gets the same from it.
//
// A wrapper makes one Pool per library, at package level, from the library's
// create function (run with the context current) and a function that owns a new
// handle, and runs each call through Pool.Run with the handle bound to the stream:
//
//	var fooHandles = cudalib.NewPool[fooHandle, *ownedFoo, struct{}](4, fooCreate, ownFoo, false)
//
//	func Fill(s *cuda.Stream, x *cuda.DeviceBuffer, v byte) error {
//		return fooHandles.Run(s, cudalib.NoKey{}, fooSetStream, func(c cudaraw.CUcontext, h fooHandle) error {
//			p, err := cuda.DevicePtr[byte](x)
//			if err != nil {
//				return err
//			}
//			return fooFill(c, h, p, v, x.Len())
//		}, cuda.Writes(x))
//	}
//
// The package's Example is such a wrapper, whole. A library whose handles each
// serve one kind of call (a cuFFT plan, made for one transform; a cuRAND generator,
// of one algorithm) makes its pool with NewKeyedPool instead, and each call names
// its key; the handles of NewPool all have the one key NoKey.
//
// A call takes the idle handle its stream keeps if it has the call's key, else an
// idle handle of the stream's context and the key — preferably the one last bound
// to the same stream — or makes one, binds it to the stream inside cuda.Enqueue, and
// gives it back afterwards: to its stream when it is bound to it and the stream
// keeps none, else to the context's cache.
//
// So each stream keeps at most one handle per library, and each context's cache at
// most the Pool's max more, of all keys together (and, with Pool.LimitBytes, at most
// so many bytes of device memory). The handle a stream keeps stays in its slot while
// a call uses it: the call claims it with one compare-and-swap on the handle's state
// and frees it with one store (calls in a row on a stream, and goroutines on their
// own streams, share no lock); a second call on the stream meanwhile takes another
// handle. A destroyed stream gives its handle to the cache, unless a call is using
// it (the handle is then dropped, to its owner, once the call gives it back);
// resource.Reclaim empties the streams and the caches, and a destroyed context's
// cache is emptied with it.
//
// A library's settings that belong to a context (cuBLAS's workspace size) are
// Settings: a context's own value, or the setting's process default, read where a
// handle is prepared; a context's values go when it is destroyed.
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
	"github.com/gocuda/gocuda/internal/rescore"
	"github.com/gocuda/gocuda/internal/streamslot"
)

// NoKey is the key of every handle of a pool made by NewPool: its handles serve
// every call in their context alike (cuBLAS, cuDNN, cuSOLVER, cuSPARSE handles).
type NoKey struct{}

// Handle is one cached handle: the raw handle R, its owner O, the stream it is bound
// to, and the library's own per-handle state X (cuBLAS's workspace, a cuFFT plan's
// work area). Its key K (NoKey for NewPool's) is the one Take made it for.
type Handle[K comparable, R comparable, O any, X any] struct {
	Raw   R
	Own   O
	State X

	key    K                 // never changes: read in a stream's slot before a claim
	ctx    cudaraw.CUcontext // the context it was made in: its cache's group
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
func (h *Handle[K, R, O, X]) Bind(c cudaraw.CUcontext, st cudaraw.CUstream, setStream func(cudaraw.CUcontext, R, cudaraw.CUstream) error) (bool, error) {
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
func (h *Handle[K, R, O, X]) Unbind() { h.bound = false }

// cacheKey is an idle handle's place in the cache: its context (the group) and key.
type cacheKey[K comparable] struct {
	ctx cudaraw.CUcontext
	key K
}

// Pool is a library's cache of handles: the one each stream keeps, and at most
// NewPool's (or NewKeyedPool's) max idle per context.
type Pool[K comparable, R comparable, O any, X any] struct {
	cache  *idlecache.Cache[cacheKey[K], cudaraw.CUcontext, *Handle[K, R, O, X]]
	create func(K, *R) error // in the calling thread's current context
	own    func(R) O
	serial *sync.Mutex                     // nil, or held around create (cuDNN asks for it)
	size   func(*Handle[K, R, O, X]) int64 // nil, or the bytes a handle holds (LimitBytes)

	// lib is the pool's library index in the streams' slots plus one: 0 until a
	// stream first keeps one of its handles (libOnce takes the index then), -1 when
	// none was left.
	lib     atomic.Int32
	libOnce sync.Once
}

// NewPool returns a pool of handles that serve every call in their context alike
// (their key is NoKey): it makes them with create (run with the context current)
// and owns them with own, keeping at most max idle ones per context. With serial,
// handles are made one at a time (a library whose create is not safe to call
// concurrently: cuDNN's). Make pools once, at package level: each one is told of
// every context destroyed, and takes one of the few library indices that streams
// keep handles for (eight in all; this module's pools take five) when a stream first
// keeps one of its handles, for the life of the process.
func NewPool[R comparable, O any, X any](max int, create func(*R) error, own func(R) O, serial bool) *Pool[NoKey, R, O, X] {
	return NewKeyedPool[NoKey, R, O, X](max, func(_ NoKey, r *R) error { return create(r) }, own, serial)
}

// NewKeyedPool is NewPool for handles that each serve the calls of one key K (a
// cuFFT plan, made for one transform; a cuRAND generator, of one algorithm): create
// makes one for its key. A context's cache keeps at most max idle handles of all keys
// together.
func NewKeyedPool[K comparable, R comparable, O any, X any](max int, create func(K, *R) error, own func(R) O, serial bool) *Pool[K, R, O, X] {
	p := &Pool[K, R, O, X]{
		cache:  idlecache.New[cacheKey[K], cudaraw.CUcontext, *Handle[K, R, O, X]](max, func(k cacheKey[K]) cudaraw.CUcontext { return k.ctx }),
		create: create,
		own:    own,
	}
	if serial {
		p.serial = new(sync.Mutex)
	}
	// The driver may give a destroyed context's handle to a new context, which must
	// not find the old one's handles.
	rescore.OnContextDestroy(func(c uintptr) { p.cache.DropGroup(cudaraw.CUcontext(c)) })
	return p
}

// LimitBytes bounds the bytes of device memory that the idle handles of a context
// hold (size returns a handle's: a cuFFT plan's work area), besides their count, and
// returns p; a handle that would pass the bound is dropped. A handle that holds
// memory is then kept by no stream, only in the context's cache, where the bound
// applies. size must not change while a handle is idle. Call it where the pool is
// made, before any use.
func (p *Pool[K, R, O, X]) LimitBytes(maxBytes int64, size func(*Handle[K, R, O, X]) int64) *Pool[K, R, O, X] {
	p.size = size
	p.cache.LimitBytes(maxBytes, size)
	return p
}

// streamLib returns the pool's library index in the streams' slots, taking one if it
// has none yet, and false if there was none left (streams then keep no handle of p).
func (p *Pool[K, R, O, X]) streamLib() (streamslot.Lib, bool) {
	if l := p.lib.Load(); l != 0 {
		return streamslot.Lib(l - 1), l > 0
	}
	p.libOnce.Do(func() {
		// A destroyed stream's handle goes to the cache (unbound: a new stream may
		// get the same CUstream value), or is dropped when the cache is full; one a
		// call is using is left to it (see Take): it is in no slot and no cache any
		// more, so it is dropped once the call gives it back.
		l, ok := streamslot.NewLib(func(ptr unsafe.Pointer) {
			h := (*Handle[K, R, O, X])(ptr)
			if !h.busy.CompareAndSwap(false, true) {
				return
			}
			h.Unbind()
			h.busy.Store(false)
			p.cache.Put(cacheKey[K]{h.ctx, h.key}, h)
		})
		if ok {
			p.lib.Store(int32(l) + 1)
		} else {
			p.lib.Store(-1)
		}
	})
	l := p.lib.Load()
	return streamslot.Lib(l - 1), l > 0
}

// Take returns the idle handle of key k that s keeps, else an idle handle of ctx
// (s's context) and k, preferably the one last bound to s, or else a new one; a new
// one only once cuda.CheckEnqueue(s, uses...) passed, so that a bad argument is
// reported before the library is loaded (with an idle handle, the checks are left to
// cuda.Enqueue, which makes them too).
//
// s may be nil for a handle that serves no one stream (a cuRAND generator, which its
// Generator holds for its life and binds to each call's stream): Take then takes an
// idle handle of ctx and k, or makes one, and checks nothing.
//
// A new handle's State is the zero value: the caller sets it up (a cuFFT plan is
// made for its transform), and may drop a new handle it fails to set up rather
// than give it back; its owner destroys it.
func (p *Pool[K, R, O, X]) Take(ctx *cuda.Context, s *cuda.Stream, k K, uses ...cuda.Use) (*Handle[K, R, O, X], error) {
	if l := p.lib.Load(); l > 0 && s.Context() != nil {
		// The stream's handle, claimed in place; then still the stream's: a Close
		// of the stream that moved it on before the claim finds it claimed and
		// leaves it (the claim is let go, and the handle dropped).
		sl, lib := streamslot.Of(s), streamslot.Lib(l-1)
		if h := (*Handle[K, R, O, X])(sl.Peek(lib)); h != nil && h.key == k && h.busy.CompareAndSwap(false, true) {
			if sl.Peek(lib) == unsafe.Pointer(h) {
				h.inSlot = true
				return h, nil
			}
			h.busy.Store(false)
		}
	}
	return p.take(ctx, s, k, uses)
}

// take is Take when s keeps no handle of k (out of line: Take runs at every call).
func (p *Pool[K, R, O, X]) take(ctx *cuda.Context, s *cuda.Stream, k K, uses []cuda.Use) (*Handle[K, R, O, X], error) {
	st := s.Handle()
	if h, ok := p.cache.TakePrefer(cacheKey[K]{ctx.Handle(), k}, func(h *Handle[K, R, O, X]) bool {
		return st != 0 && h.bound && h.stream == st
	}); ok {
		return h, nil
	}
	if s != nil {
		if err := cuda.CheckEnqueue(s, uses...); err != nil {
			return nil, err
		}
	}
	if p.serial != nil {
		p.serial.Lock()
		defer p.serial.Unlock()
	}
	h := &Handle[K, R, O, X]{key: k, ctx: ctx.Handle()}
	err := ctx.Locked(func() error {
		if err := p.create(k, &h.Raw); err != nil {
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

// Put gives back h, which Take returned for a call on s (nil with Take's nil): a
// handle claimed in s's slot stays there (or is dropped if s was destroyed
// meanwhile); any other, s keeps if h is bound to s, holds no memory (LimitBytes)
// and s keeps no other; else it goes to its context's cache, or is dropped (to its
// owner) if the cache is full. Given back without a stream, h is unbound: it may be
// bound to any stream, destroyed since.
func (p *Pool[K, R, O, X]) Put(s *cuda.Stream, h *Handle[K, R, O, X]) {
	if h.inSlot {
		// Claimed in s's slot: it stays there, unless a Close or Reclaim took it
		// meanwhile (then it is dropped).
		h.inSlot = false
		h.busy.Store(false)
		return
	}
	if s == nil {
		h.Unbind()
	} else if h.bound && h.stream == s.Handle() && (p.size == nil || p.size(h) == 0) {
		if lib, ok := p.streamLib(); ok && streamslot.Of(s).Keep(lib, unsafe.Pointer(h)) {
			return
		}
	}
	p.cache.Put(cacheKey[K]{h.ctx, h.key}, h)
}

// Idle returns the number of idle handles in ctx's cache, of all keys.
func (p *Pool[K, R, O, X]) Idle(ctx *cuda.Context) int { return p.cache.Idle(ctx.Handle()) }

// Kept returns the number of ctx's handles that streams keep and no call is using.
func (p *Pool[K, R, O, X]) Kept(ctx *cuda.Context) int {
	l := p.lib.Load()
	if l <= 0 {
		return 0
	}
	n, c := 0, ctx.Handle()
	streamslot.Each(streamslot.Lib(l-1), func(ptr unsafe.Pointer) {
		if h := (*Handle[K, R, O, X])(ptr); h.ctx == c && !h.busy.Load() {
			n++
		}
	})
	return n
}

// Run takes a handle of s's context and key k (Take: the arguments are checked
// before one is made) and queues f through cuda.Enqueue with the handle bound to s
// (setStream) and the uses held and ordered; the handle goes back afterwards (Put).
func (p *Pool[K, R, O, X]) Run(s *cuda.Stream, k K, setStream func(cudaraw.CUcontext, R, cudaraw.CUstream) error,
	f func(c cudaraw.CUcontext, h R) error, uses ...cuda.Use) error {
	ctx := s.Context()
	if ctx == nil {
		return cuda.CheckEnqueue(s, uses...) // the nil stream's error
	}
	h, err := p.Take(ctx, s, k, uses...)
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
