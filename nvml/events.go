package nvml

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gocuda/gocuda/internal/errs"
	"github.com/gocuda/gocuda/nvml/nvmlraw"
	"github.com/gocuda/gocuda/resource"
)

// EventType is a set of NVML event types (nvml.h's nvmlEventType* bits).
type EventType uint64

// The event types.
const (
	EventSingleBitECC EventType = EventType(nvmlraw.NvmlEventTypeSingleBitEccError)
	EventDoubleBitECC EventType = EventType(nvmlraw.NvmlEventTypeDoubleBitEccError)
	EventPState       EventType = EventType(nvmlraw.NvmlEventTypePState) // performance state change
	// EventXid is the driver's record of a GPU error, an Xid: the number (Event.Data)
	// says what failed (XidDescription). It is what the kernel log shows as
	// "NVRM: Xid (PCI:...): 13, ..." and what a CUDA error such as an illegal address
	// leaves behind.
	EventXid   EventType = EventType(nvmlraw.NvmlEventTypeXidCriticalError)
	EventClock EventType = EventType(nvmlraw.NvmlEventTypeClock) // clock change
)

func (t EventType) String() string {
	names := []struct {
		t    EventType
		name string
	}{{EventSingleBitECC, "single-bit ECC"}, {EventDoubleBitECC, "double-bit ECC"}, {EventPState, "P-state"}, {EventXid, "Xid"}, {EventClock, "clock"}}
	var parts []string
	for _, n := range names {
		if t&n.t != 0 {
			parts = append(parts, n.name)
			t &^= n.t
		}
	}
	if t != 0 || len(parts) == 0 {
		parts = append(parts, fmt.Sprintf("%#x", uint64(t)))
	}
	return strings.Join(parts, "|")
}

// Event is one NVML event.
type Event struct {
	Device *Device   // the device it happened on
	Type   EventType // one type
	// Data is the Xid of an EventXid (XidDescription says what it means), the error
	// count of an ECC event, or 0.
	Data uint64
	// GPUInstance and ComputeInstance name the MIG instance of an Xid on a MIG
	// device; both are 0xFFFFFFFF otherwise.
	GPUInstance, ComputeInstance uint32
	// Time is when the watcher received it.
	Time time.Time
}

func (e Event) String() string {
	if e.Type == EventXid {
		return fmt.Sprintf("%v: Xid %d (%s)", e.Device, e.Data, XidDescription(e.Data))
	}
	return fmt.Sprintf("%v: %v event, data %d", e.Device, e.Type, e.Data)
}

// XidDescription says what an Xid means, for the ones a CUDA program most often
// meets (NVIDIA's Xid catalog has them all), or "" for another.
func XidDescription(xid uint64) string {
	return xids[xid]
}

var xids = map[uint64]string{
	13:  "graphics engine exception: a kernel faulted (illegal address, illegal instruction, assert)",
	31:  "GPU memory page fault: a kernel accessed an invalid address",
	32:  "invalid or corrupted push buffer stream",
	43:  "GPU stopped processing: a channel was reset after a fault",
	45:  "preemptive cleanup: a process's work was stopped (after a fault, or at exit)",
	48:  "double-bit ECC error",
	61:  "internal micro-controller breakpoint/warning",
	62:  "internal micro-controller halt",
	63:  "ECC page retirement or row remapping recorded",
	64:  "ECC page retirement or row remapping failed",
	68:  "video processor exception",
	69:  "graphics engine class error",
	74:  "NVLink error",
	79:  "GPU has fallen off the bus",
	92:  "high single-bit ECC error rate",
	94:  "contained ECC error",
	95:  "uncontained ECC error",
	109: "context switch timeout",
	119: "GSP RPC timeout",
	120: "GSP error",
	154: "GPU recovery action changed",
}

// pollTimeout is how long each nvmlEventSetWait waits before the watcher looks at its
// context again: the longest an Events outlives its context or Close.
const pollTimeout = 100 * time.Millisecond

// Events watches devices for NVML events, which arrive on C. C closes when the
// context given to Watch is done, when Close is called, or when waiting fails (Err
// says why). Each Events holds an NVML event set (nvmlEventSetCreate) and an NVML
// initialization of its own, both released by its goroutine as it stops.
//
// Close an Events when done (or cancel its context); one dropped without either stops
// once the garbage collector finds it unreachable (resource.ResourceFinalizer, in the
// non-blocking lane: stopping only tells the goroutine to stop). Keep the Events, not
// only C, reachable while reading.
type Events struct {
	// C delivers the events. It is closed when watching stops.
	C <-chan Event

	w   *watcher
	reg *resource.Registration
}

// watcher is the goroutine's state: it does not reference the Events, so that an
// Events dropped without Close can be collected, which stops the goroutine.
type watcher struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    atomic.Pointer[error]
	closed atomic.Bool
}

