package main

import (
	_ "embed"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/tools/internal/rawctx"
)

// kernelsPTX holds empty(), axpb(float*, int), bias_relu(float*, const float*, int, int) and
// copies of cuda/testdata/kernels.ptx's fill_u32, add_u32 and read_sum; tools/floor/floor.cu
// loads the same file.
//
//go:embed kernels.ptx
var kernelsPTX string

// Env is the state the in-process workloads share, set up once by [NewEnv] through the
// generated raw layer only: device 0's primary context, the kernels, two streams, an event,
// memory pools, axpb's buffer and arguments, the 10-kernel graph, a stream pool and the
// small-buffer workloads' memory; the MLP workloads' cuBLAS handle and memory come at their
// first run (mlp.go).
type Env struct {
	Dev   cudaraw.CUdevice
	Ctx   cudaraw.CUcontext
	Mod   cudaraw.CUmodule
	Empty cudaraw.CUfunction // empty()
	Axpb  cudaraw.CUfunction // axpb(float* x, int n)
	Fill  cudaraw.CUfunction // fill_u32(uint32_t* p, uint32_t v, uint64_t n)
	Add   cudaraw.CUfunction // add_u32(uint32_t* p, uint32_t v, uint64_t n)
	Sum   cudaraw.CUfunction // read_sum(const uint32_t* p, uint64_t n, uint64_t spin_ns, unsigned long long* out)
	Bias  cudaraw.CUfunction // bias_relu(float* h, const float* b, int rows, int cols)
	S1    cudaraw.CUstream   // the stream most workloads use
	S2    cudaraw.CUstream   // the hand-off partner
	Ev    cudaraw.CUevent    // timing disabled

	Pool    *StreamPool         // stream/pool's pool, stocked with poolStreams streams
	HBuf    cudaraw.CUdeviceptr // handoff/buffer's buffer: bufLen uint32
	DSum    cudaraw.CUdeviceptr // pipeline's device sum: one uint64, the consumer's, reused
	HostX   unsafe.Pointer      // pinned host memory: x[i] = i for i < bufLen (tasks/sum's input)
	HostRes unsafe.Pointer      // pinned host memory: one uint64, the sum copied back

	HostPool, ManagedPool       cudaraw.CUmemoryPool
	HostPoolErr, ManagedPoolErr error // why a pool could not be made (its workloads then fail)

	Graph10 cudaraw.CUgraphExec // 10 axpb kernels captured on S1

	mlp     *rawNet // the MLP workloads' state, made at their first run (see Env.mlpNet)
	mlpErr  error
	mlpExec cudaraw.CUgraphExec // mlp/graph's forward pass, captured at its first run

	params *axpbParams
	args   *[2]unsafe.Pointer // kernelParams for axpb: &params.x, &params.n
	pinner runtime.Pinner
}

// axpbParams holds axpb's arguments; it is pinned, so pointers to it may sit in the
// kernelParams array handed to cuLaunchKernel.
type axpbParams struct {
	x cudaraw.CUdeviceptr
	n int32
}

// AxpbArgs returns the kernelParams pointer for axpb(x, 4096).
func (e *Env) AxpbArgs() *unsafe.Pointer { return &e.args[0] }

// hostPtr reinterprets a CUDA address (host-accessible memory: pinned or managed) as a pointer.
func hostPtr(d cudaraw.CUdeviceptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&d)) }

