package cupti

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"runtime"
	"runtime/trace"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/cupti/cuptiraw"
	"github.com/gocuda/gocuda/internal/calltrace"
)

func TestMain(m *testing.M) { os.Exit(cudatest.Main(m)) }

// fakeCorrelation stands in for CUPTI's push and pop: a clock that ticks by 10 at
// each reading, and a check that each call's pop runs on the thread of its push.
type fakeCorrelation struct {
	mu      sync.Mutex
	clock   int64
	pushed  map[int][]uint64 // thread -> ids pushed there, innermost last
	balance int
	moved   int // pops on another thread than their push
}

func (f *fakeCorrelation) begin(id uint64) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	tid := syscall.Gettid()
	f.pushed[tid] = append(f.pushed[tid], id)
	f.balance++
	f.clock += 10
	return f.clock
}

func (f *fakeCorrelation) end() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	tid := syscall.Gettid()
	if n := len(f.pushed[tid]); n > 0 {
		f.pushed[tid] = f.pushed[tid][:n-1]
	} else {
		f.moved++
	}
	f.balance--
	f.clock += 10
	return f.clock
}

// line is its caller's line.
func line() int {
	_, _, l, _ := runtime.Caller(1)
	return l
}

// runOnFake runs a timeline with fake correlation over copies, a memset and an
// Enqueue on the strict fake driver, and returns it with the lines of the calls.
func runOnFake(t *testing.T) (*Timeline, *fakeCorrelation, map[string]int, uint64) {
	_, s := cudatest.Stream(t)
	buf, err := cuda.AllocFor[float32](s, 256)
	require.NoError(t, err)
	defer buf.Close()
	host := make([]float32, 256)

	fc := &fakeCorrelation{pushed: map[int][]uint64{}}
	tl := newTimeline(fc)
	require.True(t, calltrace.CompareAndSet(nil, &tl.hook))
	defer calltrace.CompareAndSet(&tl.hook, nil)
	lines := map[string]int{}
	lines["Copy"] = line() + 1
	require.NoError(t, cuda.CopyToDeviceAsync(s, buf, host))
	lines["Memset"] = line() + 1
	require.NoError(t, buf.Memset32Async(s, 7))
	lines["Enqueue"] = line() + 1
	require.NoError(t, cuda.Enqueue(s, func(cudaraw.CUcontext, cudaraw.CUstream) error { return nil }, cuda.Writes(buf)))
	require.NoError(t, s.Synchronize())
	require.True(t, calltrace.CompareAndSet(&tl.hook, nil))
	return tl, fc, lines, goroutineID()
}

// TestCallsOnTheFake: while a timeline runs, each copy, memset and Enqueue is a Call
// naming this file's line and goroutine, bracketed by a push and a pop on one thread.
func TestCallsOnTheFake(t *testing.T) {
	tl, fc, lines, g := runOnFake(t)
	assert.Zero(t, fc.balance, "every push popped")
	assert.Zero(t, fc.moved, "each pop on the thread of its push: the goroutine stays on it")
	byOp := map[string]*Call{}
	for _, c := range tl.calls {
		if _, ok := lines[c.Op]; ok && byOp[c.Op] == nil {
			byOp[c.Op] = c
		}
	}
	for op, l := range lines {
		c := byOp[op]
		require.NotNil(t, c, op)
		assert.Equal(t, l, c.Line, op)
		assert.True(t, strings.HasSuffix(c.File, "timeline_internal_test.go"), c.File)
		assert.Equal(t, "github.com/gocuda/gocuda/cupti.runOnFake", c.Function)
		assert.Equal(t, g, c.Goroutine)
		assert.Empty(t, c.Library, "a call of the program's own")
		assert.Less(t, c.Start, c.End)
	}
}

