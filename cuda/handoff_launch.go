package cuda

import (
	"unsafe"

	"github.com/gocuda/gocuda/cuda/cudaraw"
)

// A launch's hand-off: Launch's general path plans its memory arguments with the
// planner (plan.go), and waits on the device for the conflicting uses on other
// streams fused with the launch, in one call into C for up to maxFused streams.

// launchPlanned is Launch's general path, after packArgs held the memory arguments
// in p: it plans their uses and queues the launch, through cuLaunchKernelEx with
// ex's attributes when ex is not nil (LaunchWith).
func (f *Function) launchPlanned(s *Stream, d launchShape, params []byte, p *opPlan, ex *launchAttrs) error {
	t := s.stream
	p.plan(t)
	if p.wait.n > maxFused || (ex != nil && p.wait.n > 0) {
		// Rare: more streams to wait for than one call takes, or a configured
		// launch, which the fused call does not make.
		if err := p.handOff(t); err != nil {
			p.release()
			s.cs.exit()
			return err
		}
	}
	return f.queue(s, d, params, p, ex)
}

// queue launches f on s under the module's read lock and then the stream's (s.use,
// without its closure), so that neither can be closed meanwhile: after p's uses to
// wait for on the GPU, recording the uses p planned. It releases p's holds and
// exits the context that Launch entered.
func (f *Function) queue(s *Stream, d launchShape, params []byte, p *opPlan, ex *launchAttrs) error {
	m, c := f.mod, s.cs
	var err error
	m.mu.RLock()
	if m.closed {
		err = errLaunchModuleClosed
	} else {
		st := s.stream
		if st.capture.Load() != nil { // the test in line: every launch makes it
			leaseModuleIfCapturing(st, m)
		}
		if p.wait.n > 0 {
			// A hand-off: the waits and the launch in one call.
			if err = launchAfter(p.at(0).m.ms, &p.wait, s, c.h, f.h, d, params); err == nil {
				st.kernel.Store(f)
				p.record(st)
			}
		} else if err = lockOpen(s, st); err == nil {
			if ex != nil {
				err = launchEx(c.h, f.h, d, st.h, params, ex)
			} else {
				err = launchPacked(c.h, f.h, d, st.h, params)
			}
			if err == nil {
				st.kernel.Store(f)
				p.record(st)
			}
			st.mu.RUnlock()
		}
	}
	m.mu.RUnlock()
	p.release()
	c.exit()
	if err != nil {
		return f.launchError(err, s)
	}
	return nil
}

// maxFused is the most streams a launch waits for in its one call into C.
const maxFused = 4

// launchAfter launches f on s after waiting, on the device, for the uses in d (at
// most maxFused): it read-locks the streams of the uses and s, in address order
// (so that two launches handing off in opposite directions cannot deadlock against
// a Close), takes an event per use, and makes one call into C that records each on
// its stream (a closed stream's final event is recorded already), makes s wait for
// them and launches.
func launchAfter(ms *memState, d *deps, s *Stream, ctx cudaraw.CUcontext, f cudaraw.CUfunction, sh launchShape, params []byte) error {
	n := d.n
	var evs, from [maxFused]uint64
	var lock [maxFused + 1]*stream
	for i := range n {
		ev, err := ms.getHandoffEvent()
		if err != nil {
			for j := range i {
				ms.putHandoffEvent(cudaraw.CUevent(evs[j]))
			}
			return err
		}
		evs[i] = uint64(ev)
		lock[i] = d.at(i).s
	}
	pooled := evs
	put := func() {
		for i := range n {
			ms.putHandoffEvent(cudaraw.CUevent(pooled[i]))
		}
	}
	st := s.stream
	lock[n] = st
	locks := lock[:n+1]
	for i := 1; i < len(locks); i++ { // insertion sort by address: a few entries
		for j := i; j > 0 && uintptr(unsafe.Pointer(locks[j])) < uintptr(unsafe.Pointer(locks[j-1])); j-- {
			locks[j], locks[j-1] = locks[j-1], locks[j]
		}
	}
	unlock := func(k int) {
		for _, x := range locks[:k] {
			x.mu.RUnlock()
		}
	}
	for i, x := range locks {
		if x == st {
			if err := lockOpen(s, st); err != nil {
				unlock(i)
				put()
				return err
			}
			continue
		}
		x.mu.RLock()
	}
	for i := range n {
		u := d.at(i)
		switch {
		case !u.s.closed.Load():
			from[i] = uint64(u.s.h)
		case u.s.final != nil:
			evs[i] = uint64(u.s.final.h) // the stream's end, recorded when it closed
		default:
			// The closed stream has no final event (its creation failed): wait for
			// the whole context, holding no lock, and retry.
			unlock(len(locks))
			put()
			if err := cudaraw.CtxSynchronizeIn(ctx); err != nil {
				return err
			}
			return launchAfter(ms, d.without(i), s, ctx, f, sh, params)
		}
	}
	st.waits.Add(int64(n))
	err := launchAfterC(ctx, evs[:n], from[:n], f, sh, st.h, params)
	unlock(len(locks))
	if err == nil && streamCheck.on.Load() {
		for i := range n {
			checkOrdered(d.at(i).s, st)
		}
	}
	put() // the waits are queued: the events may be recorded again
	return err
}
