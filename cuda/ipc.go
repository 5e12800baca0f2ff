package cuda

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"unsafe"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/internal/errs"
	"github.com/gocuda/gocuda/resource"
)

// IPC of memory and events between processes of one host (docs/ipc.md): a
// SharedPool is a device memory pool that another process may import through a file
// descriptor passed over a Unix socket (ipc_conn.go); its buffers are ordinary
// DeviceBuffers, handed over with IPCExport.Send and received as ordinary
// DeviceBuffers of the importer's context with IPCImport.Receive. Interprocess
// events carry the hand-off's ordering across the processes.

// ErrPeerGone is the error of an IPC operation whose peer process closed the
// connection or died.
var ErrPeerGone = errors.New("cuda: IPC peer gone")

// ErrPeerRefused is the error of an IPC connection that the exporter refused: the
// peer's credentials are not among those allowed, or the pool is imported already.
var ErrPeerRefused = errors.New("cuda: IPC peer refused")

// SharedPool is a device memory pool whose memory another process can import
// (cuMemPoolCreate with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR). Alloc takes
// DeviceBuffers from it; Listen lets one importer, whose credentials the exporter
// allows, import it. A pool is imported at most once, by one process.
//
// A SharedPool is safe for concurrent use. Close destroys the pool: the driver
// keeps its memory until the buffers allocated from it are freed (here and in the
// importer).
type SharedPool struct {
	ctx  *Context
	ms   *memState
	pool cudaraw.CUmemoryPool
	reg  *resource.Registration

	mu       sync.Mutex
	imported bool                 // an importer was accepted: no one else ever is
	live     map[uintptr]struct{} // the pool's live buffers, by their memBase's address
}

// owns reports whether m is a live buffer of the pool.
func (p *SharedPool) owns(m *memBase) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.live[uintptr(unsafe.Pointer(m))]
	return ok
}

// NewSharedPool creates a memory pool on c's device whose memory can be exported to
// another process. Its freed memory stays in the pool for reuse (release threshold
// unlimited) until the pool is closed.
func (c *Context) NewSharedPool() (*SharedPool, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	ms, err := c.memory()
	if err != nil {
		return nil, err
	}
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.exit()
	props := cudaraw.CUmemPoolProps{
		AllocType:   cudaraw.CU_MEM_ALLOCATION_TYPE_PINNED,
		HandleTypes: cudaraw.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
		Location:    cudaraw.CUmemLocation{Type: cudaraw.CU_MEM_LOCATION_TYPE_DEVICE, Id: int32(c.dev)},
	}
	threshold := uint64(math.MaxUint64)
	pool, err := ms.createPool(&props, &threshold, true)
	if err != nil {
		return nil, fmt.Errorf("cuda: shared pool on device %d: %w", int(c.dev), err)
	}
	p := &SharedPool{ctx: c, ms: ms, pool: pool, live: make(map[uintptr]struct{})}
	p.reg = resource.ResourceFinalizer((*SharedPool).destroy, p, false,
		resource.Kind("cuMemPoolDestroy"), resource.WithContext(c.res()), resource.CallerSkip(1))
	return p, nil
}

// Close destroys the pool. Buffers allocated from it stay valid until they are freed.
// Closing again returns an error matching ErrClosed.
func (p *SharedPool) Close() error {
	if p == nil {
		return errs.Closed("cuda: shared pool")
	}
	return closeError("cuda: shared pool", p.reg.Release())
}

func (p *SharedPool) destroy() error {
	c := p.ctx.ctxState
	if c.enter() != nil {
		return resource.ErrContextDestroyed
	}
	defer c.exit()
	return cudaraw.MemPoolDestroyIn(c.h, p.pool)
}

// Context returns the pool's context.
func (p *SharedPool) Context() *Context { return p.ctx }