// TestNoHookAfterStop: calls after the timeline's hook is gone are not recorded.
func TestNoHookAfterStop(t *testing.T) {
	tl, _, _, _ := runOnFake(t)
	n := len(tl.calls)
	_, s := cudatest.Stream(t)
	buf, err := cuda.AllocFor[float32](s, 16)
	require.NoError(t, err)
	defer buf.Close()
	require.NoError(t, buf.Memset32Async(s, 1))
	assert.Len(t, tl.calls, n)
	assert.Nil(t, calltrace.Load())
}

// synthetic builds CUPTI records in Go memory as CUPTI lays them out.
type synthetic struct{ recs []unsafe.Pointer }

func (s *synthetic) add(p unsafe.Pointer) { s.recs = append(s.recs, p) }

func cstr(s string) *byte { return &append([]byte(s), 0)[0] }

// syntheticTrace links records for the fake run's calls: a kernel and a copy
// queued by the Copy and Enqueue calls, a memset, an allocation, a stream
// synchronization, their driver calls and external correlations.
func syntheticTrace(t *testing.T, tl *Timeline, lines map[string]int) *Trace {
	ids := map[string]uint64{}
	for _, c := range tl.calls {
		if _, ok := ids[c.Op]; !ok {
			ids[c.Op] = c.ID
		}
	}
	var s synthetic
	ext := func(corr uint32, id uint64) {
		s.add(unsafe.Pointer(&cuptiraw.CUpti_ActivityExternalCorrelation{Kind: cuptiraw.CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
			ExternalKind: externalKind, ExternalId: cudaraw.Cuuint64(id), CorrelationId: cudaraw.Cuuint32(corr)}))
	}
	api := func(corr uint32, cbid uint32, start, end uint64) {
		s.add(unsafe.Pointer(&cuptiraw.CUpti_ActivityAPI{Kind: cuptiraw.CUPTI_ACTIVITY_KIND_DRIVER, Cbid: cudaraw.Cuuint32(cbid),
			Start: cudaraw.Cuuint64(start), End: cudaraw.Cuuint64(end), ThreadId: 77, CorrelationId: cudaraw.Cuuint32(corr)}))
	}
	// Out of order, as buffers complete: the trace sorts by start.
	s.add(unsafe.Pointer(&cuptiraw.CUpti_ActivityKernel10{Kind: cuptiraw.CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
		Start: 5000, End: 7000, DeviceId: 0, ContextId: 1, StreamId: 13, GridX: 4, GridY: 1, GridZ: 1, BlockX: 128, BlockY: 1, BlockZ: 1,
		CorrelationId: 21, Name: cstr("gemm_kernel")}))
	s.add(unsafe.Pointer(&cuptiraw.CUpti_ActivityMemcpy6{Kind: cuptiraw.CUPTI_ACTIVITY_KIND_MEMCPY, CopyKind: uint8(cuptiraw.CUPTI_ACTIVITY_MEMCPY_KIND_HTOD),
		Bytes: 1024, Start: 1000, End: 2000, DeviceId: 0, ContextId: 1, StreamId: 13, CorrelationId: 20}))
	s.add(unsafe.Pointer(&cuptiraw.CUpti_ActivityMemset4{Kind: cuptiraw.CUPTI_ACTIVITY_KIND_MEMSET, Bytes: 1024,
		Start: 3000, End: 3500, StreamId: 13, CorrelationId: 22}))
	s.add(unsafe.Pointer(&cuptiraw.CUpti_ActivityMemory4{Kind: cuptiraw.CUPTI_ACTIVITY_KIND_MEMORY2,
		MemoryOperationType: cuptiraw.CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, MemoryKind: cuptiraw.CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
		Bytes: 4096, Timestamp: 500, StreamId: 13, CorrelationId: 23}))
	s.add(unsafe.Pointer(&cuptiraw.CUpti_ActivitySynchronization2{Kind: cuptiraw.CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
		Type: cuptiraw.CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, Start: 7100, End: 7200, StreamId: 13, CorrelationId: 24}))
	api(20, 1, 900, 950)
	api(21, 2, 4000, 4100)
	api(22, 3, 2900, 2950)
	ext(20, ids["Copy"])
	ext(21, ids["Enqueue"])
	ext(22, ids["Memset"])
	b := tl.builder(func(rt bool, cbid uint32) string { return "cuApi" + string(rune('0'+cbid)) })
	for _, p := range s.recs {
		b.add(p)
	}
	runtime.KeepAlive(s.recs)
	return b.trace()
}

