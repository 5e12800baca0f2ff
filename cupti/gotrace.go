package cupti

import (
	"context"
	"runtime/trace"
	"strconv"
	"strings"
)

// Log writes the trace's GPU activities to Go's execution tracer (runtime/trace),
// where the program runs it: one trace.Log event per activity, in ctx's task, with
// category "gpu."+kind and a message with its name, GPU duration, device, stream,
// bytes and the id of the Go call that queued it. While the timeline ran, each Go
// call was already a region ("cuda.Launch", ...) of its goroutine with a
// "cupti.call" log of the same id, so the tracer's view ties the two. Without the
// tracer running, Log does nothing.
func (t *Trace) Log(ctx context.Context) {
	if !trace.IsEnabled() {
		return
	}
	for i := range t.Activities {
		a := &t.Activities[i]
		trace.Log(ctx, "gpu."+a.Kind.String(), a.describe())
	}
}

// describe is the activity in one line.
func (a *Activity) describe() string {
	var b strings.Builder
	b.WriteString(a.Name)
	b.WriteString(" ")
	b.WriteString(a.Duration().String())
	b.WriteString(" device ")
	b.WriteString(strconv.FormatUint(uint64(a.Device), 10))
	b.WriteString(" stream ")
	b.WriteString(strconv.FormatUint(uint64(a.Stream), 10))
	if a.Bytes != 0 {
		b.WriteString(" bytes ")
		b.WriteString(strconv.FormatUint(a.Bytes, 10))
	}
	if a.Call != nil {
		b.WriteString(" call #")
		b.WriteString(strconv.FormatUint(a.Call.ID, 10))
		b.WriteString(" at ")
		b.WriteString(a.Call.Site())
	}
	return b.String()
}
