package cuptiotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/gocuda/gocuda/cupti"
	"github.com/gocuda/gocuda/cupti/cuptiotel"
)

// synthetic is a trace of one cuBLAS call that queued a kernel and an allocation,
// one launch that queued a kernel, and a synchronization no Go call queued.
func synthetic() *cupti.Trace {
	gemm := &cupti.Call{ID: 1, Op: "Enqueue", Function: "main.step", File: "/src/main.go", Line: 42, Goroutine: 7,
		Library: "cublas", Routine: "Gemm", Start: 1000, End: 1500}
	launch := &cupti.Call{ID: 2, Op: "Launch", Function: "main.step", File: "/src/main.go", Line: 43, Goroutine: 7, Start: 1600, End: 1700}
	return &cupti.Trace{
		Calls: []*cupti.Call{gemm, launch},
		Activities: []cupti.Activity{
			{Kind: cupti.KindMemory, Name: "allocation device", Start: 1200, End: 1200, Bytes: 4096, Call: gemm},
			{Kind: cupti.KindKernel, Name: "sgemm_128x64", Start: 2000, End: 9000, Grid: [3]int32{8, 4, 1}, Block: [3]int32{256, 1, 1}, Call: gemm},
			{Kind: cupti.KindKernel, Name: "bias_relu", Start: 9100, End: 9600, Call: launch},
			{Kind: cupti.KindSync, Name: "stream_synchronize", Start: 9000, End: 9700},
		},
	}
}

func attrs(kv []attribute.KeyValue) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, a := range kv {
		m[a.Key] = a.Value
	}
	return m
}

// TestRecord: each Go call is a span with its host times, each piece of work a
// child span timed by the GPU, work without a call a child of the caller's span,
// and an allocation an event of its call's span.
func TestRecord(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tracer := tp.Tracer("test")
	ctx, root := tracer.Start(context.Background(), "request")
	tr := synthetic()
	cuptiotel.Record(ctx, tracer, tr)
	root.End()

	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		byName[s.Name()] = s
	}
	require.Len(t, byName, 6, "request, two calls, two kernels, a sync")
	gemm, k, launch, relu, sync := byName["cublas.Gemm"], byName["sgemm_128x64"], byName["cuda.Launch"], byName["bias_relu"], byName["sync stream_synchronize"]
	for _, s := range []sdktrace.ReadOnlySpan{gemm, k, launch, relu, sync} {
		require.NotNil(t, s)
	}
	at := func(ns int64) time.Time { return tr.Time(ns) }
	assert.Equal(t, at(2000), k.StartTime(), "the GPU's start")
	assert.Equal(t, at(9000), k.EndTime(), "the GPU's end")
	assert.Equal(t, 7*time.Microsecond, k.EndTime().Sub(k.StartTime()))
	assert.Equal(t, at(1000), gemm.StartTime())
	assert.Equal(t, at(1500), gemm.EndTime())
	assert.Equal(t, gemm.SpanContext().SpanID(), k.Parent().SpanID(), "the kernel under its call")
	assert.Equal(t, launch.SpanContext().SpanID(), relu.Parent().SpanID())
	assert.Equal(t, root.SpanContext().SpanID(), gemm.Parent().SpanID())
	assert.Equal(t, root.SpanContext().SpanID(), sync.Parent().SpanID(), "work without a call under the caller's span")
	assert.Equal(t, root.SpanContext().TraceID(), k.SpanContext().TraceID())

	ga := attrs(gemm.Attributes())
	assert.Equal(t, "cublas", ga["cuda.library"].AsString())
	assert.Equal(t, "Gemm", ga["cuda.routine"].AsString())
	assert.Equal(t, int64(42), ga["code.lineno"].AsInt64())
	assert.Equal(t, int64(7), ga["goroutine.id"].AsInt64())
	ka := attrs(k.Attributes())
	assert.Equal(t, "kernel", ka["gpu.kind"].AsString())
	assert.Equal(t, []int64{8, 4, 1}, ka["gpu.grid"].AsInt64Slice())
	assert.Equal(t, int64(7000), ka["gpu.duration_ns"].AsInt64())
	require.Len(t, gemm.Events(), 1)
	assert.Equal(t, "allocation device", gemm.Events()[0].Name)
	assert.Equal(t, at(1200), gemm.Events()[0].Time)
}
