package cupti

import (
	"sort"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/gocuda/gocuda/cupti/cuptiraw"
)

// Kind is what an Activity records.
type Kind uint8

// The kinds of Activity.
const (
	KindKernel Kind = iota + 1 // a kernel's execution
	KindCopy                   // a memory copy
	KindMemset                 // a memset
	KindMemory                 // an allocation or free of device or pinned memory (Timestamp only: Start == End)
	KindSync                   // a host or stream wait on the GPU (stream, event or context synchronization)
)

var kindNames = [...]string{KindKernel: "kernel", KindCopy: "copy", KindMemset: "memset", KindMemory: "memory", KindSync: "sync"}

// String returns the kind's name: "kernel", "copy", "memset", "memory" or "sync".
func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "unknown"
}

// Activity is one record of what the GPU did: a kernel, a copy, a memset, an
// allocation or free, or a synchronization. Times are CUPTI's timestamps in
// nanoseconds (Trace.Time converts them to wall time).
type Activity struct {
	Kind Kind
	// Name is the kernel's (mangled) name; for a copy its direction ("HtoD", "DtoH",
	// "DtoD", ...); for memory "allocation" or "release" and the memory's kind; for
	// a synchronization what was waited for ("stream_synchronize", ...).
	Name       string
	Start, End int64
	// Device, Context and Stream are CUPTI's ids (a device's ordinal; a context's and
	// a stream's unique ids, not the driver's handles).
	Device, Context, Stream uint32
	Grid, Block             [3]int32 // kernels only
	Bytes                   uint64   // copies, memsets and memory
	// Correlation is CUPTI's id of the API call that queued the work: API.Correlation
	// of that call.
	Correlation uint32
	// API is the driver or runtime call that queued the work, when the trace has it.
	API *APICall
	// Call is the Go call of the cuda package that queued the work, when the
	// timeline saw it (a launch, copy, memset or Enqueue made while it ran).
	Call *Call
}

// Duration is End - Start.
func (a *Activity) Duration() time.Duration { return time.Duration(a.End - a.Start) }

// Call is a Go call of the cuda package that queued GPU work while the timeline
// ran: the operation, where the program made it and on which goroutine, and for a
// call through a library package (cublas.Gemm, cufft's plans, ...) that library and
// routine. Start and End are its host times on CUPTI's clock.
type Call struct {
	ID         uint64
	Op         string // "Launch", "Copy", "Memset" or "Enqueue"
	Function   string // the program's function that made the call, package-qualified
	File       string
	Line       int
	Goroutine  uint64
	Library    string // "cublas", "cufft", ... for a call made by a library package, else ""
	Routine    string // the library's function ("Gemm"), for a library call
	Start, End int64
}

// describe is the call in one line: "#id Op at file:line (function), goroutine g".
func (c *Call) describe() string {
	s := "#" + strconv.FormatUint(c.ID, 10) + " " + c.Op
	if c.Library != "" {
		s += " " + c.Library + "." + c.Routine
	}
	return s + " at " + c.Site() + " (" + c.Function + "), goroutine " + strconv.FormatUint(c.Goroutine, 10)
}

// Site is "file:line" of the call.
func (c *Call) Site() string { return c.File + ":" + strconv.Itoa(c.Line) }

// APICall is one call of the CUDA driver or runtime API, as CUPTI recorded it on
// the host.
type APICall struct {
	Name        string // "cuLaunchKernel", "cuMemcpyHtoDAsync_v2", ...
	Runtime     bool   // a runtime API call (cudaX) rather than the driver's (cuX)
	Start, End  int64
	Thread      uint32 // the OS thread's id
	Correlation uint32
	Call        *Call
}

// Trace is what a Timeline recorded: the GPU's activities in order of their start,
// the API calls and the Go calls that queued them.
type Trace struct {
	Activities []Activity
	APIs       []APICall
	Calls      []*Call
	// Dropped counts records CUPTI could not keep (its buffers were full, or one
	// could not be had): where it is not zero, the trace is incomplete.
	Dropped uint64

	// A pair of readings of CUPTI's clock and the wall clock, taken together, for Time.
	clockAt int64
	wallAt  time.Time
}

// Time converts a CUPTI timestamp of the trace to wall time.
func (t *Trace) Time(ts int64) time.Time { return t.wallAt.Add(time.Duration(ts - t.clockAt)) }

// builder collects decoded records and links them once all are in.
type builder struct {
	acts    []Activity
	apis    []APICall
	extern  map[uint32]uint64 // CUPTI correlation id -> the Go call's id
	calls   map[uint64]*Call
	dropped uint64
	clockAt int64
	wallAt  time.Time
	// apiName names a driver (runtime false) or runtime API callback id.
	apiName func(runtime bool, cbid uint32) string
}

func newBuilder(apiName func(bool, uint32) string) *builder {
	return &builder{extern: map[uint32]uint64{}, calls: map[uint64]*Call{}, apiName: apiName}
}