// Watch registers devs (every device of the Session where none is given) for the
// event types types with a new event set, and returns an Events delivering them until
// ctx is done. A device that does not support some of types is registered for the
// others; one that supports none of them fails Watch with ErrNotSupported.
func (s *Session) Watch(ctx context.Context, types EventType, devs ...*Device) (*Events, error) {
	if err := s.check("Watch"); err != nil {
		return nil, err
	}
	if len(devs) == 0 {
		var err error
		if devs, err = s.Devices(); err != nil {
			return nil, err
		}
	}
	// The watcher's own initialization keeps NVML up however the Sessions are closed.
	if err := nvmlraw.Init(); err != nil {
		return nil, wrap("nvmlInit_v2", err)
	}
	var set nvmlraw.NvmlEventSet
	if err := nvmlraw.EventSetCreate(&set); err != nil {
		_ = nvmlraw.Shutdown()
		return nil, wrap("nvmlEventSetCreate", err)
	}
	fail := func(err error) (*Events, error) {
		_ = nvmlraw.EventSetFree(set)
		_ = nvmlraw.Shutdown()
		return nil, err
	}
	byHandle := map[nvmlraw.NvmlDevice]*Device{}
	for _, d := range devs {
		if d.s != s {
			return fail(fmt.Errorf("nvml: Watch: %v belongs to another Session: %w", d, nvmlraw.ErrInvalidArgument))
		}
		var supported uint64
		if err := nvmlraw.DeviceGetSupportedEventTypes(d.h, &supported); err != nil {
			return fail(wrap("nvmlDeviceGetSupportedEventTypes", err))
		}
		want := uint64(types) & supported
		if want == 0 {
			return fail(fmt.Errorf("nvml: Watch: %v supports none of the event types %v (it supports %v): %w", d, types, EventType(supported), ErrNotSupported))
		}
		if err := nvmlraw.DeviceRegisterEvents(d.h, want, set); err != nil {
			return fail(wrap(fmt.Sprintf("nvmlDeviceRegisterEvents(%v, %v)", d, EventType(want)), err))
		}
		byHandle[d.h] = d
	}
	ctx, cancel := context.WithCancel(ctx)
	ch := make(chan Event, 64)
	w := &watcher{cancel: cancel, done: make(chan struct{})}
	go w.run(ctx, set, byHandle, ch)
	e := &Events{C: ch, w: w}
	e.reg = resource.ResourceFinalizer((*Events).stop, e, false, resource.Kind("nvml.Events"))
	return e, nil
}

// XidEvents returns a channel of d's Xid events, closed when ctx is done (or when
// waiting fails). Cancel ctx to stop it.
func (d *Device) XidEvents(ctx context.Context) (<-chan Event, error) {
	e, err := d.s.Watch(ctx, EventXid, d)
	if err != nil {
		return nil, err
	}
	// The channel is all the caller keeps: the Events lives until its context ends,
	// which is its release (nothing is left for the collector to find).
	go func() {
		<-e.w.done
		e.w.closed.Store(true)
		e.reg.Cancel()
	}()
	return e.C, nil
}

func (w *watcher) run(ctx context.Context, set nvmlraw.NvmlEventSet, devs map[nvmlraw.NvmlDevice]*Device, ch chan<- Event) {
	defer close(w.done)
	defer close(ch)
	defer func() {
		if err := nvmlraw.EventSetFree(set); err != nil {
			w.fail(wrap("nvmlEventSetFree", err))
		}
		_ = nvmlraw.Shutdown()
	}()
	for ctx.Err() == nil {
		var data nvmlraw.NvmlEventData
		err := nvmlraw.EventSetWait(set, &data, uint32(pollTimeout/time.Millisecond))
		if errors.Is(err, nvmlraw.ErrTimeout) {
			continue
		}
		if err != nil {
			w.fail(wrap("nvmlEventSetWait_v2", err))
			return
		}
		ev := Event{
			Device: devs[data.Device], Type: EventType(data.EventType), Data: data.EventData,
			GPUInstance: data.GpuInstanceId, ComputeInstance: data.ComputeInstanceId, Time: time.Now(),
		}
		select {
		case ch <- ev:
		case <-ctx.Done():
			return
		}
	}
}

func (w *watcher) fail(err error) { w.err.CompareAndSwap(nil, &err) }

// stop is the release: it tells the goroutine to stop, and returns at once.
func (e *Events) stop() { e.w.cancel() }

// Close stops watching and waits until the goroutine has freed the event set and C
// is closed (at most about 100 ms). It returns the error that stopped watching
// before, if any. A second Close returns an error matching ErrClosed.
func (e *Events) Close() error {
	if e == nil || !e.w.closed.CompareAndSwap(false, true) {
		return errs.Closed("nvml: Events")
	}
	_ = e.reg.Release()
	<-e.w.done
	runtime.KeepAlive(e)
	return e.Err()
}

// Err returns the error that stopped watching, or nil where it stopped (or will stop)
// because its context ended or Close was called.
func (e *Events) Err() error {
	if p := e.w.err.Load(); p != nil {
		return *p
	}
	return nil
}

// Done returns a channel closed once watching has stopped and the event set is freed.
func (e *Events) Done() <-chan struct{} { return e.w.done }
