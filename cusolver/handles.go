package cusolver

import (
	"fmt"

	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cudalib"
	"github.com/gocuda/gocuda/cusolver/cusolverraw"
)

// Handles: the operations of dense.go take a cuSOLVER handle of their stream's
// context from a cache and give it back; the user never holds one. A handle is
// costly to make (cusolverDnCreate allocates the GPU resources the library needs),
// so handles are kept: each stream keeps the handle of its last call for its next
// one, and each context's cache at most MaxIdleHandles more, of which a call takes
// the one last bound to its own stream when there is one (cudalib).
// A handle the cache has no room for, or drops at resource.Reclaim, is left to its
// OwnedDnHandle, whose release runs in resource.Reclaim (blocking class, in
// headers/cusolver.toml): never on a goroutine that would wait for the GPU.
//
// Fence: a handle may keep scratch memory of its own on the device that no call
// names (cuSOLVER calls cuBLAS, whose handles have a default workspace). Each handle
// has a
// small buffer from the pool that every call passes to the hand-off as written
// memory, so that when a handle moves to another stream, the new stream waits on the
// GPU for the old stream's last use of the handle: two streams never run work of
// one handle at once.

// MaxIdleHandles is how many idle cuSOLVER handles a context's cache keeps, besides
// the one each stream keeps.
const MaxIdleHandles = 4

// fenceSize is the size of a handle's fence buffer: only its uses matter, not its
// bytes, which nothing reads.
const fenceSize = 4

// state is a handle's own memory: its fence, and the cuBLAS handle of Gels's
// triangular solve (cuSOLVER has none), made at the handle's first Gels. It moves
// with the cuSOLVER handle, so the fence orders its uses too; dropped with it, it is
// destroyed by its OwnedHandle in resource.Reclaim (cublasDestroy is classed
// blocking in headers/cublas.toml).
type state struct {
	fence *cuda.DeviceBuffer
	blas  *cublasraw.OwnedHandle
}

type handle = cudalib.Handle[cudalib.NoKey, cusolverraw.CusolverDnHandle, *cusolverraw.OwnedDnHandle, state]

// handles are the idle handles, per context.
var handles = cudalib.NewPool[cusolverraw.CusolverDnHandle, *cusolverraw.OwnedDnHandle, state](MaxIdleHandles, cusolverraw.DnCreate, cusolverraw.OwnDnHandle, false)

// idleHandles returns the number of idle handles of ctx (tests).
func idleHandles(ctx *cuda.Context) int { return handles.Idle(ctx) }

// take checks the stream and the memory in uses (cuda.CheckEnqueue: before a handle
// is made and cuSOLVER loaded, and before buffer-size queries take the operands'
// addresses), then returns the handle s keeps, an idle handle of s's context
// (preferably the one last bound to s), or a new one, with its fence allocated on s.
func take(s *cuda.Stream, uses []cuda.Use) (*cuda.Context, *handle, error) {
	if err := cuda.CheckEnqueue(s, uses...); err != nil {
		return nil, nil, err
	}
	ctx := s.Context()
	h, err := handles.Take(ctx, s, cudalib.NoKey{})
	if err != nil {
		return nil, nil, err
	}
	if h.State.fence == nil {
		if h.State.fence, err = ctx.Alloc(s, fenceSize); err != nil {
			handles.Put(s, h)
			return nil, nil, fmt.Errorf("allocating the handle's fence: %w", err)
		}
	}
	return ctx, h, nil
}

// enqueue queues f on s with h bound to s, through cuda.Enqueue with the memory f
// uses and h's fence (holds, hand-off).
func enqueue(s *cuda.Stream, h *handle, f func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle) error, uses []cuda.Use) error {
	uses = append(uses, cuda.Writes(h.State.fence))
	return cuda.Enqueue(s, func(c cudaraw.CUcontext, st cudaraw.CUstream) error {
		if _, err := h.Bind(c, st, cusolverraw.DnSetStreamIn); err != nil {
			return err
		}
		return f(c, h.Raw)
	}, uses...)
}
