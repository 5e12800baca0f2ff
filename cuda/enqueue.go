package cuda

import (
	"fmt"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/internal/calltrace"
	"reflect"
	"runtime"
	"unsafe"
)

// Work this package does not queue itself — a call into another library (cuBLAS,
// cuFFT, …) or into the raw layer — goes through Enqueue, which gives it what the
// package's own operations get: its memory held while it is queued, ordered after
// the memory's conflicting uses on other streams, and recorded as their use.

// Use is a memory operand of work queued with Enqueue: Reads(m) or Writes(m).
type Use struct {
	m     *memBase
	write bool
}

// Reads marks m as memory that the work only reads: it waits for m's last write on
// other streams, and later reads on other streams do not wait for it.
func Reads(m Memory) Use { return Use{memOf(m), false} }

// Writes marks m as memory that the work may write: it waits for every earlier use
// of m on other streams, and later uses wait for it.
func Writes(m Memory) Use { return Use{memOf(m), true} }

func memOf(m Memory) *memBase {
	// A DeviceBuffer, the usual operand, by a comparison of the type word rather
	// than a call through the interface's method table.
	if b, ok := m.(*DeviceBuffer); ok {
		return b.base()
	}
	if m == nil {
		return nil
	}
	return m.base()
}

// Enqueue queues work that this package does not see on s, and is the one way to
// hand memory's address (Ptr, DevicePtr) to the raw layer, another library or cgo:
// it holds s and the memory in uses (a concurrent Close waits; a Close before makes
// Enqueue fail with ErrClosed), makes s wait on the GPU for the memory's conflicting
// uses on other streams, calls f with s's context and handle, and records f's uses
// of the memory.
// f must only queue work on h (it runs with locks held that Close waits for); it
// runs on whatever thread the goroutine is on, with no context made current: call
// functions that take the context (the other packages' wrappers do), or wrap raw
// calls in Context.Locked. If f fails, no use is recorded.
//
// Memory of another context than s's fails with ErrWrongContext, before f runs.
func Enqueue(s *Stream, f func(ctx cudaraw.CUcontext, h cudaraw.CUstream) error, uses ...Use) error {
	if f == nil {
		return fmt.Errorf("%w: nil function", ErrInvalidArgument)
	}
	// The stream is checked here, the memory by the plan (CheckEnqueue reads it
	// again).
	if err := checkOpen(s); err != nil {
		return err
	}
	c := s.cs
	if err := c.enter(); err != nil {
		return err
	}
	// One deferred cleanup, which the compiler open-codes (several defers in a
	// function with this many returns cost a runtime call each): a panic in f still
	// ends the holds, unlocks the stream, ends a timeline's bracket and exits the
	// context.
	var q enqueued
	defer q.end(s)
	if h := calltrace.Load(); h != nil { // a timeline runs (cupti): it names the Go call behind the work
		q.trace, q.token = h, h.Begin("Enqueue")
	}
	t := s.stream
	if t.planless() {
		if err := lockOpen(s, t); err != nil {
			return err
		}
		q.locked = true
		if fastUses(c, t, uses) {
			return c.faulted(f(c.h, s.h), "Enqueue", t)
		}
		q.locked = false
		t.mu.RUnlock()
	}
	var p opPlan
	q.p = &p
	for i := range uses {
		if err := p.hold(uses[i].m, uses[i].write, c); err != nil {
			return err
		}
	}
	p.plan(t)
	if err := p.handOff(t); err != nil {
		return err
	}
	if err := lockOpen(s, t); err != nil {
		return err
	}
	q.locked = true
	if err := f(c.h, s.h); err != nil {
		return c.faulted(err, "Enqueue", t)
	}
	p.record(t)
	return nil
}

// fastUses reports whether every use may take the usual operation's path (fastOn),
// each by its own flag: a read and a write of one memory pass only when a write on
// t is its one use. The caller holds t's read lock.
func fastUses(c *ctxState, t *stream, uses []Use) bool {
	for i := range uses {
		if !uses[i].m.fastOn(c, t, uses[i].write) {
			return false
		}
	}
	return true
}

// enqueued is an Enqueue's progress, for its cleanup: the stream's read lock and
// the plan of the general path, whose holds it ends.
type enqueued struct {
	locked bool
	p      *opPlan
	trace  *calltrace.Hook // a timeline's hook, and its token, while one runs
	token  uint64
}

// end unlocks the stream, ends the plan's holds and exits the context Enqueue
// entered.
func (q *enqueued) end(s *Stream) {
	if q.locked {
		s.mu.RUnlock()
	}
	if q.p != nil {
		q.p.release()
	}
	if q.trace != nil {
		q.trace.End(q.token)
	}
	s.cs.exit()
}

