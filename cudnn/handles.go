package cudnn

import (
	"fmt"
	"sync"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/internal/idlecache"
)

// Handles: the operations take a cuDNN handle of their stream's context from a cache
// and give it back; the user never holds one. A handle is costly to make (cudnnCreate
// loads kernels and allocates on the device) and cudnnDestroy waits for the GPU, so
// handles are kept: at most MaxIdleHandles idle ones per context, and a call takes
// the idle handle last bound to its own stream when there is one. A handle the cache
// has no room for, or drops at resource.Reclaim, is left to its OwnedHandle, whose
// release runs in resource.Reclaim (blocking class, in headers/cudnn.toml): never on
// a goroutine that would wait for the GPU.

// MaxIdleHandles is how many idle cuDNN handles a context's cache keeps.
const MaxIdleHandles = 4

// handle is a cached cuDNN handle: the owned handle, and the stream it is bound to.
type handle struct {
	own    *OwnedHandle
	raw    CudnnHandle
	stream cuda.CUstream
}

// handles are the idle handles, per context.
var handles = idlecache.New[cuda.CUcontext, cuda.CUcontext, *handle](MaxIdleHandles, func(c cuda.CUcontext) cuda.CUcontext { return c })

// createMu serializes cudnnCreate: cuDNN asks for the first one to be made alone
// before threads make theirs ("Thread Safety" in its developer guide), and handles
// are made rarely (they are cached), so all are made one at a time.
var createMu sync.Mutex

// take returns an idle handle of ctx, preferably the one last bound to s, or a new
// one.
func take(ctx *cuda.Context, s *cuda.Stream) (*handle, error) {
	st := s.Handle()
	if h, ok := handles.TakePrefer(ctx.Handle(), func(h *handle) bool { return h.stream == st }); ok {
		return h, nil
	}
	h := new(handle)
	createMu.Lock()
	defer createMu.Unlock()
	// Created with the context current on a locked thread: the OwnedHandle's release
	// captures that context (and destroys the handle there, or not at all once the
	// context is gone).
	err := ctx.Locked(func() error {
		if err := Create(&h.raw); err != nil {
			return err
		}
		h.own = OwnHandle(h.raw)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("creating a handle: %w", err)
	}
	return h, nil
}

// put gives h back to ctx's cache; one the cache has no room for is dropped (its
// OwnedHandle's release destroys it in resource.Reclaim).
func put(ctx *cuda.Context, h *handle) { handles.Put(ctx.Handle(), h) }

// idleHandles returns the number of idle handles of ctx (tests).
func idleHandles(ctx *cuda.Context) int { return handles.Idle(ctx.Handle()) }

// call runs f with a handle of s's context bound to s, queued through cuda.Enqueue
// with the memory f uses (holds, hand-off), and names the operation in errors.
func call(op string, s *cuda.Stream, f func(ctx cuda.CUcontext, h CudnnHandle) error, uses ...cuda.Use) error {
	if err := run(s, f, uses...); err != nil {
		return wrap(op, err)
	}
	return nil
}

// run is call without the operation's name, for the steps of an operation. The
// stream and memory are checked before a handle is taken (and made), so that a bad
// argument is reported before cuDNN is loaded.
func run(s *cuda.Stream, f func(ctx cuda.CUcontext, h CudnnHandle) error, uses ...cuda.Use) error {
	if err := cuda.CheckEnqueue(s, uses...); err != nil {
		return err
	}
	ctx := s.Context()
	h, err := take(ctx, s)
	if err != nil {
		return err
	}
	defer put(ctx, h)
	return cuda.Enqueue(s, func(c cuda.CUcontext, st cuda.CUstream) error {
		if h.stream != st {
			if err := inSetStream(c, h.raw, st); err != nil {
				return err
			}
			h.stream = st
		}
		return f(c, h.raw)
	}, uses...)
}

// wrap names the operation in an error: "cudnn: convolution forward: ...".
func wrap(op string, err error) error { return fmt.Errorf("cudnn: %s: %w", op, err) }
