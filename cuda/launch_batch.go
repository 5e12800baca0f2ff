package cuda

import (
	"errors"
	"fmt"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"unsafe"
)

// LaunchBatch collects kernel launches and queues them on a stream in one call into
// the driver. Each launch through Function.Launch crosses from Go into C once, which
// costs a few hundred nanoseconds beside a C program's launch loop; a batch crosses
// once for all its launches, so that each costs about what it costs from C.
//
// Add checks a launch as Launch does (arguments against the kernel's parameters,
// shapes, contexts) and packs its arguments; Submit queues the launches in the order
// they were added. A batch can be submitted again, to any stream of its context, and
// reused after Reset. Device memory passed to Add must stay open until the last
// Submit: Submit checks that it is and fails with ErrClosed otherwise, before queuing
// anything; while Submit queues the launches it holds that memory, so a concurrent
// Close waits for it. The zero LaunchBatch is empty and ready to use; a LaunchBatch
// is not safe for concurrent use, and a nil one is empty and refuses Submit.
type LaunchBatch struct {
	ctx   *Context
	recs  []batchRec
	args  []uint64 // the launches' parameter buffers, 8-byte aligned
	funcs []*Function
	devs  []batchDev
	raw   []rawUse // the stream checker's raw addresses (streamcheck.go)
}

// batchDev is memory used by a batched launch, with the address packed and whether
// the launch writes it.
type batchDev struct {
	m     *memBase
	ptr   cudaraw.CUdeviceptr
	write bool
}

// Len returns the number of launches in the batch (0 for a nil batch).
func (b *LaunchBatch) Len() int {
	if b == nil {
		return 0
	}
	return len(b.recs)
}

// Reset empties the batch, keeping its memory for reuse; it does nothing to a nil
// batch.
func (b *LaunchBatch) Reset() {
	if b == nil {
		return
	}
	clear(b.funcs)
	clear(b.devs)
	b.ctx, b.recs, b.args, b.funcs, b.devs, b.raw = nil, b.recs[:0], b.args[:0], b.funcs[:0], b.devs[:0], b.raw[:0]
}

// Add appends a launch of f with grid×block threads, sharedMem bytes of dynamic
// shared memory and args as its parameters, as Function.Launch takes them. It queues
// nothing: Submit does. It fails, adding nothing, for the errors Launch reports
// before queuing, and with ErrWrongContext for a kernel of another context than the
// batch's earlier launches.
func (b *LaunchBatch) Add(f *Function, grid, block Dim3, sharedMem int, args ...any) error {
	if b == nil {
		return fmt.Errorf("%w: nil *cuda.LaunchBatch", ErrInvalidArgument)
	}
	d, err := f.launchDims(grid, block, sharedMem)
	if err != nil {
		return err
	}
	m := f.mod
	if err := m.ctx.check(); err != nil {
		return err
	}
	if b.ctx != nil && b.ctx.ctxState != m.ctx.ctxState {
		return fmt.Errorf("%w: batching %s (module of context %p) with launches of context %p",
			ErrWrongContext, f.name, m.ctx, b.ctx)
	}
	room := uintptr(inlineParams)
	if f.known {
		room = f.argSize
	}
	start := len(b.args)
	var held opPlan
	size, err := b.pack(f, room, args, &held)
	if errors.Is(err, errParamsTooLarge) { // unknown layout, more than inlineParams
		b.args = b.args[:start]
		size, err = b.pack(f, size, args, &held)
	}
	if err != nil {
		b.args = b.args[:start]
		return err
	}
	b.args = b.args[:start+int((size+7)/8)]
	// pack holds the memory it packed (so it is open): record it, with the address
	// packed, for Submit, which holds it again, and let go. Keeping m past the call
	// is a flow that detach hides from escape analysis; it is sound because this
	// package's memory is always on the heap (its constructors register it).
	held.each(func(m *memBase, write bool) { b.devs = append(b.devs, batchDev{m, m.ptr, write}) })
	held.release()
	if streamCheck.on.Load() {
		b.raw = rawArgs(b.raw, args, callSite()+" (LaunchBatch.Add of "+f.name+")", 0)
	}
	b.recs = append(b.recs, newBatchRec(f.h, d, uintptr(start*8), size))
	b.funcs = append(b.funcs, f)
	b.ctx = m.ctx
	return nil
}