// CheckEnqueue returns the error Enqueue(s, f, uses...) would return before f
// runs for a nil, closed or released stream, nil or closed memory, or memory of
// another context than s's, and queues nothing: a library checks its operands with
// it before it makes the handle or plan the work needs (and loads the library).
// Enqueue checks again: a Close between the two is still seen.
func CheckEnqueue(s *Stream, uses ...Use) error {
	if err := checkOpen(s); err != nil {
		return err
	}
	c := s.cs
	for i := range uses {
		m := uses[i].m
		if err := m.check(); err != nil {
			return err
		}
		if m.hold.closed() || m.owner().hold.closed() {
			return errMemClosed[m.kind]
		}
		if m.ctx.ctxState != c {
			return errWrongContext
		}
	}
	return nil
}

// errWrongContext is the error for memory of another context than the stream's.
var errWrongContext = fmt.Errorf("cuda: memory of another context than the stream's: %w", ErrWrongContext)

// checkOpen returns CheckEnqueue's error for a nil, closed or released stream.
func checkOpen(s *Stream) error {
	if err := checkStream(s); err != nil {
		return err
	}
	// The closed checks read flags without locking (an atomic load each, no
	// read-modify-write): Enqueue sees a Close after them under the stream's lock.
	t := s.stream
	if t.closed.Load() || (s.lease != 0 && t.gen.Load() != s.lease) {
		return errStreamClosed
	}
	return nil
}

// Locked runs f on the calling goroutine locked to its thread with the context
// current, and then restores the thread's previous context: the way to call the
// raw layer (which, as in C, runs in the thread's current context) without caring
// which thread the goroutine is on. The context is held while f runs.
func (c *Context) Locked(f func() error) error {
	if err := c.check(); err != nil {
		return err
	}
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var prev cudaraw.CUcontext
	if err := cudaraw.CtxGetCurrent(&prev); err != nil {
		return err
	}
	if prev != c.h {
		if err := cudaraw.CtxSetCurrent(c.h); err != nil {
			return err
		}
		defer restoreCurrent(prev)
	}
	return f()
}

// restoreCurrent makes prev, the context current on the thread before Locked, current
// again, unless it has been destroyed since (by another goroutine: the thread kept it
// current): then no context. A context of ours is held while it is made current.
func restoreCurrent(prev cudaraw.CUcontext) {
	if v, ok := contexts.Load(prev); ok {
		cs := v.(*ctxState)
		if cs.enter() == nil {
			_ = cudaraw.CtxSetCurrent(prev)
			cs.exit()
			return
		}
		prev = 0
	} else if _, dead := deadContexts.Load(prev); dead {
		prev = 0
	}
	_ = cudaraw.CtxSetCurrent(prev)
}

// DevicePtr returns m's address (Ptr) as the *T that raw library functions take for GPU
// memory (cublasraw.Sgemm's *float32, cublasraw.Cgemm's *cudaraw.CuComplex), with no unsafe in
// the caller. Memory with an element type (AllocFor, Wrap) must hold T, or a type
// with T's layout: complex64 and cudaraw.CuComplex, complex128 and CuDoubleComplex are the
// same two floats (CuComplex is 8-byte aligned, complex64 4-byte: memory from this
// package is aligned for both). The pointer is a device address: never dereference
// it in Go. It orders nothing: queue the work with Enqueue, listing m in its uses.
func DevicePtr[T any](m Memory) (*T, error) {
	b := memOf(m)
	if b == nil || b.ctx == nil || b.etypeID != nil && b.etypeID != typeWord(reflect.TypeFor[T]()) {
		if err := devicePtrError(b, reflect.TypeFor[T]()); err != nil {
			return nil, err
		}
	}
	p := b.ptr
	return *(**T)(unsafe.Pointer(&p)), nil
}

// typeWord returns t's type descriptor, the data word of the interface: two
// reflect.Types are equal when their words are (reflect has one implementation,
// *rtype). Comparing the interfaces calls the runtime (ifaceeq); every library
// call's operands are checked this way.
func typeWord(t reflect.Type) unsafe.Pointer { return (*[2]unsafe.Pointer)(unsafe.Pointer(&t))[1] }

// devicePtrError is DevicePtr's error for a *t into b, or nil when t and b's
// element type are a Go and a CUDA complex type of one layout (out of line:
// library calls run DevicePtr for every operand).
//
//go:noinline
func devicePtrError(b *memBase, t reflect.Type) error {
	switch {
	case b == nil || b.ctx == nil:
		return fmt.Errorf("%w: nil or zero memory", ErrInvalidArgument)
	case !sameLayout(t, b.etype):
		return fmt.Errorf("%w: a *%v into memory of %v", ErrInvalidArgument, t, b.etype)
	}
	return nil
}

// sameLayout reports whether a and b are the pairs of Go and CUDA complex types.
func sameLayout(a, b reflect.Type) bool {
	pair := func(x, y reflect.Type) bool { return a == x && b == y || a == y && b == x }
	return pair(reflect.TypeFor[complex64](), reflect.TypeFor[cudaraw.CuComplex]()) ||
		pair(reflect.TypeFor[complex128](), reflect.TypeFor[cudaraw.CuDoubleComplex]())
}
