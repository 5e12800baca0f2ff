// Package cuptiotel turns a cupti Timeline's trace into OpenTelemetry spans, so that
// a traced Go service shows its GPU work in its traces: each Go call that queued
// work is a span with the call's host times, and each kernel, copy, memset or
// synchronization it queued a child span whose times are the GPU's start and end.
// It is a package of its own so that only its users import OpenTelemetry.
package cuptiotel

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/gocuda/gocuda/cupti"
)

// Record records tr as spans of tracer under ctx's span: a span per Go call that
// queued work ("cuda.Launch", or "cublas.Gemm" for a library's call), with the
// call's site, goroutine and library as attributes, and under it a span per piece of
// GPU work it queued, named after the work (the kernel's name, "copy HtoD", ...)
// and timed by the GPU. Work that no Go call of the trace queued (a library's own
// work, or work queued before the timeline's calls were seen) is a span directly
// under ctx's. Allocation records, which are instants, are events of the span of
// the call that made them, else of ctx's span.
func Record(ctx context.Context, tracer trace.Tracer, tr *cupti.Trace) {
	calls := map[*cupti.Call]context.Context{}
	spans := map[*cupti.Call]trace.Span{}
	for _, c := range tr.Calls {
		cctx, span := tracer.Start(ctx, title(c), trace.WithTimestamp(tr.Time(c.Start)),
			trace.WithAttributes(callAttrs(c)...))
		calls[c], spans[c] = cctx, span
	}
	for i := range tr.Activities {
		a := &tr.Activities[i]
		parent := ctx
		if cctx, ok := calls[a.Call]; ok && a.Call != nil {
			parent = cctx
		}
		if a.Kind == cupti.KindMemory {
			trace.SpanFromContext(parent).AddEvent(a.Name, trace.WithTimestamp(tr.Time(a.Start)),
				trace.WithAttributes(activityAttrs(a)...))
			continue
		}
		_, span := tracer.Start(parent, name(a), trace.WithTimestamp(tr.Time(a.Start)),
			trace.WithAttributes(activityAttrs(a)...))
		span.End(trace.WithTimestamp(tr.Time(a.End)))
	}
	for _, c := range tr.Calls {
		spans[c].End(trace.WithTimestamp(tr.Time(c.End)))
	}
}

func title(c *cupti.Call) string {
	if c.Library != "" {
		return c.Library + "." + c.Routine
	}
	return "cuda." + c.Op
}

// name is a work span's name: the kernel's name, else its kind and name ("copy HtoD").
func name(a *cupti.Activity) string {
	if a.Kind == cupti.KindKernel {
		return a.Name
	}
	return a.Kind.String() + " " + a.Name
}

func callAttrs(c *cupti.Call) []attribute.KeyValue {
	kv := []attribute.KeyValue{
		attribute.String("code.function", c.Function),
		attribute.String("code.filepath", c.File),
		attribute.Int("code.lineno", c.Line),
		attribute.Int64("goroutine.id", int64(c.Goroutine)),
		attribute.String("cuda.op", c.Op),
	}
	if c.Library != "" {
		kv = append(kv, attribute.String("cuda.library", c.Library), attribute.String("cuda.routine", c.Routine))
	}
	return kv
}

func activityAttrs(a *cupti.Activity) []attribute.KeyValue {
	kv := []attribute.KeyValue{
		attribute.String("gpu.kind", a.Kind.String()),
		attribute.Int("gpu.device", int(a.Device)),
		attribute.Int("gpu.stream", int(a.Stream)),
		attribute.Int64("gpu.duration_ns", a.End-a.Start),
	}
	switch a.Kind {
	case cupti.KindKernel:
		kv = append(kv, attribute.IntSlice("gpu.grid", []int{int(a.Grid[0]), int(a.Grid[1]), int(a.Grid[2])}),
			attribute.IntSlice("gpu.block", []int{int(a.Block[0]), int(a.Block[1]), int(a.Block[2])}))
	case cupti.KindCopy, cupti.KindMemset, cupti.KindMemory:
		kv = append(kv, attribute.Int64("gpu.bytes", int64(a.Bytes)))
	}
	if a.API != nil {
		kv = append(kv, attribute.String("cuda.api", a.API.Name))
	}
	return kv
}