// NewEnv sets up the shared state on the calling goroutine's OS thread, which it locks for good
// (call it from a goroutine that stays locked, or from main).
//
// Out-parameters are locals copied into Env afterwards: cgo checks the whole object an
// unsafe.Pointer argument points into, and Env holds Go pointers.
func NewEnv() (*Env, error) {
	runtime.LockOSThread()
	d, err := rawctx.Open(kernelsPTX)
	if err != nil {
		return nil, err
	}
	var (
		empty, axpb, fill, add, sum cudaraw.CUfunction
		bias                        cudaraw.CUfunction
		s1, s2                      cudaraw.CUstream
		ev                          cudaraw.CUevent
		def                         cudaraw.CUmemoryPool
		graph, graph10              = cudaraw.CUgraph(0), cudaraw.CUgraphExec(0)
		hbuf, dsum                  cudaraw.CUdeviceptr
		hostX, hostRes              unsafe.Pointer
	)
	nb := uint32(cudaraw.CU_STREAM_NON_BLOCKING)
	err = rawctx.Run(
		rawctx.Step{What: "kernels", Do: func() (err error) {
			for _, k := range []struct {
				f    *cudaraw.CUfunction
				name string
			}{{&empty, "empty"}, {&axpb, "axpb"}, {&fill, "fill_u32"}, {&add, "add_u32"}, {&sum, "read_sum"}, {&bias, "bias_relu"}} {
				if *k.f, err = d.Function(k.name); err != nil {
					return err
				}
			}
			return nil
		}},
		rawctx.Step{What: "cuStreamCreate", Do: func() error { return cudaraw.StreamCreate(&s1, nb) }},
		rawctx.Step{What: "cuStreamCreate", Do: func() error { return cudaraw.StreamCreate(&s2, nb) }},
		rawctx.Step{What: "cuEventCreate", Do: func() error { return cudaraw.EventCreate(&ev, uint32(cudaraw.CU_EVENT_DISABLE_TIMING)) }},
		// The default pool keeps what it frees, as in floor.cu.
		rawctx.Step{What: "cuDeviceGetDefaultMemPool", Do: func() error { return cudaraw.DeviceGetDefaultMemPool(&def, d.Dev) }},
		rawctx.Step{What: "cuMemPoolSetAttribute", Do: func() error { return keepAll(def) }},
		// The small-buffer workloads' memory, as in floor.cu.
		rawctx.Step{What: "cuMemAlloc", Do: func() error { return cudaraw.MemAlloc(&hbuf, bufLen*4) }},
		rawctx.Step{What: "cuMemAlloc", Do: func() error { return cudaraw.MemAlloc(&dsum, 8) }},
		rawctx.Step{What: "cuMemHostAlloc", Do: func() error { return cudaraw.MemHostAlloc(&hostX, bufLen*4, 0) }},
		rawctx.Step{What: "cuMemHostAlloc", Do: func() error { return cudaraw.MemHostAlloc(&hostRes, 8, 0) }},
	)
	if err != nil {
		return nil, err
	}
	x := unsafe.Slice((*uint32)(hostX), bufLen)
	for i := range x {
		x[i] = uint32(i)
	}
	pool, err := NewStreamPool(poolStreams)
	if err != nil {
		return nil, err
	}
	e := &Env{Dev: d.Dev, Ctx: d.Ctx, Mod: d.Mod, Empty: empty, Axpb: axpb, Fill: fill, Add: add, Sum: sum, Bias: bias,
		S1: s1, S2: s2, Ev: ev, Pool: pool, HBuf: hbuf, DSum: dsum, HostX: hostX, HostRes: hostRes}
	e.HostPool, e.HostPoolErr = makePool(cudaraw.CU_MEM_ALLOCATION_TYPE_PINNED, cudaraw.CU_MEM_LOCATION_TYPE_HOST)
	e.ManagedPool, e.ManagedPoolErr = makePool(cudaraw.CU_MEM_ALLOCATION_TYPE_MANAGED, cudaraw.CU_MEM_LOCATION_TYPE_DEVICE)

	// axpb's arguments live in their own pinned object (no Go pointers in it).
	e.params = &axpbParams{n: 4096}
	e.pinner.Pin(e.params)
	e.args = &[2]unsafe.Pointer{unsafe.Pointer(&e.params.x), unsafe.Pointer(&e.params.n)}
	err = rawctx.Run(
		rawctx.Step{What: "cuMemAlloc", Do: func() error { return cudaraw.MemAlloc(&e.params.x, uint64(e.params.n)*4) }},
		rawctx.Step{What: "cuMemsetD8", Do: func() error { return cudaraw.MemsetD8(e.params.x, 0, uint64(e.params.n)*4) }},
		// The graph: 10 axpb launches captured on S1 (the same as floor.cu).
		rawctx.Step{What: "cuStreamBeginCapture", Do: func() error { return cudaraw.StreamBeginCapture(s1, cudaraw.CU_STREAM_CAPTURE_MODE_RELAXED) }},
		rawctx.Step{What: "cuLaunchKernel (capture)", Do: func() error {
			for range graphKernels {
				if err := e.launchAxpb(s1); err != nil {
					return err
				}
			}
			return nil
		}},
		rawctx.Step{What: "cuStreamEndCapture", Do: func() error { return cudaraw.StreamEndCapture(s1, &graph) }},
		rawctx.Step{What: "cuGraphInstantiateWithFlags", Do: func() error { return cudaraw.GraphInstantiateWithFlags(&graph10, graph, 0) }},
		rawctx.Step{What: "cuGraphDestroy", Do: func() error { return cudaraw.GraphDestroy(graph) }},
		rawctx.Step{What: "cuGraphLaunch", Do: func() error { return cudaraw.GraphLaunch(graph10, s1) }},
		rawctx.Step{What: "cuLaunchKernel(empty)", Do: func() error { return e.launchEmpty(s1) }},
		rawctx.Step{What: "cuCtxSynchronize", Do: cudaraw.CtxSynchronize},
	)
	if err != nil {
		return nil, err
	}
	e.Graph10 = graph10
	return e, nil
}