// Alloc allocates bytes from the pool on s (a stream of the pool's context), as
// Context.Alloc does from the device's pool: the buffer is an ordinary DeviceBuffer,
// ordered by the hand-off, and may be sent to the pool's importer (IPCExport.Send).
// Its Close frees it after its uses, and, while the importer holds it, only once the
// importer released it.
func (p *SharedPool) Alloc(s *Stream, bytes int) (*DeviceBuffer, error) {
	if err := checkSize(bytes); err != nil {
		return nil, err
	}
	if p == nil || p.ctx == nil {
		return nil, fmt.Errorf("%w: nil shared pool", ErrInvalidArgument)
	}
	if err := checkStream(s); err != nil {
		return nil, err
	}
	c := p.ctx
	if s.cs != c.ctxState {
		return nil, fmt.Errorf("cuda: allocating from a shared pool on a stream of another context: %w", ErrWrongContext)
	}
	if s.capture.Load() != nil {
		return nil, fmt.Errorf("cuda: allocating from a shared pool on a capturing stream: %w", ErrInvalidArgument)
	}
	resource.Drain()
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.exit()
	ms := p.ms
	b := &DeviceBuffer{m: memBase{ctx: c, ms: ms, size: bytes, elem: 1, kind: KindDevice}}
	alloc := func() (uint64, error) {
		t := s.stream
		if lockOpen(s, t) != nil {
			return 0, errAllocClosed()
		}
		gen := t.gen.Load()
		err := cudaraw.MemAllocFromPoolAsyncIn(c.h, &b.m.ptr, uint64(bytes), p.pool, t.h)
		t.mu.RUnlock()
		return gen, err
	}
	gen, err := alloc()
	if errors.Is(err, cudaraw.ErrOutOfMemory) {
		_ = cudaraw.MemPoolTrimToIn(c.h, p.pool, 0)
		ms.reclaimForOOM()
		gen, err = alloc()
	}
	if err != nil {
		if errors.Is(err, ErrClosed) {
			return nil, err
		}
		return nil, allocError(bytes, err)
	}
	b.m.allocated(s.stream, gen)
	p.mu.Lock()
	p.live[uintptr(unsafe.Pointer(&b.m))] = struct{}{}
	p.mu.Unlock()
	b.m.reg = resource.ResourceFinalizer(func(b *DeviceBuffer) error { return p.free(b) }, b, false,
		resource.Kind("cuMemFreeAsync (shared pool)"), resource.WithContext(ms.cs.res()), resource.CallerSkip(1))
	ms.track(&b.m, nil, 1)
	return b, nil
}

// free is the release of a buffer of the pool: after its last lease (an importer
// holding it), after every use, never into a stream's cache (whose blocks are the
// device pool's).
func (p *SharedPool) free(b *DeviceBuffer) error {
	if b.m.postpone(func() error { return p.free(b) }, false) {
		return nil
	}
	p.mu.Lock()
	delete(p.live, uintptr(unsafe.Pointer(&b.m)))
	p.mu.Unlock()
	uses := b.m.retire()
	c := b.m.ctx
	if c.enter() != nil {
		return resource.ErrContextDestroyed
	}
	defer c.exit()
	return b.m.ms.freeAsync(b.m.ptr, uses, nil)
}

// exportFD returns a new file descriptor for the pool, for the importer.
func (p *SharedPool) exportFD() (int, error) {
	var fd int32 = -1
	err := p.ctx.Locked(func() error {
		return cudaraw.MemPoolExportToShareableHandle(unsafe.Pointer(&fd), p.pool, cudaraw.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0)
	})
	if err != nil {
		return -1, fmt.Errorf("cuda: exporting a shared pool: %w", err)
	}
	return int(fd), nil
}

// claim marks the pool imported; false if it was already.
func (p *SharedPool) claim() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.imported {
		return false
	}
	p.imported = true
	return true
}

// ipcEvents are one side's interprocess events (CU_EVENT_INTERPROCESS |
// CU_EVENT_DISABLE_TIMING), by index, with their handles, and the peer's events it
// opened, by the peer's index. An own event is recorded for one message and free
// again once the peer has queued its wait for it (the peer says so). The peer's
// events are opened only until the peer says goodbye (shutPeer): it destroys them
// after that.
type ipcEvents struct {
	ctx *Context

	mu      sync.Mutex
	own     []cudaraw.CUevent
	handles []cudaraw.CUipcEventHandle
	free    []uint32
	peer    map[uint32]cudaraw.CUevent
	shut    bool // the peer said goodbye: its events are not opened again
	ownGone bool // the own events are destroyed (closeOwn): none is taken again
	closed  bool
}

