package cublas

import (
	"fmt"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/internal/idlecache"
)

// Handles: the operations of blas.go take a handle of their stream's context from a
// cache and give it back; the user never holds one. A cuBLAS handle is costly to make
// (cublasCreate allocates on the device) and its destruction waits for the GPU, so
// handles are kept: at most MaxIdleHandles idle ones per context. A handle the cache
// has no room for, or drops on out-of-memory, is left to its OwnedHandle, whose
// release runs in resource.Reclaim (blocking class, in headers/cublas.toml): never
// on a goroutine that would wait for the GPU.

// MaxIdleHandles is how many idle cuBLAS handles a context's cache keeps.
const MaxIdleHandles = 4

// handle is a cached cuBLAS handle: the owned handle, and the stream it is bound to.
type handle struct {
	own    *OwnedHandle
	raw    CublasHandle
	stream cuda.CUstream
}

// handles are the idle handles, per context.
var handles = idlecache.New[cuda.CUcontext, cuda.CUcontext, *handle](MaxIdleHandles, func(c cuda.CUcontext) cuda.CUcontext { return c })

// take returns an idle handle of ctx, or a new one.
func take(ctx *cuda.Context) (*handle, error) {
	if h, ok := handles.Take(ctx.Handle()); ok {
		return h, nil
	}
	h := new(handle)
	// Created with the context current on a locked thread: the OwnedHandle's
	// release captures that context (and destroys the handle there, or not at all
	// once the context is gone).
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
// with the memory f uses (holds, hand-off), and names the operation in errors. The
// handle is taken once Enqueue has checked the stream and the memory, so that a
// bad argument is reported before cuBLAS is loaded.
func call(op string, s *cuda.Stream, f func(ctx cuda.CUcontext, h CublasHandle) error, uses ...cuda.Use) error {
	var h *handle
	err := cuda.Enqueue(s, func(c cuda.CUcontext, st cuda.CUstream) error {
		var err error
		if h, err = take(s.Context()); err != nil {
			return err
		}
		if h.stream != st {
			if err := inSetStream(c, h.raw, st); err != nil {
				return err
			}
			h.stream = st
		}
		return f(c, h.raw)
	}, uses...)
	if h != nil {
		put(s.Context(), h)
	}
	if err != nil {
		return fmt.Errorf("cublas: %s: %w", op, err)
	}
	return nil
}
