package main

import "testing"

// Workload is one row of the comparison: the same operation measured three ways.
//
//   - the C floor: the function CFunc in tools/floor/floor.cu, registered there under ID;
//   - the package benchmark (Go): a normal Benchmark function in a library package's tests,
//     run from its test binary in .gpu/ and picked out of the output by Go;
//   - the raw layer, in process: Raw, run here through testing.Benchmark on the generated
//     bindings, so every workload has a Go number even before a package benchmark exists.
//
// To add a workload: one C function plus one table row in floor.cu, and one row here.
type Workload struct {
	ID    string // key shared with floor.cu, e.g. "alloc/device/4KiB"
	Desc  string // what one operation is, for the table
	CFunc string // floor.cu's function for ID (documentation; a test checks it is registered)
	Bytes int64  // bytes one operation moves, for the rows shown in GB/s (copy/...); 0: none
	Go    GoBench
	Raw   func(b *testing.B, e *Env) error // nil: no in-process implementation
}

// GoBench names the package benchmark that measures a workload in Go. The zero value means none.
type GoBench struct {
	Pkg     string // package directory relative to the module root, e.g. "cuda"
	Bench   string // top-level benchmark name regexp without '/', run as -test.bench '^Benchmark(Bench)$'; one process each
	Match   string // regexp matched against the benchmark's full name, -GOMAXPROCS suffix removed
	Exclude string // optional regexp: names it matches are not taken
	// Metric is the unit of the benchmark's metric that is the Go number ("" for
	// ns/op): a benchmark that times two sides (callbench.AlternateRounds) reports
	// each as NAME-ns/op.
	Metric string
	// Baseline is the unit of the benchmark's metric that is the median ratio to
	// the same work done by one goroutine on one stream in the same process
	// (NAME/one-med of callbench.AlternateRounds), shown beside the Go number.
	Baseline string
}

// allocGo is the package benchmark of an alloc+touch+free workload: cuda's
// BenchmarkAlloc/<kind>/<size>. gocuda allocates every kind from stream-ordered pools
// with a cache of reusable blocks in front (device blocks per stream, pinned and
// unified per context; BenchmarkAlloc's "-pool" variants turn the caches off), so only the C pool rows
// have a gocuda counterpart; the C rows of the plain allocators (cuMemAlloc,
// cuMemHostAlloc, cuMemAllocManaged) are there to show what the pools save.
func allocGo(kind, size string, pool bool) GoBench {
	if !pool {
		return GoBench{}
	}
	return GoBench{Pkg: "cuda", Bench: "Alloc", Match: `^BenchmarkAlloc/` + kind + `/` + size + `$`}
}

// shapeGo is the package benchmark of a pipeline shape: side's time per item in
// BenchmarkPipelineShapes/<name>, with its median ratio to one goroutine on one stream.
func shapeGo(name, side string) GoBench {
	return GoBench{Pkg: "cuda", Bench: "PipelineShapes", Match: `^BenchmarkPipelineShapes/` + name + `$`,
		Metric: side + "-ns/op", Baseline: side + "/one-med"}
}

// tasksDesc is one task of tasks/sum: sum(x + 1) for x = 256 uint32 (x[i] = i) in pinned host
// memory. The C floor and the raw layer run the tasks one after another in one thread on one stream.
const tasksDesc = "one task, sum(x + 1) of 256 uint32 (x[i] = i, pinned host memory): cuMemAllocAsync 1032 B " +
	"(x, then the uint64 sum) + cuMemcpyHtoDAsync x + cuMemsetD32Async sum = 0 + add_u32<<<1, 256>>>(x, 1, 256) + " +
	"read_sum<<<1, 256>>>(x, 256, 0, sum) + cuMemcpyDtoHAsync sum to pinned host memory + cuStreamSynchronize + " +
	"cuMemFreeAsync; C: one thread, one stream"

