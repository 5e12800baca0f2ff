package cublas

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/internal/idlecache"
)

// Handles: the operations of blas.go take a handle of their stream's context from a
// cache and give it back; the user never holds one. A cuBLAS handle is costly to make
// (cublasCreate allocates on the device) and its destruction waits for the GPU, so
// handles are kept: at most MaxIdleHandles idle ones per context, and a call takes
// the idle handle last bound to its own stream when there is one. A handle the
// cache has no room for, or drops at resource.Reclaim, is left to its OwnedHandle,
// whose release runs in resource.Reclaim (blocking class, in headers/cublas.toml):
// never on a goroutine that would wait for the GPU.
//
// Workspace: cuBLAS's kernels use a scratch buffer (split-K GEMMs and the like). Each
// handle gets its own from the device's pool (cublasSetWorkspace), so workspaces
// show in cuda.MemoryStatus and go back to the pool with their handle. Every call
// passes the workspace to the hand-off as written memory: when a handle moves to
// another stream, the new stream waits on the GPU for the old stream's last use of
// the workspace, so that two streams never share a scratch buffer at once (cuBLAS's
// own default workspace, kept per handle, gives no such guarantee).

// MaxIdleHandles is how many idle cuBLAS handles a context's cache keeps.
const MaxIdleHandles = 4

// DefaultWorkspaceSize is the size of a handle's workspace unless SetWorkspaceSize
// says otherwise for its context: 4 MiB. Measured on the H200, cuBLAS's own Hopper
// default (32 MiB) made the small GEMMs of a 256-wide MLP (batch 16) 40% slower: with
// the larger workspace its heuristics pick other kernels.
const DefaultWorkspaceSize = 4 << 20

// handle is a cached cuBLAS handle: the owned handle, the stream it is bound to,
// and its workspace.
type handle struct {
	own    *OwnedHandle
	raw    CublasHandle
	stream cuda.CUstream
	bound  bool // stream is the handle's stream (cublasSetStream was called)
	ws     *cuda.DeviceBuffer
	wsSet  bool // the workspace is set for the bound stream (cublasSetStream resets it)
}

// handles are the idle handles, per context.
var handles = idlecache.New[cuda.CUcontext, cuda.CUcontext, *handle](MaxIdleHandles, func(c cuda.CUcontext) cuda.CUcontext { return c })

var (
	wsMu    sync.Mutex
	wsSizes = map[cuda.CUcontext]int{}
)

// SetWorkspaceSize sets the workspace size of ctx's cuBLAS handles, in bytes (0: no
// workspace of ours; cuBLAS then uses the handle's default one). Handles made
// earlier get the new size at their next call.
func SetWorkspaceSize(ctx *cuda.Context, bytes int) error {
	if ctx == nil || bytes < 0 {
		return fmt.Errorf("cublas: set workspace size: %w: %d bytes", cuda.ErrInvalidArgument, bytes)
	}
	wsMu.Lock()
	wsSizes[ctx.Handle()] = bytes
	wsMu.Unlock()
	return nil
}

// WorkspaceSize returns the workspace size of ctx's cuBLAS handles, in bytes.
func WorkspaceSize(ctx *cuda.Context) int {
	wsMu.Lock()
	defer wsMu.Unlock()
	if n, ok := wsSizes[ctx.Handle()]; ok {
		return n
	}
	return DefaultWorkspaceSize
}

// take returns an idle handle of ctx, preferably the one last bound to s, or a new
// one, with a workspace of the context's size from the pool, allocated on s.
func take(ctx *cuda.Context, s *cuda.Stream) (*handle, error) {
	st := s.Handle()
	h, ok := handles.TakePrefer(ctx.Handle(), func(h *handle) bool { return h.stream == st })
	if !ok {
		h = new(handle)
		if err := h.create(ctx); err != nil {
			return nil, err
		}
	}
	size := WorkspaceSize(ctx)
	if h.ws != nil && h.ws.Size() != size {
		h.ws.Close() // ordered after its last use by the hand-off
		// The handle must not keep the old address: unbinding it makes the next
		// bind call cublasSetStream, which resets cuBLAS to its default workspace.
		h.ws, h.wsSet, h.bound = nil, false, false
	}
	if h.ws == nil && size > 0 {
		ws, err := ctx.Alloc(s, size)
		if err != nil {
			put(ctx, h)
			return nil, fmt.Errorf("allocating the workspace: %w", err)
		}
		h.ws, h.wsSet = ws, false
	}
	return h, nil
}

// create makes h's raw handle, with the context current on a locked thread: the
// OwnedHandle's release captures that context (and destroys the handle there, or
// not at all once the context is gone).
func (h *handle) create(ctx *cuda.Context) error {
	err := ctx.Locked(func() error {
		if err := Create(&h.raw); err != nil {
			return err
		}
		h.own = OwnHandle(h.raw)
		return nil
	})
	if err != nil {
		return fmt.Errorf("creating a handle: %w", err)
	}
	return nil
}

// bind binds h to stream st with its workspace set.
func (h *handle) bind(c cuda.CUcontext, st cuda.CUstream) error {
	if !h.bound || h.stream != st {
		if err := inSetStream(c, h.raw, st); err != nil {
			return err
		}
		h.stream, h.bound, h.wsSet = st, true, false
	}
	if h.ws != nil && !h.wsSet {
		p, err := cuda.DevicePtr[byte](h.ws)
		if err != nil {
			return err
		}
		if err := inSetWorkspace(c, h.raw, unsafe.Pointer(p), uint64(h.ws.Size())); err != nil {
			return err
		}
		h.wsSet = true
	}
	return nil
}

// put gives h back to ctx's cache; one the cache has no room for is dropped (its
// OwnedHandle's release destroys it in resource.Reclaim, and its workspace goes
// back to the pool when collected).
func put(ctx *cuda.Context, h *handle) { handles.Put(ctx.Handle(), h) }

// idleHandles returns the number of idle handles of ctx (tests).
func idleHandles(ctx *cuda.Context) int { return handles.Idle(ctx.Handle()) }

// call runs f with a handle of s's context bound to s, queued through cuda.Enqueue
// with the memory f uses and the handle's workspace (holds, hand-off), and names the
// operation in errors. The stream and memory are checked before a handle is made,
// so that a bad argument is reported before cuBLAS is loaded.
func call(op string, s *cuda.Stream, f func(ctx cuda.CUcontext, h CublasHandle) error, uses ...cuda.Use) error {
	fail := func(err error) error { return fmt.Errorf("cublas: %s: %w", op, err) }
	if err := cuda.CheckEnqueue(s, uses...); err != nil {
		return fail(err)
	}
	ctx := s.Context()
	h, err := take(ctx, s)
	if err != nil {
		return fail(err)
	}
	defer put(ctx, h)
	if h.ws != nil {
		uses = append(uses, cuda.Writes(h.ws))
	}
	err = cuda.Enqueue(s, func(c cuda.CUcontext, st cuda.CUstream) error {
		if err := h.bind(c, st); err != nil {
			return err
		}
		return f(c, h.raw)
	}, uses...)
	if err != nil {
		return fail(err)
	}
	return nil
}