// graphKernels is the number of kernels in the graph workloads.
const graphKernels = 10

func keepAll(pool cudaraw.CUmemoryPool) error {
	thr := ^uint64(0)
	return cudaraw.MemPoolSetAttribute(pool, cudaraw.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, unsafe.Pointer(&thr))
}

func makePool(t cudaraw.CUmemAllocationType, loc cudaraw.CUmemLocationType) (cudaraw.CUmemoryPool, error) {
	props := cudaraw.CUmemPoolProps{AllocType: t, Location: cudaraw.CUmemLocation{Type: loc, Id: 0}}
	var p cudaraw.CUmemoryPool
	if err := cudaraw.MemPoolCreate(&p, &props); err != nil {
		return 0, fmt.Errorf("cuMemPoolCreate(%v, %v): %w", t, loc, err)
	}
	return p, keepAll(p)
}

func (e *Env) launchAxpb(s cudaraw.CUstream) error {
	return cudaraw.LaunchKernel(e.Axpb, 16, 1, 1, 256, 1, 1, 0, s, e.AxpbArgs(), nil)
}

func (e *Env) launchEmpty(s cudaraw.CUstream) error {
	return cudaraw.LaunchKernel(e.Empty, 1, 1, 1, 1, 1, 1, 0, s, nil, nil)
}

// RunRaw runs one in-process workload under testing.Benchmark. Each run happens on a fresh
// goroutine, so it locks that goroutine's thread and makes the context current first.
func RunRaw(e *Env, f func(b *testing.B, e *Env) error) (testing.BenchmarkResult, error) {
	var ferr error
	r := testing.Benchmark(func(b *testing.B) {
		if ferr != nil {
			b.SkipNow()
		}
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cudaraw.CtxSetCurrent(e.Ctx); err != nil {
			ferr = err
			b.SkipNow()
		}
		b.ResetTimer()
		if err := f(b, e); err != nil {
			ferr = err
			b.SkipNow()
		}
	})
	if ferr == nil && r.N == 0 {
		ferr = errors.New("no result")
	}
	return r, ferr
}

// ---- the in-process workloads: each does b.N operations, the final sync included ----

func rawAllocDevice(size uint64) func(*testing.B, *Env) error {
	return func(b *testing.B, e *Env) error {
		var d cudaraw.CUdeviceptr
		for range b.N {
			if err := cudaraw.MemAlloc(&d, size); err != nil {
				return err
			}
			if err := cudaraw.MemsetD8Async(d, 1, size, e.S1); err != nil {
				return err
			}
			if err := cudaraw.MemFree(d); err != nil {
				return err
			}
		}
		return cudaraw.StreamSynchronize(e.S1)
	}
}

func rawAllocDevicePool(size uint64) func(*testing.B, *Env) error {
	return func(b *testing.B, e *Env) error {
		var d cudaraw.CUdeviceptr
		for range b.N {
			if err := cudaraw.MemAllocAsync(&d, size, e.S1); err != nil {
				return err
			}
			if err := cudaraw.MemsetD8Async(d, 1, size, e.S1); err != nil {
				return err
			}
			if err := cudaraw.MemFreeAsync(d, e.S1); err != nil {
				return err
			}
		}
		return cudaraw.StreamSynchronize(e.S1)
	}
}

