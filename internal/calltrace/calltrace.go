// Package calltrace is the cuda package's one hook for a GPU timeline: the cupti
// package's Timeline sets it while it runs, and each call of the cuda package that
// queues GPU work (a launch, a copy, a memset, Enqueue's call into a library)
// brackets the queueing with it, so that the timeline can name the Go call behind
// every record the GPU reports. With no timeline the cost at each call is one
// atomic load and one branch. It sits in internal/ so that only this module sets it.
package calltrace

import "sync/atomic"

// Hook brackets a call that queues GPU work. Begin runs on the caller's goroutine
// before the call queues anything, with the operation's name ("Launch", "Copy",
// "Memset", "Enqueue"), and returns a token that End, on the same goroutine once the
// call returns, takes back. Begin may lock the goroutine to its thread until End
// (the driver's per-thread state is what ties the work to the call).
type Hook struct {
	Begin func(op string) uint64
	End   func(token uint64)
}

var hook atomic.Pointer[Hook]

// Load returns the hook in place, or nil: the one check at each call site.
func Load() *Hook { return hook.Load() }

// Set puts h in place (nil removes it) and returns the hook it replaced.
func Set(h *Hook) *Hook { return hook.Swap(h) }

// CompareAndSet puts h in place if old is, and reports whether it did: a timeline
// that starts while another runs does not take its place.
func CompareAndSet(old, h *Hook) bool { return hook.CompareAndSwap(old, h) }