// add decodes one CUPTI activity record at p, of a kind the timeline enables;
// others are skipped. The strings it holds are copied: p's buffer is freed after.
func (b *builder) add(p unsafe.Pointer) {
	switch *(*cuptiraw.CUpti_ActivityKind)(p) {
	case cuptiraw.CUPTI_ACTIVITY_KIND_KERNEL, cuptiraw.CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
		r := (*cuptiraw.CUpti_ActivityKernel10)(p)
		b.acts = append(b.acts, Activity{Kind: KindKernel, Name: cString(r.Name),
			Start: int64(r.Start), End: int64(r.End),
			Device: uint32(r.DeviceId), Context: uint32(r.ContextId), Stream: uint32(r.StreamId),
			Grid: [3]int32{r.GridX, r.GridY, r.GridZ}, Block: [3]int32{r.BlockX, r.BlockY, r.BlockZ},
			Correlation: uint32(r.CorrelationId)})
	case cuptiraw.CUPTI_ACTIVITY_KIND_MEMCPY:
		r := (*cuptiraw.CUpti_ActivityMemcpy6)(p)
		b.acts = append(b.acts, Activity{Kind: KindCopy, Name: copyName(cuptiraw.CUpti_ActivityMemcpyKind(r.CopyKind)),
			Start: int64(r.Start), End: int64(r.End),
			Device: uint32(r.DeviceId), Context: uint32(r.ContextId), Stream: uint32(r.StreamId),
			Bytes: uint64(r.Bytes), Correlation: uint32(r.CorrelationId)})
	case cuptiraw.CUPTI_ACTIVITY_KIND_MEMSET:
		r := (*cuptiraw.CUpti_ActivityMemset4)(p)
		b.acts = append(b.acts, Activity{Kind: KindMemset, Name: "memset",
			Start: int64(r.Start), End: int64(r.End),
			Device: uint32(r.DeviceId), Context: uint32(r.ContextId), Stream: uint32(r.StreamId),
			Bytes: uint64(r.Bytes), Correlation: uint32(r.CorrelationId)})
	case cuptiraw.CUPTI_ACTIVITY_KIND_MEMORY2:
		r := (*cuptiraw.CUpti_ActivityMemory4)(p)
		name := enumName(r.MemoryOperationType.String(), "CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_") + " " +
			enumName(r.MemoryKind.String(), "CUPTI_ACTIVITY_MEMORY_KIND_")
		b.acts = append(b.acts, Activity{Kind: KindMemory, Name: name,
			Start: int64(r.Timestamp), End: int64(r.Timestamp),
			Device: uint32(r.DeviceId), Context: uint32(r.ContextId), Stream: uint32(r.StreamId),
			Bytes: uint64(r.Bytes), Correlation: uint32(r.CorrelationId)})
	case cuptiraw.CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
		r := (*cuptiraw.CUpti_ActivitySynchronization2)(p)
		b.acts = append(b.acts, Activity{Kind: KindSync, Name: enumName(r.Type.String(), "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_"),
			Start: int64(r.Start), End: int64(r.End),
			Context: uint32(r.ContextId), Stream: uint32(r.StreamId), Correlation: uint32(r.CorrelationId)})
	case cuptiraw.CUPTI_ACTIVITY_KIND_DRIVER, cuptiraw.CUPTI_ACTIVITY_KIND_RUNTIME:
		r := (*cuptiraw.CUpti_ActivityAPI)(p)
		rt := r.Kind == cuptiraw.CUPTI_ACTIVITY_KIND_RUNTIME
		b.apis = append(b.apis, APICall{Name: b.apiName(rt, uint32(r.Cbid)), Runtime: rt,
			Start: int64(r.Start), End: int64(r.End), Thread: uint32(r.ThreadId), Correlation: uint32(r.CorrelationId)})
	case cuptiraw.CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
		r := (*cuptiraw.CUpti_ActivityExternalCorrelation)(p)
		if r.ExternalKind == externalKind {
			b.extern[uint32(r.CorrelationId)] = uint64(r.ExternalId)
		}
	}
}

// externalKind is the kind of external correlation id under which the timeline
// pushes its Go calls' ids.
const externalKind = cuptiraw.CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0

// call records a Go call.
func (b *builder) call(c *Call) { b.calls[c.ID] = c }

// trace links the records (an activity to its API call through CUPTI's correlation
// id, both to the Go call through the external id pushed around it) and sorts them
// by start.
func (b *builder) trace() *Trace {
	t := &Trace{Activities: b.acts, APIs: b.apis, Dropped: b.dropped, clockAt: b.clockAt, wallAt: b.wallAt}
	sort.SliceStable(t.APIs, func(i, j int) bool { return t.APIs[i].Start < t.APIs[j].Start })
	api := make(map[uint32]*APICall, len(t.APIs))
	for i := range t.APIs {
		a := &t.APIs[i]
		a.Call = b.calls[b.extern[a.Correlation]]
		// The driver's record wins over the runtime's (cuBLAS calls the runtime,
		// which calls the driver: both share the id).
		if prev, ok := api[a.Correlation]; !ok || prev.Runtime {
			api[a.Correlation] = a
		}
	}
	sort.SliceStable(t.Activities, func(i, j int) bool { return t.Activities[i].Start < t.Activities[j].Start })
	for i := range t.Activities {
		a := &t.Activities[i]
		a.API = api[a.Correlation]
		a.Call = b.calls[b.extern[a.Correlation]]
	}
	for _, c := range b.calls {
		t.Calls = append(t.Calls, c)
	}
	sort.Slice(t.Calls, func(i, j int) bool { return t.Calls[i].ID < t.Calls[j].ID })
	return t
}

// copyName is a copy kind's short name: CUPTI_ACTIVITY_MEMCPY_KIND_HTOD is "HtoD".
func copyName(k cuptiraw.CUpti_ActivityMemcpyKind) string {
	s := enumName(k.String(), "CUPTI_ACTIVITY_MEMCPY_KIND_")
	if len(s) == 4 && s[1] == 't' && s[2] == 'o' { // "htod" and its kin
		return strings.ToUpper(s[:1]) + "to" + strings.ToUpper(s[3:])
	}
	return s
}

// enumName is a constant's name without prefix, in lower case.
func enumName(s, prefix string) string { return strings.ToLower(strings.TrimPrefix(s, prefix)) }

// cString copies the NUL-terminated string at p (C memory a record points to).
func cString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}