// TestLink: records link to their API calls through CUPTI's correlation id and to
// the Go calls through the external ids pushed around them; they come out sorted,
// with names, shapes and bytes decoded.
func TestLink(t *testing.T) {
	tl, _, lines, _ := runOnFake(t)
	tr := syntheticTrace(t, tl, lines)
	require.Len(t, tr.Activities, 5)
	kinds := []Kind{}
	for _, a := range tr.Activities {
		kinds = append(kinds, a.Kind)
	}
	assert.Equal(t, []Kind{KindMemory, KindCopy, KindMemset, KindKernel, KindSync}, kinds, "sorted by start")
	mem, cp, ms, k, sy := &tr.Activities[0], &tr.Activities[1], &tr.Activities[2], &tr.Activities[3], &tr.Activities[4]
	assert.Equal(t, "allocation device", mem.Name)
	assert.Equal(t, uint64(4096), mem.Bytes)
	assert.Equal(t, "HtoD", cp.Name)
	assert.Equal(t, uint64(1024), cp.Bytes)
	assert.Equal(t, "memset", ms.Name)
	assert.Equal(t, "gemm_kernel", k.Name)
	assert.Equal(t, [3]int32{4, 1, 1}, k.Grid)
	assert.Equal(t, [3]int32{128, 1, 1}, k.Block)
	assert.Equal(t, int64(2000), int64(k.Duration()))
	assert.Equal(t, "stream_synchronize", sy.Name)
	require.NotNil(t, cp.Call)
	assert.Equal(t, "Copy", cp.Call.Op)
	assert.Equal(t, lines["Copy"], cp.Call.Line)
	require.NotNil(t, k.Call)
	assert.Equal(t, "Enqueue", k.Call.Op)
	assert.Equal(t, lines["Enqueue"], k.Call.Line)
	require.NotNil(t, ms.Call)
	assert.Equal(t, lines["Memset"], ms.Call.Line)
	assert.Nil(t, sy.Call, "no Go call pushed around it")
	require.NotNil(t, k.API)
	assert.Equal(t, "cuApi2", k.API.Name)
	assert.Same(t, k.Call, k.API.Call)
	assert.Equal(t, uint32(77), k.API.Thread)
	assert.NotEmpty(t, tr.Calls)
}

