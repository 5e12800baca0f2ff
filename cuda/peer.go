package cuda

import (
	"errors"
	"fmt"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"sync"
)

// Several GPUs in one process: each device has its primary context with its own
// pools and streams (Device(n).Context()); peer access lets kernels and raw calls of
// one device use another's memory; Copy and CopyAsync move device memory between
// contexts (copyPeer), with the hand-off across devices.
//
// A copy between contexts runs on a stream of one of them (the destination's, or the
// caller's stream, which must belong to either) with cuMemcpyPeerAsync, which needs
// no peer access: the driver stages the copy through the host where the devices do
// not reach each other, and copies directly once EnablePeerAccess gave the copying
// device access to the other's memory. The hand-off orders it as any copy: the
// copying stream waits, on the device, for the conflicting uses of both buffers,
// with an event recorded on each use's stream in that stream's context (a stream may
// wait for an event of another context or device).
//
// Every use of a buffer stays on a stream of the buffer's own context, so that the
// rest of the hand-off (the free, Synchronize, the single-stream fast path, the
// stream checker) never mixes contexts: the buffer of the other context is recorded
// as used on its context's default stream, which first waits for an event recorded
// after the copy. Later uses of either buffer, on either device, and their frees,
// so wait for the copy.

// CanAccessPeer reports whether c's device can access the memory of peer's device
// (cuDeviceCanAccessPeer), which EnablePeerAccess then enables. Two contexts of one
// device, or a context and itself, report false: peer access is between devices.
func (c *Context) CanAccessPeer(peer *Context) (bool, error) {
	if err := c.check(); err != nil {
		return false, err
	}
	if err := peer.check(); err != nil {
		return false, err
	}
	return canAccessPeer(c.dev, peer.dev)
}

func canAccessPeer(from, to Device) (bool, error) {
	if from == to {
		return false, nil
	}
	fh, err := from.handle()
	if err != nil {
		return false, err
	}
	th, err := to.handle()
	if err != nil {
		return false, err
	}
	var v int32
	if err := cudaraw.DeviceCanAccessPeer(&v, fh, th); err != nil {
		return false, fmt.Errorf("cuda: can device %d access device %d: %w", int(from), int(to), err)
	}
	return v != 0, nil
}

// peers remembers the pairs (from, to) whose peer access EnablePeerAccess enabled;
// pairs with a destroyed context are dropped at the next enable.
var peers struct {
	mu sync.Mutex
	on map[[2]*ctxState]struct{}
}

// EnablePeerAccess gives c's device access to peer's memory: kernels and raw calls in
// c may then use the memory of peer's context (cuCtxEnablePeerAccess) and of peer's
// device pool, which DeviceBuffers come from (cuMemPoolSetAccess, read and write for
// c's device: pool memory does not follow cuCtxEnablePeerAccess). Copies between the
// two devices (Copy, CopyAsync) then go directly instead of through the host: enable
// both ways for copies in both directions.
//
// Access is one way and lasts as long as both contexts. A pair is enabled once:
// calling again does nothing, and the driver's CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
// (enabled through the raw layer) counts as success. Where c's device cannot access
// peer's (CanAccessPeer is false, two contexts of one device included) the error
// matches ErrPeerAccessUnsupported and names both devices.
func (c *Context) EnablePeerAccess(peer *Context) error {
	if err := c.check(); err != nil {
		return err
	}
	if err := peer.check(); err != nil {
		return err
	}
	from, to := c.ctxState, peer.ctxState
	fail := func(err error) error {
		return fmt.Errorf("cuda: enabling peer access from device %d to device %d: %w", int(from.dev), int(to.dev), err)
	}
	if from.dev == to.dev {
		return fail(fmt.Errorf("contexts of one device: %w", cudaraw.ErrPeerAccessUnsupported))
	}
	key := [2]*ctxState{from, to}
	peers.mu.Lock()
	defer peers.mu.Unlock()
	if _, ok := peers.on[key]; ok {
		return nil
	}
	ok, err := canAccessPeer(from.dev, to.dev)
	if err != nil {
		return fail(err)
	}
	if !ok {
		return fail(cudaraw.ErrPeerAccessUnsupported)
	}
	if err := from.enter(); err != nil {
		return err
	}
	defer from.exit()
	if err := to.enter(); err != nil {
		return err
	}
	defer to.exit()
	err = cudaraw.CtxEnablePeerAccessIn(from.h, to.h, 0)
	if err != nil && !errors.Is(err, cudaraw.ErrPeerAccessAlreadyEnabled) {
		return fail(err)
	}
	ms, err := to.memory()
	if err != nil {
		return fail(err)
	}
	if err := ms.initDevice(); err != nil {
		return fail(err)
	}
	access := cudaraw.CUmemAccessDesc{
		Location: cudaraw.CUmemLocation{Type: cudaraw.CU_MEM_LOCATION_TYPE_DEVICE, Id: int32(from.dev)},
		Flags:    cudaraw.CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
	}
	if err := cudaraw.MemPoolSetAccessIn(to.h, ms.devPool, &access, 1); err != nil {
		return fail(fmt.Errorf("device %d's memory pool: %w", int(to.dev), err))
	}
	if peers.on == nil {
		peers.on = make(map[[2]*ctxState]struct{})
	}
	for k := range peers.on {
		if k[0].dead.Load() || k[1].dead.Load() {
			delete(peers.on, k)
		}
	}
	peers.on[key] = struct{}{}
	return nil
}

