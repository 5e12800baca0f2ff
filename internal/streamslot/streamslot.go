// Package streamslot keeps, on each cuda stream, one idle handle per library (per
// cudalib pool: cuBLAS, cuSPARSE, cuDNN and cuSOLVER handles, cuFFT plans): the
// handle of the stream's last call, bound to the stream, for its next call. Calls in
// a row on one stream — the usual case — then find their handle with one atomic load
// on the stream (and claim it on the handle), without the per-context cache's lock,
// which every goroutine calling the library would share. It is plumbing between the packages of this module, not
// API.
//
// A stream keeps its handles until it is destroyed (then they go to their library's
// per-context cache, evict) or until resource.Reclaim, which drops them (their owners'
// releases destroy them). A stream that becomes unreachable takes its handles with
// it to the garbage collector, where their owners' releases run as for any dropped
// handle. The cuda package, which this one cannot import, keeps each stream's Slots
// in a Home embedded in the stream (Of finds them from a *cuda.Stream through it)
// and closes them when it destroys the stream.
package streamslot

import (
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"

	"github.com/gocuda/gocuda/internal/rescore"
)

// Max is how many libraries can keep handles on streams (the module has five that
// do; tests make more).
const Max = 8

// Slots is a stream's idle handles, one per library (Lib). The zero value is ready.
type Slots struct {
	p [Max]unsafe.Pointer // the handles, swapped atomically; nil: none
	// closed is set when the stream is destroyed, before its handles are evicted:
	// Keep sees it and keeps nothing more there.
	closed atomic.Bool
	// listed is set while the Slots are in live (resource.Reclaim empties them).
	listed atomic.Bool
}

// Lib is a library's index in every stream's Slots.
type Lib int

var (
	libMu  sync.Mutex
	evicts [Max]func(unsafe.Pointer)
	libs   atomic.Int32

	// live are the Slots that kept a handle since the last resource.Reclaim, by weak
	// pointer: listing a stream here does not keep it alive.
	liveMu sync.Mutex
	live   = map[weak.Pointer[Slots]]struct{}{}
)

func init() { rescore.OnReclaim(dropAll) }

// Home is where a stream's Slots live: the cuda package embeds one in its stream.
// Its only method is unexported, so embedding it adds nothing to the cuda package's
// API, while every *cuda.Stream is a Stream, whose Slots Of returns.
type Home struct{ slots Slots }

func (h *Home) streamSlots() *Slots { return &h.slots }

// Stream is a value that embeds a Home: a *cuda.Stream (or the cuda package's
// stream state).
type Stream interface{ streamSlots() *Slots }

// Of returns the Slots of s. s must not be a nil or zero *cuda.Stream (callers check
// that its Context is not nil: every Stream the cuda package makes has one), or Of
// panics.
func Of(s Stream) *Slots { return s.streamSlots() }

// NewLib returns a new library index, or false past Max libraries (the library then
// keeps no handles on streams). evict receives each handle the library kept on a
// stream that is being destroyed (it must not call CUDA: it gives the handle to the
// library's cache, or drops it).
func NewLib(evict func(unsafe.Pointer)) (Lib, bool) {
	libMu.Lock()
	defer libMu.Unlock()
	n := libs.Load()
	if n == Max {
		return 0, false
	}
	evicts[n] = evict
	libs.Store(n + 1)
	return Lib(n), true
}

// Take takes lib's handle off s, or returns nil.
func (s *Slots) Take(lib Lib) unsafe.Pointer { return atomic.SwapPointer(&s.p[lib], nil) }

// Peek returns lib's handle on s without taking it, or nil: cudalib claims the
// handle in place, on the handle itself, so that it stays the stream's while a call
// uses it. Only what does not change while the handle is in use may be read through
// it before the claim (a cuFFT plan's transform).
func (s *Slots) Peek(lib Lib) unsafe.Pointer { return atomic.LoadPointer(&s.p[lib]) }

// Keep keeps h as lib's handle on s and reports whether it did (false: s already has
// one, or its stream is destroyed; h stays the caller's).
func (s *Slots) Keep(lib Lib, h unsafe.Pointer) bool {
	if s.closed.Load() || !atomic.CompareAndSwapPointer(&s.p[lib], nil, h) {
		return false
	}
	// A Close that set closed before this CAS may have evicted before it too: take h
	// back unless the Close took it. Likewise a Reclaim that unlisted s before it
	// emptied the slots: list s again, so that the next Reclaim drops h.
	// Sequentially consistent atomics on both sides.
	if s.closed.Load() {
		return !atomic.CompareAndSwapPointer(&s.p[lib], h, nil)
	}
	if !s.listed.Load() {
		s.list()
	}
	return true
}

// list adds s to live.
func (s *Slots) list() {
	liveMu.Lock()
	defer liveMu.Unlock()
	if s.listed.Load() {
		return
	}
	live[weak.Make(s)] = struct{}{}
	s.listed.Store(true)
}

// Close marks s's stream destroyed and gives the handles it kept to their
// libraries' evict.
func (s *Slots) Close() {
	s.closed.Store(true)
	n := Lib(libs.Load())
	for lib := range n {
		if h := s.Take(lib); h != nil {
			evicts[lib](h)
		}
	}
	if s.listed.Load() {
		liveMu.Lock()
		delete(live, weak.Make(s))
		s.listed.Store(false)
		liveMu.Unlock()
	}
}

// Each calls f with lib's handle on every stream that keeps one (tests and counts; the
// handles stay where they are, and may be taken meanwhile).
func Each(lib Lib, f func(unsafe.Pointer)) {
	liveMu.Lock()
	defer liveMu.Unlock()
	for w := range live {
		if s := w.Value(); s != nil {
			if h := atomic.LoadPointer(&s.p[lib]); h != nil {
				f(h)
			}
		} else {
			delete(live, w)
		}
	}
}

// dropAll drops every handle kept on a stream (resource.Reclaim: their owners'
// releases destroy them in that Reclaim).
func dropAll() {
	liveMu.Lock()
	defer liveMu.Unlock()
	n := Lib(libs.Load())
	for w := range live {
		if s := w.Value(); s != nil {
			s.listed.Store(false)
			for lib := range n {
				s.Take(lib)
			}
		}
	}
	clear(live)
}