// pack packs args for f into room new bytes at the end of b.args and returns their
// size, holding the memory arguments in p (as packArgs does).
func (b *LaunchBatch) pack(f *Function, room uintptr, args []any, p *opPlan) (uintptr, error) {
	start := len(b.args)
	words := int((room + 7) / 8)
	b.args = append(b.args, make([]uint64, words)...)
	var buf []byte
	if words > 0 {
		buf = unsafe.Slice((*byte)(unsafe.Pointer(&b.args[start])), room)
	}
	return packArgs(buf, f.params, f.known, f.mod.ctx, f.name, args, p)
}

// Submit queues the batch's launches on s, in the order they were added, with one
// call into the driver, and does not wait for them. It fails with ErrClosed if s, a
// kernel's module or device memory passed to Add was closed, and with
// ErrWrongContext if s belongs to another context than the batch; nothing is queued
// then. If the driver rejects a launch, the launches before it stay queued and the
// error names the failed one. Submitting an empty batch does nothing.
func (b *LaunchBatch) Submit(s *Stream) error {
	if b == nil {
		return fmt.Errorf("%w: nil *cuda.LaunchBatch", ErrInvalidArgument)
	}
	if err := checkStream(s); err != nil {
		return err
	}
	if len(b.recs) == 0 {
		return nil
	}
	c := b.ctx.ctxState
	if s.cs != c {
		return fmt.Errorf("%w: submitting a batch of context %p on a stream of context %p", ErrWrongContext, b.ctx, s.ctx)
	}
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	// Hold the memory until the launches are queued, ordered after its conflicting
	// uses on other streams.
	var p opPlan
	defer p.release()
	for i := range b.devs {
		d := &b.devs[i]
		if err := p.hold(d.m, d.write, c); err != nil {
			return fmt.Errorf("cuda: submitting a batch: %w", err)
		}
	}
	p.plan(s.stream)
	if err := p.handOff(s.stream); err != nil {
		return fmt.Errorf("cuda: submitting a batch: %w", err)
	}

	// Each module's read lock (once per module), then the stream's: the kernels are
	// queued while none of them can be closed.
	locked := make([]*Module, 0, 4)
	defer func() {
		for _, m := range locked {
			m.mu.RUnlock()
		}
	}()
	for _, f := range b.funcs {
		m := f.mod
		seen := false
		for _, l := range locked {
			seen = seen || l == m
		}
		if seen {
			continue
		}
		m.mu.RLock()
		locked = append(locked, m)
		if m.closed {
			return fmt.Errorf("cuda: submitting a batch: launching %s: module: %w", f.name, ErrClosed)
		}
		leaseModuleIfCapturing(s.stream, m)
	}
	st := s.stream
	if err := lockOpen(s, st); err != nil {
		return err
	}
	defer st.mu.RUnlock()
	done, err := launchBatch(c.h, st.h, b.recs, b.args)
	// Uses are recorded with the stream's lock held; launches before a failed one
	// stay queued.
	if done > 0 {
		st.kernel.Store(b.funcs[done-1])
		p.record(st)
		if streamCheck.on.Load() && len(b.raw) > 0 {
			checkQueued(b.raw, st, callSite()+" (LaunchBatch.Submit)")
		}
	}
	if err != nil {
		err = c.faulted(err, b.funcs[done].name, st)
		return fmt.Errorf("cuda: submitting a batch: launch %d of %d (%s): %w", done+1, len(b.recs), b.funcs[done].name, err)
	}
	return nil
}