// copyPeer is Copy and CopyAsync (s nil or not) from o into d when they belong to
// different contexts, or when s belongs to another context than theirs. The caller
// checked both buffers (non-nil, open contexts) and that o fits in d.
func copyPeer(s *Stream, d, o *memBase) error {
	dc, oc := d.ctx.ctxState, o.ctx.ctxState
	// t, the copying stream, is of tc: the destination's context unless s is the
	// source's.
	tc := dc
	if s != nil {
		switch {
		case s.cs == dc && dc != oc:
		case s.cs == oc && dc != oc:
			tc = oc
		default:
			return fmt.Errorf("cuda: copying on a stream of another context than the buffers': %w", ErrWrongContext)
		}
	}
	if d.kind != KindDevice || o.kind != KindDevice {
		return fmt.Errorf("cuda: copying %v memory into %v memory of another context (only device memory moves between contexts): %w",
			o.kind, d.kind, ErrWrongContext)
	}
	if s != nil {
		if cs := s.capture.Load(); cs != nil {
			return cs.refuse("copying between contexts")
		}
	}
	if err := dc.enter(); err != nil {
		return err
	}
	defer dc.exit()
	if err := oc.enter(); err != nil {
		return err
	}
	defer oc.exit()
	if err := acquirePair(d, o); err != nil {
		return err
	}
	// tm is the buffer of the copying stream's context, fm the other.
	tm, fm, tWrite := d, o, true
	if tc == oc {
		tm, fm, tWrite = o, d, false
	}
	var done cudaraw.CUevent
	var err error
	if o.size > 0 {
		err = queuePeer(s, tm, tWrite, fm, d, o, &done)
	}
	d.leave()
	o.leave()
	if done != 0 {
		// Wait for the copy holding no lock, then give the event back.
		ms := tm.ms
		if err == nil {
			err = ms.waitEvent(done)
		}
		ms.putEvent(done)
	}
	return err
}

// queuePeer queues the copy from o into d, which the caller holds (tm is the one of
// the copying stream's context, written if tWrite; fm the other), on s or, with s
// nil, on a stream of tm's context, after which it records *waitEv for the caller
// to wait for. The copy is recorded as a use of tm on the copying stream and of fm on
// fm's context's default stream.
func queuePeer(s *Stream, tm *memBase, tWrite bool, fm, d, o *memBase, waitEv *cudaraw.CUevent) error {
	msT, msF := tm.ms, fm.ms
	var t *stream
	if s != nil {
		t = s.stream
	} else {
		ev, err := msT.getEvent()
		if err != nil {
			return err
		}
		*waitEv = ev
		if t = msT.syncStreamFor(tm); t.capture.Load() != nil {
			t = msT.defStream
		}
	}
	dp, dh, sp, sh, n := d.ptr, d.ctx.h, o.ptr, o.ctx.h, uint64(o.size)
	// The stream picked without s may be closed by its owner before the copy is
	// queued: then pick again (the default stream, which is never closed).
	for retry := s == nil && t != msT.defStream; ; retry = false {
		var p opPlan
		p.add(tm, tWrite)
		p.add(fm, !tWrite)
		p.plan(t)
		if err := p.handOff(t); err != nil {
			if retry && errors.Is(err, ErrClosed) {
				t = msT.defStream
				continue
			}
			return err
		}
		if err := lockOpen(s, t); err != nil {
			if retry {
				t = msT.defStream
				continue
			}
			return err
		}
		if err := cudaraw.MemcpyPeerAsyncIn(t.cs.h, dp, dh, sp, sh, n, t.h); err != nil {
			t.mu.RUnlock()
			return err
		}
		// The planner records the copy as tm's use on t; fm's is on its own
		// context's stream, below.
		pt, pf := p.at(0), p.at(1)
		tm.record(t, tWrite, pt.p)
		done, err := msT.getHandoffEvent()
		if err == nil {
			err = cudaraw.EventRecordIn(msT.cs.h, done, t.h)
		}
		if err == nil && s == nil {
			err = cudaraw.EventRecordIn(msT.cs.h, *waitEv, t.h)
		}
		t.mu.RUnlock()
		if err == nil {
			// fm's context's default stream stands for the copy there: it waits for
			// the copy, and later uses of fm wait for it.
			q := msF.defStream
			q.waits.Add(1)
			err = q.use(func(h cudaraw.CUstream) error { return cudaraw.StreamWaitEventIn(msF.cs.h, h, done, 0) })
			if err == nil {
				if streamCheck.on.Load() {
					checkOrdered(t, q)
				}
				fm.record(q, !tWrite, pf.p)
			}
		}
		msT.putHandoffEvent(done)
		if err != nil {
			// The copy is queued but not recorded as fm's use: wait for it, so that
			// fm's free cannot overtake it.
			_ = cudaraw.CtxSynchronizeIn(msT.cs.h)
			return err
		}
		return nil
	}
}
