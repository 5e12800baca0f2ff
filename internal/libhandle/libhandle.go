// Package libhandle is the per-context handle cache that the library packages
// (cublas, cusparse, cudnn) share: a call takes an idle handle of its stream's
// context — preferably the one last bound to the same stream, so that concurrent
// streams keep their own handles — or makes one, binds it to the stream inside
// cuda.Enqueue, and gives it back afterwards.
//
// A handle is made with its context current on a locked thread (cuda.Context.Locked)
// and owned at once by the library's generated owner type, whose release destroys it
// in the class headers/*.toml gives (in resource.Reclaim where cudnnDestroy or
// cublasDestroy wait for the GPU). The cache never calls CUDA: a handle it has no
// room for, or drops at resource.Reclaim, is left to its owner.
package libhandle

import (
	"fmt"
	"sync"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/internal/idlecache"
)

// Handle is one cached handle: the raw handle R, its owner O, the stream it is bound
// to, and the library's own per-handle state X (cuBLAS's workspace).
type Handle[R comparable, O any, X any] struct {
	Raw   R
	Own   O
	State X

	stream cuda.CUstream
	bound  bool // stream is the handle's stream (SetStream was called)
}

// Bind binds h to stream st (with the context c) unless it is bound to it already,
// and reports whether it called setStream.
func (h *Handle[R, O, X]) Bind(c cuda.CUcontext, st cuda.CUstream, setStream func(cuda.CUcontext, R, cuda.CUstream) error) (bool, error) {
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

// Pool is a library's cache of handles, at most Max idle per context.
type Pool[R comparable, O any, X any] struct {
	cache  *idlecache.Cache[cuda.CUcontext, cuda.CUcontext, *Handle[R, O, X]]
	create func(*R) error // in the calling thread's current context
	own    func(R) O
	serial *sync.Mutex // nil, or held around create (cuDNN asks for it)
}

// New returns a pool that makes handles with create (run with the context current)
// and owns them with own, keeping at most max idle ones per context. With serial,
// handles are made one at a time.
func New[R comparable, O any, X any](max int, create func(*R) error, own func(R) O, serial bool) *Pool[R, O, X] {
	p := &Pool[R, O, X]{
		cache:  idlecache.New[cuda.CUcontext, cuda.CUcontext, *Handle[R, O, X]](max, func(c cuda.CUcontext) cuda.CUcontext { return c }),
		create: create,
		own:    own,
	}
	if serial {
		p.serial = new(sync.Mutex)
	}
	return p
}

// Take returns an idle handle of ctx, preferably the one last bound to s, or a new
// one; a new one only once cuda.CheckEnqueue(s, uses...) passed, so that a bad
// argument is reported before the library is loaded (with an idle handle, the
// checks are left to cuda.Enqueue, which makes them too).
func (p *Pool[R, O, X]) Take(ctx *cuda.Context, s *cuda.Stream, uses ...cuda.Use) (*Handle[R, O, X], error) {
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
	h := new(Handle[R, O, X])
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

// Put gives h back to ctx's cache, or drops it (to its owner) if the cache is full.
func (p *Pool[R, O, X]) Put(ctx *cuda.Context, h *Handle[R, O, X]) { p.cache.Put(ctx.Handle(), h) }

// Idle returns the number of idle handles of ctx.
func (p *Pool[R, O, X]) Idle(ctx *cuda.Context) int { return p.cache.Idle(ctx.Handle()) }

// Run takes a handle of s's context (Take: the arguments are checked before one is
// made) and queues f through cuda.Enqueue with the handle bound to s (setStream)
// and the uses held and ordered; the handle goes back to the cache afterwards.
func (p *Pool[R, O, X]) Run(s *cuda.Stream, setStream func(cuda.CUcontext, R, cuda.CUstream) error,
	f func(c cuda.CUcontext, h R) error, uses ...cuda.Use) error {
	ctx := s.Context()
	if ctx == nil {
		return cuda.CheckEnqueue(s, uses...) // the nil stream's error
	}
	h, err := p.Take(ctx, s, uses...)
	if err != nil {
		return err
	}
	defer p.Put(ctx, h)
	return cuda.Enqueue(s, func(c cuda.CUcontext, st cuda.CUstream) error {
		if _, err := h.Bind(c, st, setStream); err != nil {
			return err
		}
		return f(c, h.Raw)
	}, uses...)
}
