// Package cupti is gocuda's CUPTI support, the CUDA Profiling Tools Interface: a
// GPU timeline. Start a Timeline, run work, Stop it, and the Trace holds every
// kernel, copy, memset, allocation and synchronization with its GPU start and end
// times, device, stream, grid, block and bytes, the driver call that queued it and
// the Go call behind that (function, file:line, goroutine, and for a library call
// the library and routine). Trace.WriteChrome writes it for ui.perfetto.dev and
// chrome://tracing, Trace.Log to Go's execution tracer, and cupti/cuptiotel as
// OpenTelemetry spans. See docs/timeline.md.
//
// Its raw layer, cuptiraw, binds every function of cupti.h and the headers it
// includes (activity, callbacks, events, metrics), generated from the unedited
// headers like the other libraries' raw layers.
package cupti

//go:generate go run ../gen -lib cupti
