package cuda

import (
	"errors"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Synchronous copies end with a flag, not an event. After the copy, the stream
// writes a new value into a word of page-locked host memory (cuStreamWriteValue32,
// whose default form fences the copy's writes before it), and the wait reads that
// word until it changes: no driver call while it waits, which makes a small copy's
// wait cheaper than recording an event and querying it in a loop (callbench's
// c-event and c-flag loops, BenchmarkCopySmall). A wait that outlasts the copy's
// expected time records an event then and blocks on it (see waitFlag). Where the
// driver has no cuStreamWriteValue32_v2 (or the page cannot be made), copies record
// events instead.

// flagSlots is the number of words of a context's flag page: the synchronous copies
// that can wait on flags at once (more wait on events).
const flagSlots = 64

// flagStride keeps the words a cache line apart.
const flagStride = 64

// flagPage is a context's page of flag words (cuMemAllocHost, mapped for the
// device), allocated at its first synchronous copy and freed with the context.
type flagPage struct {
	host unsafe.Pointer
	dev  cudaraw.CUdeviceptr
	// vals is the value each slot was last set to: only the slot's holder
	// touches it.
	vals [flagSlots]uint32
	mu   sync.Mutex
	free []int32 // idle slots (mu)
	// last is one more idle slot plus one (0: none), taken and given back without mu.
	last atomic.Int32
}

// flagSlot is a held word of the flag page, and the value the copy sets it to.
type flagSlot struct {
	word *uint32 // nil: no slot
	dev  cudaraw.CUdeviceptr
	val  uint32
	idx  int32
}

// Counters (tests): the copies that waited on a flag, those of them that outlasted
// their expected time and blocked on an event, and those that then found their
// stream closed and polled.
var flagWaits, flagBlocked, flagPolled atomic.Int64

// flagLongHook runs as a flag wait gives up polling (tests).
var flagLongHook func()

// page returns the context's flag page, making it at the first call, or nil if
// copies wait on events.
func (ms *memState) page() *flagPage {
	if p := ms.flags.Load(); p != nil || ms.flagsFailed.Load() {
		return p
	}
	ms.flagMu.Lock()
	defer ms.flagMu.Unlock()
	if p := ms.flags.Load(); p != nil || ms.flagsFailed.Load() {
		return p
	}
	p, err := ms.newFlagPage()
	if err != nil {
		ms.flagsFailed.Store(true)
		return nil
	}
	ms.flags.Store(p)
	return p
}

// newFlagPage makes the flag page, and checks that the device writes it: one
// write queued on the package's host stream and waited for.
func (ms *memState) newFlagPage() (*flagPage, error) {
	if _, err := cudaraw.ProcStreamWriteValue32.Addr(); err != nil {
		return nil, err
	}
	if err := ms.initHost(); err != nil { // the host stream
		return nil, err
	}
	ctx := ms.cs.h
	// Out-parameters are locals: cgo checks the whole object a pointer argument
	// points into, and a flagPage holds Go pointers.
	var host unsafe.Pointer
	var dev cudaraw.CUdeviceptr
	if err := cudaraw.MemAllocHostIn(ctx, &host, flagSlots*flagStride); err != nil {
		return nil, err
	}
	if err := cudaraw.MemHostGetDevicePointerIn(ctx, &dev, host, 0); err != nil {
		return nil, errors.Join(err, cudaraw.MemFreeHostIn(ctx, host))
	}
	p := &flagPage{host: host, dev: dev, free: make([]int32, 0, flagSlots)}
	clear(unsafe.Slice((*byte)(host), flagSlots*flagStride))
	err := ms.hostStream.use(func(h cudaraw.CUstream) error { return writeFlag(ctx, h, dev, 1) })
	if err == nil {
		err = ms.syncInternal(ms.hostStream)
	}
	if err == nil && atomic.LoadUint32((*uint32)(host)) != 1 {
		err = errors.New("cuda: cuStreamWriteValue32 did not write page-locked memory")
	}
	if err != nil {
		_ = cudaraw.CtxSynchronizeIn(ctx) // nothing may write the page once it is freed
		return nil, errors.Join(err, cudaraw.MemFreeHostIn(ctx, host))
	}
	*(*uint32)(host) = 0
	for i := flagSlots - 1; i >= 0; i-- {
		p.free = append(p.free, int32(i))
	}
	return p, nil
}

// getFlag holds an idle word of the flag page for a copy, with the next value to
// set it to; no slot (word nil) when copies wait on events or all are held.
func (ms *memState) getFlag() flagSlot {
	p := ms.page()
	if p == nil {
		return flagSlot{}
	}
	i := p.last.Swap(0) - 1
	if i < 0 {
		p.mu.Lock()
		n := len(p.free)
		if n == 0 {
			p.mu.Unlock()
			return flagSlot{}
		}
		i = p.free[n-1]
		p.free = p.free[:n-1]
		p.mu.Unlock()
	}
	p.vals[i]++
	off := uintptr(i) * flagStride
	return flagSlot{word: (*uint32)(unsafe.Add(p.host, off)), dev: p.dev + cudaraw.CUdeviceptr(off), val: p.vals[i], idx: i}
}

// putFlag gives back a slot of getFlag once nothing may still write it.
func (ms *memState) putFlag(f flagSlot) {
	if f.word == nil {
		return
	}
	p := ms.flags.Load()
	if p.last.CompareAndSwap(0, f.idx+1) {
		return
	}
	p.mu.Lock()
	p.free = append(p.free, f.idx)
	p.mu.Unlock()
}

// set reports whether the stream has written the slot's value.
func (f *flagSlot) set() bool { return atomic.LoadUint32(f.word) == f.val }

// waitFlag waits on the host for f, which t sets after a copy of about n bytes: it
// reads the word from C, then from Go (yielding), for as long as the copy should
// take, as waitCopy polls an event. Past that (work queued before the copy is
// slow), it records an event on t and blocks on it as waitEvent does: the wait
// sleeps, and the driver's sticky errors, which would leave the flag unset for
// ever, are returned. It reports whether the flag was set or the event recorded
// after it completed: only then may the slot be used again.
func (ms *memState) waitFlag(f *flagSlot, t *stream, n int) (bool, error) {
	flagWaits.Add(1)
	if copyWaitSpin {
		done, _ := pollCopy(n, func(d time.Duration) (bool, error) { return spinFlag(f, d), nil },
			func() (bool, error) { return f.set(), nil })
		if done {
			return true, nil
		}
	}
	return ms.waitFlagLong(f, t)
}

// waitFlagLong is waitFlag past the copy's expected time.
func (ms *memState) waitFlagLong(f *flagSlot, t *stream) (bool, error) {
	if flagLongHook != nil {
		flagLongHook()
	}
	flagBlocked.Add(1)
	ev, err := ms.getEvent()
	if err != nil {
		return false, err
	}
	defer ms.putEvent(ev)
	t.mu.RLock()
	if t.closed.Load() {
		// Destroyed: its work, the copy included, still runs. Read the flag,
		// and a stream that is never closed for the context's errors.
		t.mu.RUnlock()
		flagPolled.Add(1)
		return ms.pollFlag(f)
	}
	err = cudaraw.EventRecordIn(ms.cs.h, ev, t.h)
	t.mu.RUnlock()
	if err != nil {
		return false, err
	}
	if err := ms.waitEvent(ev); err != nil {
		return false, err
	}
	return true, nil
}

// pollFlag reads f until it is set, sleeping between reads (50 µs growing to 1 ms),
// and queries the context's default stream each time: an error there (the
// context's sticky error) ends the wait.
func (ms *memState) pollFlag(f *flagSlot) (bool, error) {
	sleep := 50 * time.Microsecond
	for !f.set() {
		if _, err := ready(cudaraw.StreamQueryIn(ms.cs.h, ms.defStream.h)); err != nil {
			return f.set(), err
		}
		time.Sleep(sleep)
		sleep = min(2*sleep, time.Millisecond)
	}
	return true, nil
}

// freeFlags frees the flag page (teardown, after the context's work is done).
func (ms *memState) freeFlags() {
	if p := ms.flags.Swap(nil); p != nil {
		_ = cudaraw.MemFreeHostIn(ms.cs.h, p.host)
	}
}
