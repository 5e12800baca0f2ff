package cuda

import (
	"fmt"
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
	if m == nil {
		return nil
	}
	return m.base()
}

// Enqueue queues work that this package does not see on s: it holds s and the
// memory in uses (a concurrent Close waits; a Close before makes Enqueue fail with
// ErrClosed), makes s wait on the GPU for the memory's conflicting uses on other
// streams, calls f with s's context and handle, and records f's uses of the memory.
// f must only queue work on h (it runs with locks held that Close waits for); it
// runs on whatever thread the goroutine is on, with no context made current: call
// functions that take the context (the other packages' wrappers do), or wrap raw
// calls in Context.Locked. If f fails, no use is recorded.
//
// Memory of another context than s's fails with ErrWrongContext, before f runs.
func Enqueue(s *Stream, f func(ctx CUcontext, h CUstream) error, uses ...Use) error {
	if f == nil {
		return fmt.Errorf("%w: nil function", ErrInvalidArgument)
	}
	if err := CheckEnqueue(s, uses...); err != nil {
		return err
	}
	c := s.cs
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	// Hold each memory once: a buffer used twice is written if either use writes.
	held := 0
	defer func() {
		for i := range uses[:held] {
			if !uses[i].dup(uses[:i]) {
				uses[i].m.leave()
			}
		}
	}()
	for i := range uses {
		if !uses[i].dup(uses[:i]) {
			if err := uses[i].m.acquire(); err != nil {
				return err
			}
		}
		held = i + 1
	}
	var wait deps
	var plans [8]planned
	for i := range uses {
		if uses[i].dup(uses[:i]) {
			continue
		}
		p := uses[i].m.plan(s.stream, uses[i].writes(uses), &wait)
		if i < len(plans) {
			plans[i] = p // past the eighth, a use is recorded as if it raced: added
		}
	}
	if wait.n > 0 {
		if err := uses[0].m.ms.handOff(&wait, s.stream); err != nil {
			return errHandOff(err)
		}
	}
	if err := lockOpen(s, s.stream); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	if err := f(c.h, s.h); err != nil {
		return err
	}
	for i := range uses {
		if uses[i].dup(uses[:i]) {
			continue
		}
		p := planned{}
		if i < len(plans) {
			p = plans[i]
		}
		uses[i].m.record(s.stream, uses[i].writes(uses), p)
	}
	return nil
}

// CheckEnqueue returns the error Enqueue(s, f, uses...) would return before f
// runs for a nil, closed or released stream, nil or closed memory, or memory of
// another context than s's, and queues nothing: a library checks its operands with
// it before it makes the handle or plan the work needs (and loads the library).
// Enqueue checks again: a Close between the two is still seen.
func CheckEnqueue(s *Stream, uses ...Use) error {
	if err := checkStream(s); err != nil {
		return err
	}
	// The closed checks read flags without locking: Enqueue sees a Close after them.
	t := s.stream
	t.mu.RLock()
	closed := t.closed || (s.lease != 0 && t.gen.Load() != s.lease)
	t.mu.RUnlock()
	if closed {
		return fmt.Errorf("cuda: stream: %w", ErrClosed)
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
			return fmt.Errorf("cuda: memory of another context than the stream's: %w", ErrWrongContext)
		}
	}
	return nil
}

// dup reports whether an earlier use names the same memory.
func (u Use) dup(earlier []Use) bool {
	for _, e := range earlier {
		if e.m == u.m {
			return true
		}
	}
	return false
}

// writes reports whether any use of u's memory in all writes it.
func (u Use) writes(all []Use) bool {
	for _, e := range all {
		if e.m == u.m && e.write {
			return true
		}
	}
	return false
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
	var prev CUcontext
	if err := CtxGetCurrent(&prev); err != nil {
		return err
	}
	if prev != c.h {
		if err := CtxSetCurrent(c.h); err != nil {
			return err
		}
		defer restoreCurrent(prev)
	}
	return f()
}

// restoreCurrent makes prev, the context current on the thread before Locked, current
// again, unless it has been destroyed since (by another goroutine: the thread kept it
// current): then no context. A context of ours is held while it is made current.
func restoreCurrent(prev CUcontext) {
	if v, ok := contexts.Load(prev); ok {
		cs := v.(*ctxState)
		if cs.enter() == nil {
			_ = CtxSetCurrent(prev)
			cs.exit()
			return
		}
		prev = 0
	} else if _, dead := deadContexts.Load(prev); dead {
		prev = 0
	}
	_ = CtxSetCurrent(prev)
}

// DevicePtr returns m's address as the *T that raw library functions take for GPU
// memory (cublas.Sgemm's *float32, cublas.Cgemm's *cuda.CuComplex), with no unsafe in
// the caller. Memory with an element type (AllocFor, Wrap) must hold T, or a type
// with T's layout: complex64 and CuComplex, complex128 and CuDoubleComplex are the
// same two floats (CuComplex is 8-byte aligned, complex64 4-byte: memory from this
// package is aligned for both). The pointer is a device address: never dereference
// it in Go. It orders nothing: queue the work with Enqueue.
func DevicePtr[T any](m Memory) (*T, error) {
	b := memOf(m)
	if b == nil || b.ctx == nil {
		return nil, fmt.Errorf("%w: nil or zero memory", ErrInvalidArgument)
	}
	if b.etype != nil {
		if t := reflect.TypeFor[T](); t != b.etype && !sameLayout(t, b.etype) {
			return nil, fmt.Errorf("%w: a *%v into memory of %v", ErrInvalidArgument, t, b.etype)
		}
	}
	p := b.ptr
	return *(**T)(unsafe.Pointer(&p)), nil
}

// sameLayout reports whether a and b are the pairs of Go and CUDA complex types.
func sameLayout(a, b reflect.Type) bool {
	pair := func(x, y reflect.Type) bool { return a == x && b == y || a == y && b == x }
	return pair(reflect.TypeFor[complex64](), reflect.TypeFor[CuComplex]()) ||
		pair(reflect.TypeFor[complex128](), reflect.TypeFor[CuDoubleComplex]())
}