// take returns a free own event, creating one if none is.
func (e *ipcEvents) take() (uint32, cudaraw.CUevent, *cudaraw.CUipcEventHandle, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || e.ownGone {
		return 0, 0, nil, ErrPeerGone
	}
	if n := len(e.free); n > 0 {
		i := e.free[n-1]
		e.free = e.free[:n-1]
		return i, e.own[i], &e.handles[i], nil
	}
	var ev cudaraw.CUevent
	var h cudaraw.CUipcEventHandle
	c := e.ctx
	err := c.Locked(func() error {
		if err := cudaraw.EventCreate(&ev, uint32(cudaraw.CU_EVENT_INTERPROCESS|cudaraw.CU_EVENT_DISABLE_TIMING)); err != nil {
			return err
		}
		if err := cudaraw.IpcGetEventHandle(&h, ev); err != nil {
			_ = cudaraw.EventDestroy(ev)
			return err
		}
		return nil
	})
	if err != nil {
		return 0, 0, nil, fmt.Errorf("cuda: creating an interprocess event: %w", err)
	}
	e.own = append(e.own, ev)
	e.handles = append(e.handles, h)
	i := uint32(len(e.own) - 1)
	return i, ev, &e.handles[i], nil
}

// give makes own event i free again.
func (e *ipcEvents) give(i uint32) {
	e.mu.Lock()
	if int(i) < len(e.own) {
		e.free = append(e.free, i)
	}
	e.mu.Unlock()
}

// open returns the peer's event i, opening its handle the first time.
func (e *ipcEvents) open(i uint32, h *cudaraw.CUipcEventHandle) (cudaraw.CUevent, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || e.shut {
		return 0, ErrPeerGone
	}
	if ev, ok := e.peer[i]; ok {
		return ev, nil
	}
	var ev cudaraw.CUevent
	if err := e.ctx.Locked(func() error { return cudaraw.IpcOpenEventHandle(&ev, *h) }); err != nil {
		return 0, fmt.Errorf("cuda: opening the peer's interprocess event: %w", err)
	}
	if e.peer == nil {
		e.peer = make(map[uint32]cudaraw.CUevent)
	}
	e.peer[i] = ev
	return ev, nil
}

// shutPeer refuses every later open: the peer said goodbye, and destroys its events
// once this side answered.
func (e *ipcEvents) shutPeer() {
	e.mu.Lock()
	e.shut = true
	e.mu.Unlock()
}

// closeOwn destroys the own events: the peer opens none of them again (it said so,
// or the goodbye's wait ran out); the peer's stay open while its messages come.
func (e *ipcEvents) closeOwn() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || e.ownGone {
		return
	}
	e.ownGone = true
	e.destroy(e.own)
	e.own, e.handles, e.free = nil, nil, nil
}

// close destroys the events (the peer's opened ones, then the own ones): the
// connection is over, so no message names them again.
func (e *ipcEvents) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	e.closed = true
	e.destroy(slices.Collect(maps.Values(e.peer)))
	e.destroy(e.own)
	e.peer, e.own, e.handles, e.free = nil, nil, nil, nil
}

// destroy destroys evs, unless the context is gone (they went with it).
func (e *ipcEvents) destroy(evs []cudaraw.CUevent) {
	c := e.ctx.ctxState
	if len(evs) == 0 || c.enter() != nil {
		return
	}
	defer c.exit()
	for _, ev := range evs {
		_ = cudaraw.EventDestroyIn(c.h, ev)
	}
}

// waitOn makes later uses of m (write: as a write, else as a read) wait on the
// device for ev, an event of the peer: m is recorded as used on the context's
// default stream after it waited for ev, so that the hand-off orders every later
// use (and m's free) after it. m may be closed with its free postponed (a lease):
// nothing else uses it then.
func waitOn(m *memBase, ev cudaraw.CUevent, write bool) error {
	ms := m.ms
	c := ms.cs
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	held := m.acquire() == nil
	if held {
		defer m.leave()
	}
	q := ms.defStream
	q.waits.Add(1)
	if err := q.use(func(h cudaraw.CUstream) error { return cudaraw.StreamWaitEventIn(c.h, h, ev, 0) }); err != nil {
		return err
	}
	m.record(q, write, planned{})
	return nil
}
