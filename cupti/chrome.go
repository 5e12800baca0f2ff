package cupti

import (
	"bufio"
	"encoding/json"
	"io"
	"math"
	"strconv"
)

// The trace event format (chrome://tracing, ui.perfetto.dev): processes and threads
// are the tracks. The Go calls are process 1, a thread per goroutine; the CUDA API
// calls process 2, a thread per OS thread; each GPU a process of its own (gpuPid +
// its ordinal), a thread per stream. A flow (an arrow) runs from each Go call, or
// API call where no Go call is known, to each piece of work it queued.
const (
	goPid  = 1
	apiPid = 2
	gpuPid = 100
)

// event is one trace event.
type event struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  *float64       `json:"dur,omitempty"`
	Pid  uint64         `json:"pid"`
	Tid  uint64         `json:"tid"`
	ID   uint64         `json:"id,omitempty"`
	Bp   string         `json:"bp,omitempty"`
	S    string         `json:"s,omitempty"`
	Args map[string]any `json:"args,omitempty"`
}

// WriteChrome writes the trace in the trace event format (a JSON object with
// traceEvents), which ui.perfetto.dev and chrome://tracing open: the Go calls, the
// CUDA API calls and each GPU's streams on tracks of their own, with arrows from
// each call to the work it queued. Times are microseconds from the trace's first
// event.
func (t *Trace) WriteChrome(w io.Writer) error {
	base := t.base()
	us := func(ns int64) float64 { return float64(ns-base) / 1e3 }
	dur := func(a, b int64) *float64 { d := float64(b-a) / 1e3; return &d }
	var evs []event
	named := map[[2]uint64]bool{}
	track := func(pid, tid uint64, process, thread string) {
		if !named[[2]uint64{pid, 0}] {
			named[[2]uint64{pid, 0}] = true
			evs = append(evs, event{Name: "process_name", Ph: "M", Pid: pid, Args: map[string]any{"name": process}},
				event{Name: "process_sort_index", Ph: "M", Pid: pid, Args: map[string]any{"sort_index": pid}})
		}
		if !named[[2]uint64{pid, tid + 1}] {
			named[[2]uint64{pid, tid + 1}] = true
			evs = append(evs, event{Name: "thread_name", Ph: "M", Pid: pid, Tid: tid, Args: map[string]any{"name": thread}})
		}
	}
	for _, c := range t.Calls {
		track(goPid, c.Goroutine, "Go", "goroutine "+strconv.FormatUint(c.Goroutine, 10))
		args := map[string]any{"call": c.ID, "function": c.Function, "site": c.Site(), "goroutine": c.Goroutine}
		if c.Library != "" {
			args["library"], args["routine"] = c.Library, c.Routine
		}
		evs = append(evs, event{Name: c.title(), Cat: "go", Ph: "X", Ts: us(c.Start), Dur: dur(c.Start, c.End),
			Pid: goPid, Tid: c.Goroutine, Args: args})
	}
	for i := range t.APIs {
		a := &t.APIs[i]
		track(apiPid, uint64(a.Thread), "CUDA API", "thread "+strconv.FormatUint(uint64(a.Thread), 10))
		args := map[string]any{"correlation": a.Correlation}
		if a.Call != nil {
			args["call"] = a.Call.ID
		}
		evs = append(evs, event{Name: a.Name, Cat: "api", Ph: "X", Ts: us(a.Start), Dur: dur(a.Start, a.End),
			Pid: apiPid, Tid: uint64(a.Thread), Args: args})
	}
	for i := range t.Activities {
		a := &t.Activities[i]
		pid, tid := gpuPid+uint64(a.Device), uint64(a.Stream)
		track(pid, tid, "GPU "+strconv.FormatUint(uint64(a.Device), 10), streamName(a.Stream))
		args := map[string]any{"kind": a.Kind.String(), "correlation": a.Correlation, "context": a.Context}
		switch a.Kind {
		case KindKernel:
			args["grid"], args["block"] = a.Grid, a.Block
		case KindCopy, KindMemset, KindMemory:
			args["bytes"] = a.Bytes
		}
		if c := a.Call; c != nil {
			args["call"], args["site"], args["function"] = c.ID, c.Site(), c.Function
		}
		e := event{Name: a.Name, Cat: a.Kind.String(), Ts: us(a.Start), Pid: pid, Tid: tid, Args: args}
		if a.Kind == KindMemory {
			e.Ph, e.S = "i", "t"
		} else {
			e.Ph, e.Dur = "X", dur(a.Start, a.End)
		}
		evs = append(evs, e)
		// The arrow starts inside the slice of the call that queued the work.
		flow := uint64(i + 1)
		switch {
		case a.Call != nil:
			evs = append(evs, event{Name: "queued", Cat: "flow", Ph: "s", Ts: us(a.Call.Start), Pid: goPid, Tid: a.Call.Goroutine, ID: flow})
		case a.API != nil:
			evs = append(evs, event{Name: "queued", Cat: "flow", Ph: "s", Ts: us(a.API.Start), Pid: apiPid, Tid: uint64(a.API.Thread), ID: flow})
		default:
			continue
		}
		evs = append(evs, event{Name: "queued", Cat: "flow", Ph: "f", Bp: "e", Ts: us(a.Start), Pid: pid, Tid: tid, ID: flow})
	}
	bw := bufio.NewWriter(w)
	if err := json.NewEncoder(bw).Encode(struct {
		TraceEvents     []event `json:"traceEvents"`
		DisplayTimeUnit string  `json:"displayTimeUnit"`
	}{evs, "ns"}); err != nil {
		return err
	}
	return bw.Flush()
}

// base is the trace's first time, the zero of its trace event times.
func (t *Trace) base() int64 {
	var base int64
	first := true
	see := func(ts int64) {
		if first || ts < base {
			base, first = ts, false
		}
	}
	for _, c := range t.Calls {
		see(c.Start)
	}
	for i := range t.APIs {
		see(t.APIs[i].Start)
	}
	for i := range t.Activities {
		see(t.Activities[i].Start)
	}
	return base
}

// title names a call's slice: "cublas.Gemm" for a library's call, else its
// operation ("Launch").
func (c *Call) title() string {
	if c.Library != "" {
		return c.Library + "." + c.Routine
	}
	return "cuda." + c.Op
}

// streamName names a GPU track: CUPTI gives records of no stream (event and context
// syncs, cudaMalloc's allocations) the stream id ^0.
func streamName(id uint32) string {
	if id == math.MaxUint32 {
		return "no stream"
	}
	return "stream " + strconv.FormatUint(uint64(id), 10)
}