// TestWriteChrome: the trace event JSON has the Go calls, the API calls and the
// GPU's stream on tracks of their own, and an arrow from each call to its work,
// starting inside the call's slice and ending at the work's start.
func TestWriteChrome(t *testing.T) {
	tl, _, lines, g := runOnFake(t)
	tr := syntheticTrace(t, tl, lines)
	var buf bytes.Buffer
	require.NoError(t, tr.WriteChrome(&buf))
	var doc struct {
		TraceEvents []event `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &doc), "valid JSON")
	names := map[[2]uint64]string{}
	slices := map[uint64][]event{}
	flows := map[uint64]map[string]event{}
	for _, e := range doc.TraceEvents {
		switch e.Ph {
		case "M":
			if e.Name == "thread_name" || e.Name == "process_name" {
				names[[2]uint64{e.Pid, e.Tid}] = e.Args["name"].(string)
			}
		case "X":
			require.NotNil(t, e.Dur)
			slices[e.Pid] = append(slices[e.Pid], e)
		case "s", "f":
			if flows[e.ID] == nil {
				flows[e.ID] = map[string]event{}
			}
			flows[e.ID][e.Ph] = e
		}
	}
	assert.Equal(t, "Go", names[[2]uint64{goPid, 0}])
	assert.Equal(t, "CUDA API", names[[2]uint64{apiPid, 0}])
	assert.Equal(t, "GPU 0", names[[2]uint64{gpuPid, 0}])
	assert.Equal(t, "stream 13", names[[2]uint64{gpuPid, 13}])
	assert.Equal(t, "no stream", streamName(math.MaxUint32), "CUPTI's stream id of context and event syncs")
	assert.Contains(t, names, [2]uint64{goPid, g})
	assert.Len(t, slices[gpuPid], 4, "kernel, copy, memset, sync")
	assert.Len(t, slices[apiPid], 3)
	assert.Len(t, slices[goPid], len(tr.Calls))
	// Copy, memset and kernel come from Go calls; the allocation's and the sync's
	// API calls are not in the trace: no arrow.
	require.Len(t, flows, 3)
	for id, f := range flows {
		s, e := f["s"], f["f"]
		assert.Equal(t, uint64(goPid), s.Pid, "flow %d starts at a Go call", id)
		assert.Equal(t, uint64(gpuPid), e.Pid)
		assert.Equal(t, "e", e.Bp)
		inside := false
		for _, sl := range slices[goPid] {
			inside = inside || (sl.Tid == s.Tid && sl.Ts <= s.Ts && s.Ts <= sl.Ts+*sl.Dur)
		}
		assert.True(t, inside, "flow %d starts inside its call's slice", id)
		onset := false
		for _, sl := range slices[gpuPid] {
			onset = onset || (sl.Tid == e.Tid && sl.Ts == e.Ts)
		}
		assert.True(t, onset, "flow %d ends at its work's start", id)
	}
}

// TestGoTrace: in Go's execution tracer, each Go call is a region with a
// "cupti.call" log, and Trace.Log writes each activity.
func TestGoTrace(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, trace.Start(&buf))
	tl, _, lines, _ := runOnFake(t)
	tr := syntheticTrace(t, tl, lines)
	tr.Log(context.Background())
	trace.Stop()
	out := buf.String()
	for _, s := range []string{"cuda.Copy", "cuda.Memset", "cuda.Enqueue", "cupti.call", "gpu.kernel", "gpu.copy",
		"gemm_kernel 2µs device 0 stream 13", "HtoD 1µs device 0 stream 13 bytes 1024 call #"} {
		assert.Contains(t, out, s)
	}
	var quiet bytes.Buffer
	tr.Log(context.Background()) // no tracer: nothing, and no panic
	assert.Zero(t, quiet.Len())
}

func TestSplitFunc(t *testing.T) {
	for _, c := range []struct{ full, pkg, name string }{
		{"github.com/gocuda/gocuda/cublas.Gemm[...]", "github.com/gocuda/gocuda/cublas", "Gemm"},
		{"github.com/gocuda/gocuda/cudalib.(*Cache).enqueue", "github.com/gocuda/gocuda/cudalib", "(*Cache).enqueue"},
		{"main.main", "main", "main"},
		{"main.step.func1", "main", "step.func1"},
	} {
		pkg, name := splitFunc(c.full)
		assert.Equal(t, c.pkg, pkg, c.full)
		assert.Equal(t, c.name, name, c.full)
	}
	assert.Equal(t, "cublas", topOf("github.com/gocuda/gocuda/cublas/gonumblas"))
}

func TestKindString(t *testing.T) {
	assert.Equal(t, "kernel", KindKernel.String())
	assert.Equal(t, "sync", KindSync.String())
	assert.Equal(t, "unknown", Kind(0).String())
	assert.Equal(t, "HtoD", copyName(cuptiraw.CUPTI_ACTIVITY_MEMCPY_KIND_HTOD))
	assert.Equal(t, "PtoP", copyName(cuptiraw.CUPTI_ACTIVITY_MEMCPY_KIND_PTOP))
}
