package cudalib

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/internal/rescore"
)

// Setting is a library's setting that belongs to a context (cuBLAS's workspace
// size): a context's own value once Set, else the setting's process default. A
// context's value goes with the context: when it is destroyed (Close, or resource
// collecting a dropped NewContext), so that a later context, which the driver may
// give the same handle, starts from the default. Values are kept by the context's
// handle, so every *cuda.Context of one driver context shares them.
//
// A library reads its setting where it prepares a handle, not at every call:
// Version changes whenever a value does, so a handle that holds the value it read
// and the version it read it at reads again only after a Set (one atomic load per
// call).
//
// Make settings once, at package level: each one is told of every context destroyed,
// for the life of the process.
type Setting[T any] struct {
	def T
	ver atomic.Uint64 // Version, counting from 1

	mu   sync.RWMutex
	vals map[cudaraw.CUcontext]T
}

// NewSetting returns a setting whose process default is def.
func NewSetting[T any](def T) *Setting[T] {
	s := &Setting[T]{def: def, vals: map[cudaraw.CUcontext]T{}}
	s.ver.Store(1)
	rescore.OnContextDestroy(s.drop)
	return s
}

// Default returns the setting's process default: the value of every context that
// has none of its own.
func (s *Setting[T]) Default() T { return s.def }

// Get returns ctx's value, or the default if ctx has none (or is nil, or destroyed).
func (s *Setting[T]) Get(ctx *cuda.Context) T {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if v, ok := s.vals[ctx.Handle()]; ok {
		return v
	}
	return s.def
}

// Set sets ctx's value. The context is held while it stores (cuda.Context.Locked),
// so that a value is never kept for a destroyed context: Set on one returns an error
// matching cuda.ErrClosed, and one that races the context's destruction either fails
// so or stores a value that goes with the context.
func (s *Setting[T]) Set(ctx *cuda.Context, v T) error {
	if ctx.Handle() == 0 {
		return fmt.Errorf("cudalib: setting: %w: nil or zero context", cuda.ErrInvalidArgument)
	}
	return ctx.Locked(func() error {
		s.mu.Lock()
		s.vals[ctx.Handle()] = v
		s.mu.Unlock()
		s.ver.Add(1)
		return nil
	})
}

// Version returns a number that changes whenever a context's value does (at every
// Set, and when a destroyed context's value goes). It is never 0: a handle's zero
// version reads as never read.
func (s *Setting[T]) Version() uint64 { return s.ver.Load() }

// drop forgets the value of the context c, being destroyed.
func (s *Setting[T]) drop(c uintptr) {
	s.mu.Lock()
	_, had := s.vals[cudaraw.CUcontext(c)]
	delete(s.vals, cudaraw.CUcontext(c))
	s.mu.Unlock()
	if had {
		s.ver.Add(1)
	}
}
