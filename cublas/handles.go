package cublas

import (
	"fmt"
	"unsafe"

	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cudalib"
)

// Handles: the operations of blas.go take a handle of their stream's context from a
// cache and give it back; the user never holds one. A cuBLAS handle is costly to make
// (cublasCreate allocates on the device) and its destruction waits for the GPU, so
// handles are kept: each stream keeps the handle of its last call for its next one
// (taken and given back without a lock shared with other streams), and each
// context's cache at most MaxIdleHandles more, of which a call takes the one last
// bound to its own stream when there is one; a destroyed stream gives its handle to
// the cache (cudalib). A handle the cache has no room for, or that
// resource.Reclaim drops, is left to its OwnedHandle, whose release runs in
// resource.Reclaim (blocking class, in headers/cublas.toml): never on a goroutine
// that would wait for the GPU.
//
// Workspace: cuBLAS's kernels use a scratch buffer (split-K GEMMs and the like). Each
// handle gets its own from the device's pool (cublasSetWorkspace), so workspaces
// show in cuda.MemoryStatus and go back to the pool with their handle. Every call
// passes the workspace to the hand-off as written memory: when a handle moves to
// another stream, the new stream waits on the GPU for the old stream's last use of
// the workspace, so that two streams never share a scratch buffer at once (cuBLAS's
// own default workspace, kept per handle, gives no such guarantee).

// MaxIdleHandles is how many idle cuBLAS handles a context's cache keeps, besides the
// one each stream keeps.
const MaxIdleHandles = 4

// DefaultWorkspaceSize is the process default of the workspace size: a handle's
// workspace has it unless SetWorkspaceSize says otherwise for its context. 4 MiB:
// measured on the H200, cuBLAS's own Hopper default (32 MiB) made the small GEMMs of
// a 256-wide MLP (batch 16) 40% slower: with the larger workspace its heuristics pick
// other kernels.
const DefaultWorkspaceSize = 4 << 20

// workspace is a handle's workspace: the buffer, and whether it is set for the
// handle's stream (cublasSetStream resets cuBLAS to its default workspace); and its
// room for a call's host scalars.
type workspace struct {
	buf  *cuda.DeviceBuffer
	set  bool
	scal *scalars
	// size is the context's workspace size as read at workspaceSizes' version ver
	// (0: never read), so that calls look it up only after a SetWorkspaceSize.
	size int
	ver  uint64
}

// scalars is a handle's room for the host scalars of one call (alpha and beta, of
// any scale type up to complex128). cuBLAS reads host scalars before the call
// returns, and a handle serves one call at a time, so calls need not allocate them:
// the address of a Go variable passed to C moves the variable to the heap at every
// call. It is an allocation of its own, holding no Go pointers, as cgo requires of
// memory passed to C.
type scalars [2]complex128

// setScalars stores alpha and beta (16 bytes each at most) in sc and returns their
// addresses there.
func setScalars[T any](sc *scalars, alpha, beta T) (*T, *T) {
	a, b := (*T)(unsafe.Pointer(&sc[0])), (*T)(unsafe.Pointer(&sc[1]))
	*a, *b = alpha, beta
	return a, b
}

// setScalar stores alpha in sc and returns its address there.
func setScalar[T any](sc *scalars, alpha T) *T {
	a := (*T)(unsafe.Pointer(&sc[0]))
	*a = alpha
	return a
}

type handle = cudalib.Handle[cudalib.NoKey, cublasraw.CublasHandle, *cublasraw.OwnedHandle, workspace]

// handles are the idle handles, per context.
var handles = cudalib.NewPool[cublasraw.CublasHandle, *cublasraw.OwnedHandle, workspace](MaxIdleHandles, cublasraw.Create, cublasraw.OwnHandle, false)

// workspaceSizes are the contexts' workspace sizes, in bytes.
var workspaceSizes = cudalib.NewSetting(DefaultWorkspaceSize)

// SetWorkspaceSize sets the workspace size of ctx's cuBLAS handles, in bytes (0: no
// workspace of ours; cuBLAS then uses the handle's default one). Handles made
// earlier get the new size at their next call. The size belongs to ctx: it goes
// when ctx is destroyed (and a later context starts from DefaultWorkspaceSize); on a
// destroyed context SetWorkspaceSize returns an error matching cuda.ErrClosed.
func SetWorkspaceSize(ctx *cuda.Context, bytes int) error {
	if ctx == nil || bytes < 0 {
		return fmt.Errorf("cublas: set workspace size: %w: %d bytes", cuda.ErrInvalidArgument, bytes)
	}
	if err := workspaceSizes.Set(ctx, bytes); err != nil {
		return fmt.Errorf("cublas: set workspace size: %w", err)
	}
	return nil
}