func rawAllocPinned(size uint64) func(*testing.B, *Env) error {
	return func(b *testing.B, e *Env) error {
		var h unsafe.Pointer
		for range b.N {
			if err := cudaraw.MemHostAlloc(&h, size, 0); err != nil {
				return err
			}
			clear(unsafe.Slice((*byte)(h), size))
			if err := cudaraw.MemFreeHost(h); err != nil {
				return err
			}
		}
		return nil
	}
}

// poolOf picks one of Env's host-accessible pools.
type poolOf func(e *Env) (cudaraw.CUmemoryPool, error)

func hostPool(e *Env) (cudaraw.CUmemoryPool, error)    { return e.HostPool, e.HostPoolErr }
func managedPool(e *Env) (cudaraw.CUmemoryPool, error) { return e.ManagedPool, e.ManagedPoolErr }

func rawAllocFromPool(size uint64, which poolOf) func(*testing.B, *Env) error {
	return func(b *testing.B, e *Env) error {
		pool, err := which(e)
		if err != nil {
			return err
		}
		var d cudaraw.CUdeviceptr
		for range b.N {
			if err := cudaraw.MemAllocFromPoolAsync(&d, size, pool, e.S1); err != nil {
				return err
			}
			if err := cudaraw.StreamSynchronize(e.S1); err != nil {
				return err
			}
			clear(unsafe.Slice((*byte)(hostPtr(d)), size))
			if err := cudaraw.MemFreeAsync(d, e.S1); err != nil {
				return err
			}
		}
		return cudaraw.StreamSynchronize(e.S1)
	}
}

func rawAllocUnified(size uint64) func(*testing.B, *Env) error {
	return func(b *testing.B, e *Env) error {
		var d cudaraw.CUdeviceptr
		for range b.N {
			if err := cudaraw.MemAllocManaged(&d, size, uint32(cudaraw.CU_MEM_ATTACH_GLOBAL)); err != nil {
				return err
			}
			clear(unsafe.Slice((*byte)(hostPtr(d)), size))
			if err := cudaraw.MemFree(d); err != nil {
				return err
			}
		}
		return nil
	}
}

// launchChunk is how many launches the launch workloads submit between two synchronizations,
// which happen off the clock (as in floor.cu and the package benchmark), so the queue never fills.
const launchChunk = 20_000

func launchChunked(b *testing.B, s cudaraw.CUstream, launch func() error) error {
	for i := range b.N {
		if i > 0 && i%launchChunk == 0 {
			b.StopTimer()
			if err := cudaraw.StreamSynchronize(s); err != nil {
				return err
			}
			b.StartTimer()
		}
		if err := launch(); err != nil {
			return err
		}
	}
	b.StopTimer()
	return cudaraw.StreamSynchronize(s)
}

func rawLaunchEmpty(b *testing.B, e *Env) error {
	return launchChunked(b, e.S1, func() error { return e.launchEmpty(e.S1) })
}

func rawLaunchArgs(b *testing.B, e *Env) error {
	return launchChunked(b, e.S1, func() error { return e.launchAxpb(e.S1) })
}

func rawCtxGetCurrent(b *testing.B, _ *Env) error {
	var c cudaraw.CUcontext
	for range b.N {
		if err := cudaraw.CtxGetCurrent(&c); err != nil {
			return err
		}
	}
	return nil
}

func rawDeviceGetAttribute(b *testing.B, e *Env) error {
	var v int32
	for range b.N {
		if err := cudaraw.DeviceGetAttribute(&v, cudaraw.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, e.Dev); err != nil {
			return err
		}
	}
	return nil
}

func rawHandoffEvent(b *testing.B, e *Env) error { return rawHandoffs(b, e, e.launchEmpty) }

// rawHandoffs hands work between e.S1 and e.S2 b.N times, as floor.cu's hand-off
// workloads do: cuEventRecord on one stream, cuStreamWaitEvent on the other, then
// launch there; it ends with both streams synchronized.
func rawHandoffs(b *testing.B, e *Env, launch func(to cudaraw.CUstream) error) error {
	for i := range b.N {
		a, to := e.S1, e.S2
		if i&1 == 1 {
			a, to = e.S2, e.S1
		}
		if err := cudaraw.EventRecord(e.Ev, a); err != nil {
			return err
		}
		if err := cudaraw.StreamWaitEvent(to, e.Ev, 0); err != nil {
			return err
		}
		if err := launch(to); err != nil {
			return err
		}
	}
	if err := cudaraw.StreamSynchronize(e.S1); err != nil {
		return err
	}
	return cudaraw.StreamSynchronize(e.S2)
}

