package cuda

import "C"

import (
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"sync"
	"unsafe"
)

// Host nodes (Graph.AddHost) call a Go function on a thread of the driver. The node's
// user data is C memory holding the function's id in hostFns, never a Go pointer.
// The function stays registered while a graph or executable has the node (its lease
// sets count it) and while calls queued by launches have not run, so that a replay
// queued before the last Close still finds it.

// hostFunc is the Go function of a host node.
type hostFunc struct {
	id  uintptr
	f   func()
	arg unsafe.Pointer // C memory holding id: the node's user data

	mu     sync.Mutex
	leases int // lease sets that have the node
	queued int // calls queued by launches that have not run yet
}

var (
	hostFnMu   sync.Mutex
	hostFns    = map[uintptr]*hostFunc{}
	hostFnNext uintptr
)

// newHostFunc registers f; the caller leases it to a set or drops it.
func newHostFunc(f func()) (*hostFunc, error) {
	hostFnMu.Lock()
	defer hostFnMu.Unlock()
	hostFnNext++
	hf := &hostFunc{id: hostFnNext, f: f}
	if hf.arg = newHostFnArg(hf.id); hf.arg == nil {
		return nil, cudaraw.ErrOutOfMemory
	}
	hostFns[hf.id] = hf
	return hf, nil
}

//export gocudaHostFn
func gocudaHostFn(p unsafe.Pointer) {
	hostFnMu.Lock()
	hf := hostFns[*(*uintptr)(p)]
	hostFnMu.Unlock()
	if hf == nil {
		return // not reached: a queued call keeps its function registered
	}
	defer hf.update(0, -1)
	hf.f()
}

// update changes the counts of lease sets and queued calls by dl and dq, and
// unregisters hf when both are zero.
func (hf *hostFunc) update(dl, dq int) {
	hf.mu.Lock()
	hf.leases += dl
	hf.queued += dq
	done := hf.leases == 0 && hf.queued <= 0
	hf.mu.Unlock()
	if done {
		hostFnMu.Lock()
		_, ok := hostFns[hf.id]
		delete(hostFns, hf.id)
		hostFnMu.Unlock()
		if ok {
			freeHostFnArg(hf.arg)
		}
	}
}