// WorkspaceSize returns the workspace size of ctx's cuBLAS handles, in bytes:
// DefaultWorkspaceSize unless SetWorkspaceSize set another for ctx.
func WorkspaceSize(ctx *cuda.Context) int { return workspaceSizes.Get(ctx) }

// take returns the handle s keeps, an idle handle of ctx (preferably the one last
// bound to s), or a new one, with a workspace of the context's size from the pool,
// allocated on s.
func take(ctx *cuda.Context, s *cuda.Stream, uses []cuda.Use) (*handle, error) {
	h, err := handles.Take(ctx, s, cudalib.NoKey{}, uses...)
	if err != nil {
		return nil, err
	}
	// Usually the handle is ready: the context's size unchanged since it read it,
	// and its workspace allocated.
	if ws := &h.State; ws.scal == nil || ws.ver != workspaceSizes.Version() || ws.buf == nil && ws.size > 0 {
		if err := prepare(ctx, s, h); err != nil {
			handles.Put(s, h)
			return nil, err
		}
	}
	return h, nil
}

// prepare gives h its room for scalars and a workspace of the context's size.
func prepare(ctx *cuda.Context, s *cuda.Stream, h *handle) error {
	ws := &h.State
	if ws.scal == nil {
		ws.scal = new(scalars)
	}
	if v := workspaceSizes.Version(); ws.ver != v {
		ws.size, ws.ver = WorkspaceSize(ctx), v
	}
	size := ws.size
	if ws.buf != nil && ws.buf.Size() != size {
		ws.buf.Close() // ordered after its last use by the hand-off
		// The handle must not keep the old address: unbinding it makes the next
		// bind call cublasSetStream, which resets cuBLAS to its default workspace.
		ws.buf, ws.set = nil, false
		h.Unbind()
	}
	if ws.buf == nil && size > 0 {
		var err error
		if ws.buf, err = ctx.Alloc(s, size); err != nil {
			return fmt.Errorf("allocating the workspace: %w", err)
		}
	}
	return nil
}

// bind binds h to stream st with its workspace set.
func bind(c cudaraw.CUcontext, h *handle, st cudaraw.CUstream) error {
	rebound, err := h.Bind(c, st, cublasraw.SetStreamIn)
	if err != nil {
		return err
	}
	ws := &h.State
	if rebound {
		ws.set = false
	}
	if ws.buf != nil && !ws.set {
		p, err := cuda.DevicePtr[byte](ws.buf)
		if err != nil {
			return err
		}
		if err := cublasraw.SetWorkspaceIn(c, h.Raw, unsafe.Pointer(p), uint64(ws.buf.Size())); err != nil {
			return err
		}
		ws.set = true
	}
	return nil
}

// idleHandles returns the number of idle handles of ctx (tests).
func idleHandles(ctx *cuda.Context) int { return handles.Idle(ctx) }

// call runs f with a handle of s's context bound to s, queued through cuda.Enqueue
// with the memory f uses and the handle's workspace (holds, hand-off), and names the
// operation in errors. The stream and memory are checked before a handle is made
// (cudalib.Pool.Take), so that a bad argument is reported before cuBLAS is loaded.
func call(op string, s *cuda.Stream, f func(ctx cudaraw.CUcontext, h cublasraw.CublasHandle, sc *scalars) error, uses ...cuda.Use) error {
	ctx := s.Context()
	if ctx == nil {
		return opError(op, cuda.CheckEnqueue(s)) // the nil stream's error
	}
	h, err := take(ctx, s, uses)
	if err != nil {
		return opError(op, err)
	}
	defer handles.Put(s, h)
	if h.State.buf != nil {
		// The uses and the workspace's, on the stack for the usual few uses
		// (appending to the caller's variadic slice would allocate at every call),
		// copied by a loop (copy would call the runtime's typedslicecopy). Operations
		// name three operands at most.
		var all [4]cuda.Use
		if len(uses) < len(all) {
			for i, u := range uses {
				all[i] = u
			}
			all[len(uses)] = cuda.Writes(h.State.buf)
			uses = all[:len(uses)+1]
		} else {
			uses = append(uses[:len(uses):len(uses)], cuda.Writes(h.State.buf))
		}
	}
	err = cuda.Enqueue(s, func(c cudaraw.CUcontext, st cudaraw.CUstream) error {
		if err := bind(c, h, st); err != nil {
			return err
		}
		return f(c, h.Raw, h.State.scal)
	}, uses...)
	if err != nil {
		return opError(op, err)
	}
	return nil
}

// opError names the operation in err (out of line: call runs at every operation).
//
//go:noinline
func opError(op string, err error) error { return fmt.Errorf("cublas: %s: %w", op, err) }
