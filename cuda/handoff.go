package cuda

import (
	"context"
	"fmt"

	"github.com/gocuda/gocuda/cuda/cudaraw"
)

// The hand-off's API: the methods that order work this package does not see with a
// buffer's other uses (UseOn), wait for them (Synchronize) or hand the memory to
// foreign code (ForeignPtr), on every kind of memory. Each type has its own, so that
// they work on a nil buffer. The machinery, and how it orders uses across streams,
// is in handoff_state.go.

// Access says how work that this package does not see uses memory (UseOn).
type Access int

const (
	// Write is work that may write the memory: it waits for every earlier use on
	// other streams, and later uses wait for it.
	Write Access = iota
	// Read is work that only reads the memory: it waits for the last write on
	// other streams only, and later reads on other streams do not wait for it.
	Read
)

// UseOn orders work that this package does not see — queued on s through the raw
// layer, another library or cgo — with the buffer's other uses: s waits on the device
// for the earlier conflicting uses on other streams (for a Read, the last write; for
// a Write, every use), and later uses, and the free, wait for s. Call it before
// queuing that work, as PyTorch's record_stream but ordering both ways.
func (b *DeviceBuffer) UseOn(s *Stream, a Access) error { return useOn(b.base(), s, a) }

// UseOn is DeviceBuffer.UseOn.
func (b *HostBuffer) UseOn(s *Stream, a Access) error { return useOn(b.base(), s, a) }

// UseOn is DeviceBuffer.UseOn.
func (b *ManagedBuffer) UseOn(s *Stream, a Access) error { return useOn(b.base(), s, a) }

// UseOn is DeviceBuffer.UseOn.
func (b *WrappedBuffer) UseOn(s *Stream, a Access) error { return useOn(b.base(), s, a) }

// Synchronize waits on the host until every use of the buffer queued so far, on any
// stream, has finished (and, through the hand-off, the work those uses waited for).
func (b *DeviceBuffer) Synchronize() error { return syncMem(context.Background(), b.base()) }

// Synchronize is DeviceBuffer.Synchronize: after it the host may read what the GPU
// wrote into the memory, and write what the GPU will read.
func (b *HostBuffer) Synchronize() error { return syncMem(context.Background(), b.base()) }

// Synchronize is HostBuffer.Synchronize. Unified memory is coherent only between
// kernels: synchronize before the host touches memory that GPU work uses.
func (b *ManagedBuffer) Synchronize() error { return syncMem(context.Background(), b.base()) }

// Synchronize is HostBuffer.Synchronize, for the Go slice the buffer wraps.
func (b *WrappedBuffer) Synchronize() error { return syncMem(context.Background(), b.base()) }

// SynchronizeContext is Synchronize, returning early with ctx's error once ctx is
// done.
func (b *DeviceBuffer) SynchronizeContext(ctx context.Context) error { return syncMem(ctx, b.base()) }

// SynchronizeContext is Synchronize, returning early with ctx's error once ctx is
// done.
func (b *HostBuffer) SynchronizeContext(ctx context.Context) error { return syncMem(ctx, b.base()) }

// SynchronizeContext is Synchronize, returning early with ctx's error once ctx is
// done.
func (b *ManagedBuffer) SynchronizeContext(ctx context.Context) error { return syncMem(ctx, b.base()) }

// SynchronizeContext is Synchronize, returning early with ctx's error once ctx is
// done.
func (b *WrappedBuffer) SynchronizeContext(ctx context.Context) error { return syncMem(ctx, b.base()) }

// ForeignPtr waits until every use of the buffer queued so far has finished, then
// returns its address: the one way to hand the memory to code that this package
// does not order (cgo, another library, a raw call on a stream of its own). The
// address stays valid until Close; keep the buffer reachable while it is used. Work
// that the foreign code queues on a stream should be announced with UseOn instead.
func (b *DeviceBuffer) ForeignPtr() (cudaraw.CUdeviceptr, error) { return foreignPtr(b.base()) }

// ForeignPtr is DeviceBuffer.ForeignPtr.
func (b *HostBuffer) ForeignPtr() (cudaraw.CUdeviceptr, error) { return foreignPtr(b.base()) }

// ForeignPtr is DeviceBuffer.ForeignPtr.
func (b *ManagedBuffer) ForeignPtr() (cudaraw.CUdeviceptr, error) { return foreignPtr(b.base()) }

// ForeignPtr is DeviceBuffer.ForeignPtr.
func (b *WrappedBuffer) ForeignPtr() (cudaraw.CUdeviceptr, error) { return foreignPtr(b.base()) }

// useOn is UseOn for every kind of memory.
func useOn(m *memBase, s *Stream, a Access) error {
	if err := m.check(); err != nil {
		return err
	}
	if err := checkStream(s); err != nil {
		return err
	}
	if a != Read && a != Write {
		return fmt.Errorf("%w: access %d", ErrInvalidArgument, int(a))
	}
	if s.cs != m.ctx.ctxState {
		return fmt.Errorf("cuda: using memory on a stream of another context: %w", ErrWrongContext)
	}
	if err := m.begin(); err != nil {
		return err
	}
	defer m.end()
	write := a == Write
	var d deps
	p := m.plan(s.stream, write, &d)
	if d.n > 0 {
		if err := m.ms.handOff(&d, s.stream); err != nil {
			return errHandOff(err)
		}
	}
	if err := lockOpen(s, s.stream); err != nil {
		return err
	}
	m.record(s.stream, write, p)
	checkUsed(m, s.stream)
	s.mu.RUnlock()
	return nil
}

// begin checks m, enters its context and holds m, until end.
func (m *memBase) begin() error {
	if err := m.check(); err != nil {
		return err
	}
	c := m.ctx.ctxState
	if err := c.enter(); err != nil {
		return err
	}
	if err := m.acquire(); err != nil {
		c.exit()
		return err
	}
	return nil
}

// end ends begin.
func (m *memBase) end() {
	m.leave()
	m.ctx.ctxState.exit()
}

// syncMem waits on the host, honouring ctx, for every use of m recorded so far.
func syncMem(ctx context.Context, m *memBase) error {
	if err := m.begin(); err != nil {
		return err
	}
	c := m.ctx.ctxState
	defer c.exit()
	var d deps
	m.snapshotUses(&d)
	ms := m.ms
	fences := make([]fence, 0, d.n)
	var err error
	for i := range d.n {
		var f fence
		if f, err = ms.fenceAfter(*d.at(i)); err != nil {
			break
		}
		fences = append(fences, f)
	}
	m.leave()
	for i := range fences {
		if err == nil {
			err = fences[i].waitContext(ctx, ms)
		}
		fences[i].clear(ms)
	}
	return err
}

// foreignPtr waits for every use of m and returns its address.
func foreignPtr(m *memBase) (cudaraw.CUdeviceptr, error) {
	if err := syncMem(context.Background(), m); err != nil {
		return 0, err
	}
	checkForget(m.owner()) // nothing outstanding: no address of Ptr to watch
	return m.ptr, nil
}
