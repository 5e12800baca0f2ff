package rescore

import "sync"

// The drops that run when the cuda package destroys a context (OnContextDestroy), in
// the order they were added.
var (
	ctxDropMu sync.Mutex
	ctxDrops  []func(ctx uintptr)
)

// OnContextDestroy adds drop, to run whenever the cuda package destroys a context,
// with the context's handle (a CUcontext). drop must not call CUDA: it forgets what
// the packages above the cuda package keep for that context (cudalib's idle handles
// and settings), which the driver may give the same handle to a later context.
func OnContextDestroy(drop func(ctx uintptr)) {
	ctxDropMu.Lock()
	ctxDrops = append(ctxDrops, drop)
	ctxDropMu.Unlock()
}

// RunContextDestroy runs the drops OnContextDestroy added, for ctx: the cuda package
// calls it as it destroys the context, once no call is in it and before the driver
// destroys it (and may hand its handle out again).
func RunContextDestroy(ctx uintptr) {
	ctxDropMu.Lock()
	fs := append([]func(uintptr){}, ctxDrops...)
	ctxDropMu.Unlock()
	for _, f := range fs {
		f(ctx)
	}
}