func rawHandoffHostSync(b *testing.B, e *Env) error {
	for i := range b.N {
		to := e.S2
		if i&1 == 1 {
			to = e.S1
		}
		if err := e.launchEmpty(to); err != nil {
			return err
		}
		if err := cudaraw.StreamSynchronize(to); err != nil {
			return err
		}
	}
	return nil
}

func rawStreamCreateDestroy(b *testing.B, _ *Env) error {
	var s cudaraw.CUstream
	for range b.N {
		if err := cudaraw.StreamCreate(&s, uint32(cudaraw.CU_STREAM_NON_BLOCKING)); err != nil {
			return err
		}
		if err := cudaraw.StreamDestroy(s); err != nil {
			return err
		}
	}
	return nil
}

func rawGraphEager10(b *testing.B, e *Env) error {
	for range b.N {
		for range graphKernels {
			if err := e.launchAxpb(e.S1); err != nil {
				return err
			}
		}
	}
	return cudaraw.StreamSynchronize(e.S1)
}

func rawGraphGraph10(b *testing.B, e *Env) error {
	for range b.N {
		if err := cudaraw.GraphLaunch(e.Graph10, e.S1); err != nil {
			return err
		}
	}
	return cudaraw.StreamSynchronize(e.S1)
}

// submitChunk is how many iterations a submit row enqueues between syncs: few enough
// that the GPU's queue never fills (floor.cu's kSubmitChunk).
const submitChunk = 32

// rawSubmit is floor.cu's submit_time over iter: only the enqueueing on the clock, in
// chunks of submitChunk iterations, each followed by the sync off the clock.
func rawSubmit(iter func(e *Env) error) func(*testing.B, *Env) error {
	return func(b *testing.B, e *Env) error {
		var total time.Duration
		for done := 0; done < b.N; done += submitChunk {
			t0 := time.Now()
			for range min(submitChunk, b.N-done) {
				if err := iter(e); err != nil {
					return err
				}
			}
			total += time.Since(t0)
			if err := cudaraw.StreamSynchronize(e.S1); err != nil {
				return err
			}
		}
		b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/op")
		return nil
	}
}

// rawLatency is floor.cu's latency_time over iter: each iteration then the sync, on the clock.
func rawLatency(iter func(e *Env) error) func(*testing.B, *Env) error {
	return func(b *testing.B, e *Env) error {
		for range b.N {
			if err := iter(e); err != nil {
				return err
			}
			if err := cudaraw.StreamSynchronize(e.S1); err != nil {
				return err
			}
		}
		return nil
	}
}

func rawEager10Iter(e *Env) error {
	for range graphKernels {
		if err := e.launchAxpb(e.S1); err != nil {
			return err
		}
	}
	return nil
}

func rawGraph10Iter(e *Env) error { return cudaraw.GraphLaunch(e.Graph10, e.S1) }

// ---- the small-buffer workloads: handoff/buffer, stream/pool, tasks/sum, pipeline/* ----

const (
	bufLen      = 256 // uint32 elements of the small buffers
	bufThreads  = 256 // threads of the one block each of their kernels runs
	poolStreams = 8   // streams stream/pool's pool starts with
	poolMax     = 64  // streams it keeps at most
)

// bufArgs holds the arguments of fill_u32/add_u32(p, v, n) and read_sum(p, n, spin_ns, out)
// on one buffer. It is pinned, so the kernelParams arrays may point into it.
type bufArgs struct {
	p, out  cudaraw.CUdeviceptr
	v       uint32
	n, spin uint64
}

// bufKernels is a pinned bufArgs and the kernelParams arrays that point into it.
type bufKernels struct {
	a    *bufArgs
	elem *[3]unsafe.Pointer // fill_u32 and add_u32: p, v, n
	sum  *[4]unsafe.Pointer // read_sum: p, n, spin_ns, out
}

