package cupti

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/trace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cupti/cuptiraw"
	"github.com/gocuda/gocuda/internal/calltrace"
)

// ErrRunning is Start's error while another Timeline runs: CUPTI's activity
// buffers are the process's, so one timeline records at a time.
var ErrRunning = errors.New("cupti: a timeline is already running")

// ErrStopped is Stop's error for a Timeline already stopped.
var ErrStopped = errors.New("cupti: the timeline is stopped")

// kinds are the activity kinds a timeline enables, in order.
var kinds = []cuptiraw.CUpti_ActivityKind{
	cuptiraw.CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, // before the work it names
	cuptiraw.CUPTI_ACTIVITY_KIND_DRIVER,
	cuptiraw.CUPTI_ACTIVITY_KIND_RUNTIME,
	cuptiraw.CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
	cuptiraw.CUPTI_ACTIVITY_KIND_MEMCPY,
	cuptiraw.CUPTI_ACTIVITY_KIND_MEMSET,
	cuptiraw.CUPTI_ACTIVITY_KIND_MEMORY2,
	cuptiraw.CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
}

var (
	startMu    sync.Mutex // Start and Stop, one at a time
	registered struct {
		once sync.Once
		err  error
	}
)

// Timeline records what the GPU does between Start and Stop, through CUPTI's
// activity API: every kernel, copy, memset, allocation and synchronization, with
// its GPU start and end times, device, stream, grid, block and bytes, the driver
// call that queued it and the Go call of the cuda package (Launch, a copy or
// memset, Enqueue, and so every library call) that made that driver call: the
// program's function, file and line, goroutine, and the library and routine.
//
// While a timeline runs, each such Go call reads CUPTI's clock and pushes and pops
// an id in CUPTI on its thread (the goroutine stays on its thread for the call); in
// a program that runs Go's execution tracer (runtime/trace), the call is also a
// region of its goroutine. With no timeline, the cost at each call is one branch.
//
// One timeline runs at a time in a process. A Timeline is safe for concurrent use:
// the calls of any goroutine are recorded, and Stop may run on any goroutine.
type Timeline struct {
	hook    calltrace.Hook
	corr    correlation
	stopped atomic.Bool

	mu      sync.Mutex
	pending map[uint64]*pendingCall // calls begun, not yet ended
	calls   []*Call
	next    atomic.Uint64

	clockAt int64
	wallAt  time.Time
}

// correlation reads CUPTI's clock and pushes (begin) and pops (end) a Go call's id
// on the calling thread; tests stand in for CUPTI with their own.
type correlation interface {
	begin(id uint64) int64
	end() int64
}

type pendingCall struct {
	c      *Call
	region *trace.Region
}

// Start loads CUPTI and starts recording. Without libcupti it returns the
// library's *dl.LibraryError (errors.Is(err, dl.ErrLibraryNotFound)), naming the
// library, its soname and $GOCUDA_CUPTI_LIB, which points it at the library's path
// (libcupti.so.13 ships in the CUDA toolkit's lib64, not with the driver). While
// another timeline runs it returns ErrRunning.
func Start() (*Timeline, error) {
	startMu.Lock()
	defer startMu.Unlock()
	if calltrace.Load() != nil {
		return nil, ErrRunning
	}
	if err := cuptiraw.Library().Open(); err != nil {
		return nil, err
	}
	var c cCorrelation
	var err error
	if c.push, err = procPush.Addr(); err != nil {
		return nil, err
	}
	if c.pop, err = procPop.Addr(); err != nil {
		return nil, err
	}
	if c.now, err = procNow.Addr(); err != nil {
		return nil, err
	}
	registered.once.Do(func() { registered.err = registerBuffers() })
	if registered.err != nil {
		return nil, fmt.Errorf("cupti: registering the activity buffers: %w", registered.err)
	}
	for i, k := range kinds {
		if err := cuptiraw.ActivityEnable(k); err != nil {
			disable(kinds[:i])
			return nil, fmt.Errorf("cupti: enabling %v: %w", k, err)
		}
	}
	t := newTimeline(c)
	var ts cudaraw.Cuuint64
	if err := cuptiraw.GetTimestamp(&ts); err == nil {
		t.clockAt, t.wallAt = int64(ts), time.Now()
	}
	if !calltrace.CompareAndSet(nil, &t.hook) {
		disable(kinds)
		return nil, ErrRunning
	}
	return t, nil
}