// pipelineDesc is one item of the pipeline workloads: produced on stream A, consumed on stream B.
const pipelineDesc = "one item produced on stream A and consumed on stream B: A: cuMemAllocAsync 1 KiB (256 uint32) + " +
	"fill_u32<<<1, 256>>>(p, 1, 256) + cuEventRecord; B: cuStreamWaitEvent + cuMemsetD32Async of the consumer's " +
	"device uint64 (allocated once) + read_sum<<<1, 256>>>(p, 256, 0, sum) + cuMemcpyDtoHAsync to pinned host memory + " +
	"cuStreamSynchronize + cuMemFreeAsync(p, B); C: one thread"

// submitDesc and latencyDesc say how the submit and latency rows time an iteration.
const (
	submitDesc = "only the enqueueing is on the clock, in chunks of 32 iterations (short enough that the GPU's " +
		"queue never fills), each followed by the stream's sync off the clock"
	latencyDesc = "one iteration then the stream's sync, both on the clock"
)

// workloads is the registry. Keep IDs in step with the table in tools/floor/floor.cu.
var workloads = append(baseWorkloads, copyWorkloads()...)

// baseWorkloads are the rows timed per operation; copyWorkloads adds the bandwidth rows.
var baseWorkloads = []Workload{
	{ID: "alloc/device/4KiB", Desc: "cuMemAlloc + cuMemsetD8Async + cuMemFree, 4 KiB", CFunc: "w_alloc_device_4k",
		Go: allocGo("device", "4KiB", false), Raw: rawAllocDevice(4 << 10)},
	{ID: "alloc/device/64MiB", Desc: "cuMemAlloc + cuMemsetD8Async + cuMemFree, 64 MiB", CFunc: "w_alloc_device_64m",
		Go: allocGo("device", "64MiB", false), Raw: rawAllocDevice(64 << 20)},
	{ID: "alloc/device-pool/4KiB", Desc: "cuMemAllocAsync + cuMemsetD8Async + cuMemFreeAsync, 4 KiB", CFunc: "w_alloc_device_pool_4k",
		Go: allocGo("device", "4KiB", true), Raw: rawAllocDevicePool(4 << 10)},
	{ID: "alloc/device-pool/64MiB", Desc: "cuMemAllocAsync + cuMemsetD8Async + cuMemFreeAsync, 64 MiB", CFunc: "w_alloc_device_pool_64m",
		Go: allocGo("device", "64MiB", true), Raw: rawAllocDevicePool(64 << 20)},
	{ID: "alloc/pinned/4KiB", Desc: "cuMemHostAlloc + host memset + cuMemFreeHost, 4 KiB", CFunc: "w_alloc_pinned_4k",
		Go: allocGo("pinned", "4KiB", false), Raw: rawAllocPinned(4 << 10)},
	{ID: "alloc/pinned/64MiB", Desc: "cuMemHostAlloc + host memset + cuMemFreeHost, 64 MiB", CFunc: "w_alloc_pinned_64m",
		Go: allocGo("pinned", "64MiB", false), Raw: rawAllocPinned(64 << 20)},
	{ID: "alloc/pinned-pool/4KiB", Desc: "host-pool cuMemAllocFromPoolAsync + sync + memset + cuMemFreeAsync, 4 KiB", CFunc: "w_alloc_pinned_pool_4k",
		Go: allocGo("pinned", "4KiB", true), Raw: rawAllocFromPool(4<<10, hostPool)},
	{ID: "alloc/pinned-pool/64MiB", Desc: "host-pool cuMemAllocFromPoolAsync + sync + memset + cuMemFreeAsync, 64 MiB", CFunc: "w_alloc_pinned_pool_64m",
		Go: allocGo("pinned", "64MiB", true), Raw: rawAllocFromPool(64<<20, hostPool)},
	{ID: "alloc/unified/4KiB", Desc: "cuMemAllocManaged + host memset + cuMemFree, 4 KiB", CFunc: "w_alloc_unified_4k",
		Go: allocGo("unified", "4KiB", false), Raw: rawAllocUnified(4 << 10)},
	{ID: "alloc/unified/64MiB", Desc: "cuMemAllocManaged + host memset + cuMemFree, 64 MiB", CFunc: "w_alloc_unified_64m",
		Go: allocGo("unified", "64MiB", false), Raw: rawAllocUnified(64 << 20)},
	{ID: "alloc/unified-pool/4KiB", Desc: "managed-pool cuMemAllocFromPoolAsync + sync + memset + cuMemFreeAsync, 4 KiB", CFunc: "w_alloc_unified_pool_4k",
		Go: allocGo("unified", "4KiB", true), Raw: rawAllocFromPool(4<<10, managedPool)},
	{ID: "alloc/unified-pool/64MiB", Desc: "managed-pool cuMemAllocFromPoolAsync + sync + memset + cuMemFreeAsync, 64 MiB", CFunc: "w_alloc_unified_pool_64m",
		Go: allocGo("unified", "64MiB", true), Raw: rawAllocFromPool(64<<20, managedPool)},
	{ID: "launch/empty", Desc: "cuLaunchKernel of an empty kernel (submit only; a sync every 20,000 off the clock)", CFunc: "w_launch_empty",
		Go: GoBench{Pkg: "cuda", Bench: "Launch(Empty)?", Match: `^BenchmarkLaunch(Empty|/empty/go)$`}, Raw: rawLaunchEmpty},
	{ID: "launch/empty-batch8", Desc: "launch/empty again; gocuda submits a LaunchBatch of 8 launches per call into the driver", CFunc: "w_launch_empty",
		Go: GoBench{Pkg: "cuda", Bench: "Launch(Empty)?", Match: `^BenchmarkLaunch/empty/batch8$`}, Raw: rawLaunchEmpty},
	{ID: "launch/args", Desc: "cuLaunchKernel with arguments: axpb(float*, int), 16x256 threads (submit only); the package benchmark launches axpy_f32 (4 arguments)",
		CFunc: "w_launch_args", Go: GoBench{Pkg: "cuda", Bench: "Launch(Empty)?", Match: `^BenchmarkLaunch/axpy/go$`}, Raw: rawLaunchArgs},
	{ID: "call/CtxGetCurrent", Desc: "one cuCtxGetCurrent call (binding overhead)", CFunc: "w_call_ctx_get_current",
		Go: GoBench{Pkg: "cuda", Bench: "CallOverhead", Match: `^BenchmarkCallOverhead/CtxGetCurrent/go$`}, Raw: rawCtxGetCurrent},
	{ID: "call/DeviceGetAttribute", Desc: "one cuDeviceGetAttribute call (binding overhead)", CFunc: "w_call_device_get_attribute",
		Go: GoBench{Pkg: "cuda", Bench: "CallOverhead", Match: `^BenchmarkCallOverhead/DeviceGetAttribute/go$`}, Raw: rawDeviceGetAttribute},
	{ID: "handoff/event", Desc: "cuEventRecord + cuStreamWaitEvent + launch, alternating two streams", CFunc: "w_handoff_event",
		Go: GoBench{Pkg: "cuda", Bench: "Handoff", Match: `^BenchmarkHandoff/event$`}, Raw: rawHandoffEvent},
	{ID: "handoff/host-sync", Desc: "launch + cuStreamSynchronize, alternating two streams", CFunc: "w_handoff_host_sync",
		Go: GoBench{Pkg: "cuda", Bench: "Handoff", Match: `^BenchmarkHandoff/host-sync$`}, Raw: rawHandoffHostSync},
	{ID: "handoff/buffer", Desc: "one 1 KiB buffer (256 uint32) written alternately on two streams, each use ordered on the GPU after " +
		"the previous one on the other stream: cuEventRecord(previous) + cuStreamWaitEvent(next) + add_u32<<<1, 256>>>(buf, 1, 256) " +
		"on the next stream", CFunc: "w_handoff_buffer",
		Go: GoBench{Pkg: "cuda", Bench: "Handoff", Match: `^BenchmarkHandoff/buffer$`}, Raw: rawHandoffBuffer},
	{ID: "stream/create-destroy", Desc: "cuStreamCreate(non-blocking) + cuStreamDestroy", CFunc: "w_stream_create_destroy",
		Go: GoBench{Pkg: "cuda", Bench: "StreamCreateDestroy", Match: `^BenchmarkStreamCreateDestroy$`}, Raw: rawStreamCreateDestroy},
	{ID: "stream/pool", Desc: "acquire + release of a pooled non-blocking stream (a mutex-protected LIFO free list of streams " +
		"created beforehand): acquire = lock, pop, cuStreamQuery (done), unlock; release = lock, push, unlock", CFunc: "w_stream_pool",
		Go: GoBench{Pkg: "cuda", Bench: "StreamPool", Match: `^BenchmarkStreamPool$`}, Raw: rawStreamPool},
	{ID: "tasks/sum", Desc: tasksDesc + "; the Go side runs the tasks in 20,000 goroutines", CFunc: "w_tasks_sum",
		Go: GoBench{Pkg: "cuda", Bench: "Tasks", Match: `^BenchmarkTasks/goroutines$`}, Raw: rawTasksSum},
	{ID: "tasks/sum-one", Desc: tasksDesc + "; the Go side runs the same tasks in one goroutine", CFunc: "w_tasks_sum",
		Go: GoBench{Pkg: "cuda", Bench: "Tasks", Match: `^BenchmarkTasks/one$`}, Raw: rawTasksSum},
	{ID: "pipeline/consumer", Desc: pipelineDesc + "; the Go side produces in one goroutine and consumes in another, " +
		"joined by a channel", CFunc: "w_pipeline",
		Go: GoBench{Pkg: "cuda", Bench: "Pipeline", Match: `^BenchmarkPipeline/channels$`}, Raw: rawPipeline},
	{ID: "pipeline/one", Desc: pipelineDesc + "; the Go side produces and consumes in one goroutine", CFunc: "w_pipeline",
		Go: GoBench{Pkg: "cuda", Bench: "Pipeline", Match: `^BenchmarkPipeline/one$`}, Raw: rawPipeline},
	// The pipeline shapes of issue #39, each beside one goroutine doing the same on
	// one stream in the same process (BenchmarkPipelineShapes).
	{ID: "pipeline/alloc-per-item", Desc: pipelineDesc + "; the Go side produces in one goroutine, allocating a buffer " +
		"per item, and consumes in another, joined by a channel", CFunc: "w_pipeline",
		Go: shapeGo("alloc-per-item", "pipe"), Raw: rawPipeline},
	{ID: "pipeline/four-consumers", Desc: pipelineDesc + "; the Go side produces in one goroutine and consumes in four, " +
		"each on its stream", CFunc: "w_pipeline",
		Go: shapeGo("four-consumers", "pipe"), Raw: rawPipeline},
	{ID: "pipeline/ring", Desc: pipelineDesc + ", on a ring of 8 buffers allocated beforehand (no allocation or free per item); " +
		"the Go side produces in one goroutine and consumes in another, which hands each buffer back", CFunc: "w_pipeline_ring",
		Go: shapeGo("ring", "pipe"), Raw: rawPipelineRing},
	{ID: "tasks/goroutines-20000", Desc: tasksDesc + "; the Go side runs the tasks in 20,000 goroutines at a time, each on a " +
		"pooled stream", CFunc: "w_tasks_sum",
		Go: shapeGo("goroutines", "goroutines"), Raw: rawTasksSum},
	// The graph, cuBLAS and MLP rows' gocuda side is this package's own benchmarks
	// (mlp_bench_test.go), run from its test binary like the cuda package's.
	{ID: "graph/eager10", Desc: "10 axpb launches, eager (per iteration; one sync at the end); gocuda: Function.Launch",
		CFunc: "w_graph_eager10",
		Go:    GoBench{Pkg: "tools/bench", Bench: "Graph10", Match: `^BenchmarkGraph10/eager$`}, Raw: rawGraphEager10},
	{ID: "graph/graph10", Desc: "cuGraphLaunch of the same 10 kernels captured into a graph; gocuda: Context.Capture, Exec.Launch",
		CFunc: "w_graph_graph10",
		Go:    GoBench{Pkg: "tools/bench", Bench: "Graph10", Match: `^BenchmarkGraph10/graph$`}, Raw: rawGraphGraph10},
	{ID: "graph/eager10-submit", Desc: "graph/eager10's iteration, CPU time to enqueue it: " + submitDesc, CFunc: "w_graph_eager10_submit",
		Go: GoBench{Pkg: "tools/bench", Bench: "Graph10", Match: `^BenchmarkGraph10/eager-submit$`}, Raw: rawSubmit(rawEager10Iter)},
	{ID: "graph/eager10-latency", Desc: "graph/eager10's iteration, until its result is there: " + latencyDesc, CFunc: "w_graph_eager10_latency",
		Go: GoBench{Pkg: "tools/bench", Bench: "Graph10", Match: `^BenchmarkGraph10/eager-latency$`}, Raw: rawLatency(rawEager10Iter)},
	{ID: "graph/graph10-submit", Desc: "graph/graph10's iteration, CPU time to enqueue it: " + submitDesc, CFunc: "w_graph_graph10_submit",
		Go: GoBench{Pkg: "tools/bench", Bench: "Graph10", Match: `^BenchmarkGraph10/graph-submit$`}, Raw: rawSubmit(rawGraph10Iter)},
	{ID: "graph/graph10-latency", Desc: "graph/graph10's iteration, until its result is there: " + latencyDesc, CFunc: "w_graph_graph10_latency",
		Go: GoBench{Pkg: "tools/bench", Bench: "Graph10", Match: `^BenchmarkGraph10/graph-latency$`}, Raw: rawLatency(rawGraph10Iter)},
	{ID: "cublas/sgemm-small", Desc: sgemmSmallDesc, CFunc: "w_cublas_sgemm_small",
		Go: GoBench{Pkg: "tools/bench", Bench: "SgemmSmall", Match: `^BenchmarkSgemmSmall$`}, Raw: rawSgemmSmall},
	{ID: "mlp/eager", Desc: mlpEagerDesc, CFunc: "w_mlp_eager",
		Go: GoBench{Pkg: "tools/bench", Bench: "MLP", Match: `^BenchmarkMLP/eager$`}, Raw: rawMLPEager},
	// mlp/fused: the C floor's side is its unfused eager pass (w_mlp_eager), the raw side
	// rawMLPEager: the row sets the fused Go pass beside the best unfused one.
	{ID: "mlp/fused", Desc: mlpFusedDesc, CFunc: "w_mlp_eager",
		Go: GoBench{Pkg: "tools/bench", Bench: "MLP", Match: `^BenchmarkMLP/fused$`}, Raw: rawMLPEager},
	{ID: "mlp/graph", Desc: mlpGraphDesc, CFunc: "w_mlp_graph",
		Go: GoBench{Pkg: "tools/bench", Bench: "MLP", Match: `^BenchmarkMLP/graph$`}, Raw: rawMLPGraph},
	{ID: "mlp/graph-submit", Desc: "mlp/graph's replay, CPU time to enqueue it: " + submitDesc, CFunc: "w_mlp_graph_submit",
		Go: GoBench{Pkg: "tools/bench", Bench: "MLP", Match: `^BenchmarkMLP/graph-submit$`}, Raw: rawSubmit(rawMLPGraphIter)},
	{ID: "mlp/graph-latency", Desc: "mlp/graph's replay, until its result is there: " + latencyDesc, CFunc: "w_mlp_graph_latency",
		Go: GoBench{Pkg: "tools/bench", Bench: "MLP", Match: `^BenchmarkMLP/graph-latency$`}, Raw: rawLatency(rawMLPGraphIter)},
}