// newBufKernels returns the arguments p, v = 1, n = bufLen (and spin_ns = 0, out for
// read_sum), pinned with pin.
func newBufKernels(pin *runtime.Pinner, p, out cudaraw.CUdeviceptr) bufKernels {
	a := &bufArgs{p: p, out: out, v: 1, n: bufLen}
	pin.Pin(a)
	return bufKernels{
		a:    a,
		elem: &[3]unsafe.Pointer{unsafe.Pointer(&a.p), unsafe.Pointer(&a.v), unsafe.Pointer(&a.n)},
		sum:  &[4]unsafe.Pointer{unsafe.Pointer(&a.p), unsafe.Pointer(&a.n), unsafe.Pointer(&a.spin), unsafe.Pointer(&a.out)},
	}
}

// launch runs f<<<1, bufThreads>>> on s with args (k.elem[:] or k.sum[:]).
func (k bufKernels) launch(f cudaraw.CUfunction, s cudaraw.CUstream, args []unsafe.Pointer) error {
	return cudaraw.LaunchKernel(f, 1, 1, 1, bufThreads, 1, 1, 0, s, &args[0], nil)
}

func rawHandoffBuffer(b *testing.B, e *Env) error {
	b.StopTimer()
	var pin runtime.Pinner
	defer pin.Unpin()
	k := newBufKernels(&pin, e.HBuf, 0)
	if err := cudaraw.MemsetD32Async(e.HBuf, 0, bufLen, e.S1); err != nil {
		return err
	}
	if err := cudaraw.StreamSynchronize(e.S1); err != nil {
		return err
	}
	b.StartTimer()
	if err := rawHandoffs(b, e, func(to cudaraw.CUstream) error { return k.launch(e.Add, to, k.elem[:]) }); err != nil {
		return err
	}
	b.StopTimer()
	got := make([]uint32, bufLen)
	if err := cudaraw.MemcpyDtoH(unsafe.Pointer(&got[0]), e.HBuf, bufLen*4); err != nil {
		return err
	}
	for i, v := range got {
		if v != uint32(b.N) {
			return fmt.Errorf("handoff/buffer: element %d is %d after %d increments", i, v, b.N)
		}
	}
	return nil
}

// StreamPool is stream/pool's pool, the same as floor.cu's: a mutex-protected LIFO free list
// of non-blocking streams that hands out only streams whose work is complete.
type StreamPool struct {
	mu   sync.Mutex
	free []cudaraw.CUstream // free[len-1] is the most recently released
}

// NewStreamPool returns a pool stocked with n new streams.
func NewStreamPool(n int) (*StreamPool, error) {
	p := &StreamPool{free: make([]cudaraw.CUstream, 0, poolMax)}
	for range n {
		var s cudaraw.CUstream
		if err := cudaraw.StreamCreate(&s, uint32(cudaraw.CU_STREAM_NON_BLOCKING)); err != nil {
			return nil, fmt.Errorf("cuStreamCreate: %w", err)
		}
		p.free = append(p.free, s)
	}
	return p, nil
}

// Acquire takes the most recently released stream whose work is done (cuStreamQuery under
// the lock), or creates a stream when none is.
func (p *StreamPool) Acquire() (cudaraw.CUstream, error) {
	p.mu.Lock()
	for i := len(p.free) - 1; i >= 0; i-- {
		s := p.free[i]
		err := cudaraw.StreamQuery(s)
		if errors.Is(err, cudaraw.ErrNotReady) {
			continue // still busy: stays in the list
		}
		if err != nil {
			p.mu.Unlock()
			return 0, err
		}
		p.free = slices.Delete(p.free, i, i+1)
		p.mu.Unlock()
		return s, nil
	}
	p.mu.Unlock()
	var s cudaraw.CUstream
	return s, cudaraw.StreamCreate(&s, uint32(cudaraw.CU_STREAM_NON_BLOCKING))
}

// Release puts s back on top of the list; a full pool destroys it.
func (p *StreamPool) Release(s cudaraw.CUstream) error {
	p.mu.Lock()
	if len(p.free) < poolMax {
		p.free = append(p.free, s)
		p.mu.Unlock()
		return nil
	}
	p.mu.Unlock()
	return cudaraw.StreamDestroy(s)
}

func rawStreamPool(b *testing.B, e *Env) error {
	for range b.N {
		s, err := e.Pool.Acquire()
		if err != nil {
			return err
		}
		if err := e.Pool.Release(s); err != nil {
			return err
		}
	}
	return nil
}

