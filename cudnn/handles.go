package cudnn

import (
	"fmt"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cudalib"
	"github.com/gocuda/gocuda/cudnn/cudnnraw"
)

// Handles: the operations take a cuDNN handle of their stream's context from a cache
// and give it back; the user never holds one. A handle is costly to make (cudnnCreate
// loads kernels and allocates on the device) and cudnnDestroy waits for the GPU, so
// handles are kept: each stream keeps the handle of its last call for its next one,
// and each context's cache at most MaxIdleHandles more, of which a call takes the one
// last bound to its own stream when there is one (cudalib). A handle the
// cache has no room for, or drops at resource.Reclaim, is left to its OwnedHandle, whose
// release runs in resource.Reclaim (blocking class, in headers/cudnn.toml): never on
// a goroutine that would wait for the GPU.

// MaxIdleHandles is how many idle cuDNN handles a context's cache keeps, besides the
// one each stream keeps.
const MaxIdleHandles = 4

// handles are the idle handles, per context. cudnnCreate runs one at a time: cuDNN
// asks for the first one to be made alone before threads make theirs ("Thread
// Safety" in its developer guide), and handles are made rarely (they are cached).
var handles = cudalib.NewPool[cudnnraw.CudnnHandle, *cudnnraw.OwnedHandle, struct{}](MaxIdleHandles, cudnnraw.Create, cudnnraw.OwnHandle, true)

// idleHandles returns the number of idle handles of ctx (tests).
func idleHandles(ctx *cuda.Context) int { return handles.Idle(ctx) }

// call runs f with a handle of s's context bound to s, queued through cuda.Enqueue
// with the memory f uses (holds, hand-off), and names the operation in errors.
func call(op string, s *cuda.Stream, f func(ctx cudaraw.CUcontext, h cudnnraw.CudnnHandle) error, uses ...cuda.Use) error {
	if err := run(s, f, uses...); err != nil {
		return wrap(op, err)
	}
	return nil
}

// run is call without the operation's name, for the steps of an operation.
func run(s *cuda.Stream, f func(ctx cudaraw.CUcontext, h cudnnraw.CudnnHandle) error, uses ...cuda.Use) error {
	return handles.Run(s, cudalib.NoKey{}, cudnnraw.SetStreamIn, f, uses...)
}

// wrap names the operation in an error: "cudnn: convolution forward: ...".
func wrap(op string, err error) error { return fmt.Errorf("cudnn: %s: %w", op, err) }
