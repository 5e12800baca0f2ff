package cuptiotel_test

import (
	"context"
	"fmt"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/gocuda/gocuda/cupti"
	"github.com/gocuda/gocuda/cupti/cuptiotel"
)

// A request's GPU work as spans of its trace. In a program, tr comes from a
// cupti.Timeline's Stop; here it is the record of one launch.
func Example() {
	rec := tracetest.NewSpanRecorder()
	tracer := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("service")
	ctx, span := tracer.Start(context.Background(), "request")

	launch := &cupti.Call{ID: 1, Op: "Launch", Function: "main.handle", File: "main.go", Line: 10, Start: 100, End: 200}
	tr := &cupti.Trace{Calls: []*cupti.Call{launch},
		Activities: []cupti.Activity{{Kind: cupti.KindKernel, Name: "relu", Start: 1000, End: 4000, Call: launch}}}
	cuptiotel.Record(ctx, tracer, tr)
	span.End()

	for _, s := range rec.Ended() {
		if s.Parent().IsValid() { // the GPU's spans, under the request
			fmt.Println(s.Name(), s.EndTime().Sub(s.StartTime()))
		}
	}
	// Output:
	// relu 3µs
	// cuda.Launch 100ns
}