func rawTasksSum(b *testing.B, e *Env) error {
	b.StopTimer()
	var pin runtime.Pinner
	defer pin.Unpin()
	k := newBufKernels(&pin, 0, 0)
	res := (*uint64)(e.HostRes)
	*res = 0
	b.StartTimer()
	for range b.N {
		// x: bufLen uint32, then the uint64 sum at byte bufLen*4.
		if err := cudaraw.MemAllocAsync(&k.a.p, bufLen*4+8, e.S1); err != nil {
			return err
		}
		k.a.out = k.a.p + bufLen*4
		if err := cudaraw.MemcpyHtoDAsync(k.a.p, e.HostX, bufLen*4, e.S1); err != nil {
			return err
		}
		if err := cudaraw.MemsetD32Async(k.a.out, 0, 2, e.S1); err != nil {
			return err
		}
		if err := k.launch(e.Add, e.S1, k.elem[:]); err != nil {
			return err
		}
		if err := k.launch(e.Sum, e.S1, k.sum[:]); err != nil {
			return err
		}
		if err := cudaraw.MemcpyDtoHAsync(e.HostRes, k.a.out, 8, e.S1); err != nil {
			return err
		}
		if err := cudaraw.StreamSynchronize(e.S1); err != nil {
			return err
		}
		if err := cudaraw.MemFreeAsync(k.a.p, e.S1); err != nil {
			return err
		}
	}
	b.StopTimer()
	if want := uint64(bufLen * (bufLen + 1) / 2); *res != want {
		return fmt.Errorf("tasks/sum: sum is %d, want %d", *res, want)
	}
	return nil
}

func rawPipeline(b *testing.B, e *Env) error { return rawPipelineRun(b, e, 0) }

// rawPipelineRing is rawPipeline on a ring of 8 buffers allocated beforehand (S2 is
// synchronized after every item, so the fill needs no event back from it).
func rawPipelineRing(b *testing.B, e *Env) error { return rawPipelineRun(b, e, 8) }

// rawPipelineRun runs pipeline items, each on a buffer of its own (ring 0) or on the
// next of a ring of buffers.
func rawPipelineRun(b *testing.B, e *Env, ring int) error {
	b.StopTimer()
	var pin runtime.Pinner
	defer pin.Unpin()
	k := newBufKernels(&pin, 0, e.DSum)
	res := (*uint64)(e.HostRes)
	*res = 0
	bufs := make([]cudaraw.CUdeviceptr, ring)
	for i := range bufs {
		if err := cudaraw.MemAllocAsync(&bufs[i], bufLen*4, e.S1); err != nil {
			return err
		}
	}
	defer func() {
		for _, p := range bufs {
			_ = cudaraw.MemFreeAsync(p, e.S1)
		}
		_ = cudaraw.StreamSynchronize(e.S1)
	}()
	b.StartTimer()
	for i := range b.N {
		// Produce on S1.
		if ring > 0 {
			k.a.p = bufs[i%ring]
		} else if err := cudaraw.MemAllocAsync(&k.a.p, bufLen*4, e.S1); err != nil {
			return err
		}
		if err := k.launch(e.Fill, e.S1, k.elem[:]); err != nil {
			return err
		}
		if err := cudaraw.EventRecord(e.Ev, e.S1); err != nil {
			return err
		}
		// Consume on S2.
		if err := cudaraw.StreamWaitEvent(e.S2, e.Ev, 0); err != nil {
			return err
		}
		if err := cudaraw.MemsetD32Async(e.DSum, 0, 2, e.S2); err != nil {
			return err
		}
		if err := k.launch(e.Sum, e.S2, k.sum[:]); err != nil {
			return err
		}
		if err := cudaraw.MemcpyDtoHAsync(e.HostRes, e.DSum, 8, e.S2); err != nil {
			return err
		}
		if err := cudaraw.StreamSynchronize(e.S2); err != nil {
			return err
		}
		if ring == 0 {
			if err := cudaraw.MemFreeAsync(k.a.p, e.S2); err != nil {
				return err
			}
		}
	}
	b.StopTimer()
	if want := uint64(bufLen); *res != want {
		return fmt.Errorf("pipeline: sum is %d, want %d", *res, want)
	}
	return nil
}