// newTimeline makes a timeline that brackets Go calls with c; Start sets its hook.
func newTimeline(c correlation) *Timeline {
	t := &Timeline{corr: c, pending: map[uint64]*pendingCall{}, wallAt: time.Now()}
	t.hook = calltrace.Hook{Begin: t.begin, End: t.end}
	return t
}

func disable(ks []cuptiraw.CUpti_ActivityKind) {
	for _, k := range ks {
		_ = cuptiraw.ActivityDisable(k) // best effort: each kind is disabled on its own
	}
}

// Stop ends the recording and returns the trace. It reports the work that has
// completed on the GPU: synchronize the streams (or the context) whose work the
// trace should hold before calling it. A second Stop returns ErrStopped.
func (t *Timeline) Stop() (*Trace, error) {
	startMu.Lock()
	defer startMu.Unlock()
	if !t.stopped.CompareAndSwap(false, true) {
		return nil, ErrStopped
	}
	calltrace.CompareAndSet(&t.hook, nil)
	disable(kinds)
	err := cuptiraw.ActivityFlushAll(cudaraw.Cuuint32(cuptiraw.CUPTI_ACTIVITY_FLAG_FLUSH_FORCED))
	b := t.builder(apiName)
	drain(b)
	if err != nil {
		err = fmt.Errorf("cupti: flushing the activity buffers: %w", err)
	}
	return b.trace(), err
}

// builder starts the trace's builder with the Go calls recorded so far.
func (t *Timeline) builder(name func(bool, uint32) string) *builder {
	b := newBuilder(name)
	t.mu.Lock()
	for _, c := range t.calls {
		b.call(c)
	}
	t.mu.Unlock()
	b.clockAt, b.wallAt = t.clockAt, t.wallAt
	return b
}

// begin is the hook's Begin: it finds the program's call, locks the goroutine to
// its thread and pushes the call's id there, so that the driver calls that follow
// (on this thread, until end) carry it.
func (t *Timeline) begin(op string) uint64 {
	var pcs [32]uintptr
	s := callSite(pcs[:runtime.Callers(2, pcs[:])]) // callSite walks past the cuda package
	c := &Call{ID: t.next.Add(1), Op: op, Function: s.function, File: s.file, Line: s.line,
		Goroutine: goroutineID(), Library: s.library, Routine: s.routine}
	p := &pendingCall{c: c}
	if trace.IsEnabled() {
		ctx := context.Background()
		p.region = trace.StartRegion(ctx, "cuda."+op)
		trace.Log(ctx, "cupti.call", c.describe())
	}
	t.mu.Lock()
	t.pending[c.ID] = p
	t.mu.Unlock()
	runtime.LockOSThread()
	c.Start = t.corr.begin(c.ID)
	return c.ID
}

// end is the hook's End: it pops the id begin pushed and unlocks the thread.
func (t *Timeline) end(id uint64) {
	ts := t.corr.end()
	runtime.UnlockOSThread()
	t.mu.Lock()
	p := t.pending[id]
	delete(t.pending, id)
	if p != nil {
		p.c.End = ts
		t.calls = append(t.calls, p.c)
	}
	t.mu.Unlock()
	if p != nil && p.region != nil {
		p.region.End()
	}
}

// apiNames caches the names of API callback ids.
var apiNames sync.Map // [2]uint32{runtime, cbid} -> string

// apiName names a driver or runtime API callback id through CUPTI.
func apiName(runtime bool, cbid uint32) string {
	key := [2]uint32{0, cbid}
	domain := cuptiraw.CUPTI_CB_DOMAIN_DRIVER_API
	if runtime {
		key[0], domain = 1, cuptiraw.CUPTI_CB_DOMAIN_RUNTIME_API
	}
	if v, ok := apiNames.Load(key); ok {
		return v.(string)
	}
	var p *byte
	name := fmt.Sprintf("callback %d", cbid)
	if cuptiraw.GetCallbackName(domain, cudaraw.Cuuint32(cbid), &p) == nil && p != nil {
		name = cString(p)
	}
	apiNames.Store(key, name)
	return name
}
