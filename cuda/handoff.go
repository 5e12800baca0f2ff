package cuda

import "context"

// The hand-off's API on every kind of memory: the methods that wait on the host for a
// buffer's uses (Synchronize). Work this package does not see is ordered with the
// buffer's other uses by Enqueue, the one way to hand its address (Ptr, DevicePtr)
// to raw code. Each type has its own methods, so that they work on a nil buffer. The
// machinery, and how it orders uses across streams, is in handoff_state.go.

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

// begin checks m, enters its context and holds m.
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
	return c.faulted(err, "a buffer's Synchronize", nil)
}
