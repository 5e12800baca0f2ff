package main

import (
	_ "embed"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"unsafe"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/internal/rawctx"
)

// kernelsPTX holds empty() and axpb(float*, int); tools/floor/floor.cu loads the same file.
//
//go:embed kernels.ptx
var kernelsPTX string

// Env is the state the in-process workloads share, set up once by [NewEnv] through the
// generated raw layer only: device 0's primary context, the kernels, two streams, an event,
// memory pools, axpb's buffer and arguments, and the 10-kernel graph.
type Env struct {
	Dev   cuda.CUdevice
	Ctx   cuda.CUcontext
	Mod   cuda.CUmodule
	Empty cuda.CUfunction // empty()
	Axpb  cuda.CUfunction // axpb(float* x, int n)
	S1    cuda.CUstream   // the stream most workloads use
	S2    cuda.CUstream   // the hand-off partner
	Ev    cuda.CUevent    // timing disabled

	HostPool, ManagedPool       cuda.CUmemoryPool
	HostPoolErr, ManagedPoolErr error // why a pool could not be made (its workloads then fail)

	Graph10 cuda.CUgraphExec // 10 axpb kernels captured on S1

	params *axpbParams
	args   *[2]unsafe.Pointer // kernelParams for axpb: &params.x, &params.n
	pinner runtime.Pinner
}

// axpbParams holds axpb's arguments; it is pinned, so pointers to it may sit in the
// kernelParams array handed to cuLaunchKernel.
type axpbParams struct {
	x cuda.CUdeviceptr
	n int32
}

// AxpbArgs returns the kernelParams pointer for axpb(x, 4096).
func (e *Env) AxpbArgs() *unsafe.Pointer { return &e.args[0] }

// hostPtr reinterprets a CUDA address (host-accessible memory: pinned or managed) as a pointer.
func hostPtr(d cuda.CUdeviceptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&d)) }

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
		empty, axpb    cuda.CUfunction
		s1, s2         cuda.CUstream
		ev             cuda.CUevent
		def            cuda.CUmemoryPool
		graph, graph10 = cuda.CUgraph(0), cuda.CUgraphExec(0)
	)
	nb := uint32(cuda.CU_STREAM_NON_BLOCKING)
	err = rawctx.Run(
		rawctx.Step{What: "kernels", Do: func() (err error) {
			if empty, err = d.Function("empty"); err == nil {
				axpb, err = d.Function("axpb")
			}
			return err
		}},
		rawctx.Step{What: "cuStreamCreate", Do: func() error { return cuda.StreamCreate(&s1, nb) }},
		rawctx.Step{What: "cuStreamCreate", Do: func() error { return cuda.StreamCreate(&s2, nb) }},
		rawctx.Step{What: "cuEventCreate", Do: func() error { return cuda.EventCreate(&ev, uint32(cuda.CU_EVENT_DISABLE_TIMING)) }},
		// The default pool keeps what it frees, as in floor.cu.
		rawctx.Step{What: "cuDeviceGetDefaultMemPool", Do: func() error { return cuda.DeviceGetDefaultMemPool(&def, d.Dev) }},
		rawctx.Step{What: "cuMemPoolSetAttribute", Do: func() error { return keepAll(def) }},
	)
	if err != nil {
		return nil, err
	}
	e := &Env{Dev: d.Dev, Ctx: d.Ctx, Mod: d.Mod, Empty: empty, Axpb: axpb, S1: s1, S2: s2, Ev: ev}
	e.HostPool, e.HostPoolErr = makePool(cuda.CU_MEM_ALLOCATION_TYPE_PINNED, cuda.CU_MEM_LOCATION_TYPE_HOST)
	e.ManagedPool, e.ManagedPoolErr = makePool(cuda.CU_MEM_ALLOCATION_TYPE_MANAGED, cuda.CU_MEM_LOCATION_TYPE_DEVICE)

	// axpb's arguments live in their own pinned object (no Go pointers in it).
	e.params = &axpbParams{n: 4096}
	e.pinner.Pin(e.params)
	e.args = &[2]unsafe.Pointer{unsafe.Pointer(&e.params.x), unsafe.Pointer(&e.params.n)}
	err = rawctx.Run(
		rawctx.Step{What: "cuMemAlloc", Do: func() error { return cuda.MemAlloc(&e.params.x, uint64(e.params.n)*4) }},
		rawctx.Step{What: "cuMemsetD8", Do: func() error { return cuda.MemsetD8(e.params.x, 0, uint64(e.params.n)*4) }},
		// The graph: 10 axpb launches captured on S1 (the same as floor.cu).
		rawctx.Step{What: "cuStreamBeginCapture", Do: func() error { return cuda.StreamBeginCapture(s1, cuda.CU_STREAM_CAPTURE_MODE_RELAXED) }},
		rawctx.Step{What: "cuLaunchKernel (capture)", Do: func() error {
			for range graphKernels {
				if err := e.launchAxpb(s1); err != nil {
					return err
				}
			}
			return nil
		}},
		rawctx.Step{What: "cuStreamEndCapture", Do: func() error { return cuda.StreamEndCapture(s1, &graph) }},
		rawctx.Step{What: "cuGraphInstantiateWithFlags", Do: func() error { return cuda.GraphInstantiateWithFlags(&graph10, graph, 0) }},
		rawctx.Step{What: "cuGraphDestroy", Do: func() error { return cuda.GraphDestroy(graph) }},
		rawctx.Step{What: "cuGraphLaunch", Do: func() error { return cuda.GraphLaunch(graph10, s1) }},
		rawctx.Step{What: "cuLaunchKernel(empty)", Do: func() error { return e.launchEmpty(s1) }},
		rawctx.Step{What: "cuCtxSynchronize", Do: cuda.CtxSynchronize},
	)
	if err != nil {
		return nil, err
	}
	e.Graph10 = graph10
	return e, nil
}

// graphKernels is the number of kernels in the graph workloads.
const graphKernels = 10

func keepAll(pool cuda.CUmemoryPool) error {
	thr := ^uint64(0)
	return cuda.MemPoolSetAttribute(pool, cuda.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, unsafe.Pointer(&thr))
}

func makePool(t cuda.CUmemAllocationType, loc cuda.CUmemLocationType) (cuda.CUmemoryPool, error) {
	props := cuda.CUmemPoolProps{AllocType: t, Location: cuda.CUmemLocation{Type: loc, Id: 0}}
	var p cuda.CUmemoryPool
	if err := cuda.MemPoolCreate(&p, &props); err != nil {
		return 0, fmt.Errorf("cuMemPoolCreate(%v, %v): %w", t, loc, err)
	}
	return p, keepAll(p)
}

func (e *Env) launchAxpb(s cuda.CUstream) error {
	return cuda.LaunchKernel(e.Axpb, 16, 1, 1, 256, 1, 1, 0, s, e.AxpbArgs(), nil)
}

func (e *Env) launchEmpty(s cuda.CUstream) error {
	return cuda.LaunchKernel(e.Empty, 1, 1, 1, 1, 1, 1, 0, s, nil, nil)
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
		if err := cuda.CtxSetCurrent(e.Ctx); err != nil {
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
		var d cuda.CUdeviceptr
		for range b.N {
			if err := cuda.MemAlloc(&d, size); err != nil {
				return err
			}
			if err := cuda.MemsetD8Async(d, 1, size, e.S1); err != nil {
				return err
			}
			if err := cuda.MemFree(d); err != nil {
				return err
			}
		}
		return cuda.StreamSynchronize(e.S1)
	}
}

func rawAllocDevicePool(size uint64) func(*testing.B, *Env) error {
	return func(b *testing.B, e *Env) error {
		var d cuda.CUdeviceptr
		for range b.N {
			if err := cuda.MemAllocAsync(&d, size, e.S1); err != nil {
				return err
			}
			if err := cuda.MemsetD8Async(d, 1, size, e.S1); err != nil {
				return err
			}
			if err := cuda.MemFreeAsync(d, e.S1); err != nil {
				return err
			}
		}
		return cuda.StreamSynchronize(e.S1)
	}
}

func rawAllocPinned(size uint64) func(*testing.B, *Env) error {
	return func(b *testing.B, e *Env) error {
		var h unsafe.Pointer
		for range b.N {
			if err := cuda.MemHostAlloc(&h, size, 0); err != nil {
				return err
			}
			clear(unsafe.Slice((*byte)(h), size))
			if err := cuda.MemFreeHost(h); err != nil {
				return err
			}
		}
		return nil
	}
}

// poolOf picks one of Env's host-accessible pools.
type poolOf func(e *Env) (cuda.CUmemoryPool, error)

func hostPool(e *Env) (cuda.CUmemoryPool, error)    { return e.HostPool, e.HostPoolErr }
func managedPool(e *Env) (cuda.CUmemoryPool, error) { return e.ManagedPool, e.ManagedPoolErr }

func rawAllocFromPool(size uint64, which poolOf) func(*testing.B, *Env) error {
	return func(b *testing.B, e *Env) error {
		pool, err := which(e)
		if err != nil {
			return err
		}
		var d cuda.CUdeviceptr
		for range b.N {
			if err := cuda.MemAllocFromPoolAsync(&d, size, pool, e.S1); err != nil {
				return err
			}
			if err := cuda.StreamSynchronize(e.S1); err != nil {
				return err
			}
			clear(unsafe.Slice((*byte)(hostPtr(d)), size))
			if err := cuda.MemFreeAsync(d, e.S1); err != nil {
				return err
			}
		}
		return cuda.StreamSynchronize(e.S1)
	}
}

func rawAllocUnified(size uint64) func(*testing.B, *Env) error {
	return func(b *testing.B, e *Env) error {
		var d cuda.CUdeviceptr
		for range b.N {
			if err := cuda.MemAllocManaged(&d, size, uint32(cuda.CU_MEM_ATTACH_GLOBAL)); err != nil {
				return err
			}
			clear(unsafe.Slice((*byte)(hostPtr(d)), size))
			if err := cuda.MemFree(d); err != nil {
				return err
			}
		}
		return nil
	}
}

// launchChunk is how many launches the launch workloads submit between two synchronizations,
// which happen off the clock (as in floor.cu and the package benchmark), so the queue never fills.
const launchChunk = 20_000

func launchChunked(b *testing.B, s cuda.CUstream, launch func() error) error {
	for i := range b.N {
		if i > 0 && i%launchChunk == 0 {
			b.StopTimer()
			if err := cuda.StreamSynchronize(s); err != nil {
				return err
			}
			b.StartTimer()
		}
		if err := launch(); err != nil {
			return err
		}
	}
	b.StopTimer()
	return cuda.StreamSynchronize(s)
}

func rawLaunchEmpty(b *testing.B, e *Env) error {
	return launchChunked(b, e.S1, func() error { return e.launchEmpty(e.S1) })
}

func rawLaunchArgs(b *testing.B, e *Env) error {
	return launchChunked(b, e.S1, func() error { return e.launchAxpb(e.S1) })
}

func rawCtxGetCurrent(b *testing.B, _ *Env) error {
	var c cuda.CUcontext
	for range b.N {
		if err := cuda.CtxGetCurrent(&c); err != nil {
			return err
		}
	}
	return nil
}

func rawDeviceGetAttribute(b *testing.B, e *Env) error {
	var v int32
	for range b.N {
		if err := cuda.DeviceGetAttribute(&v, cuda.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, e.Dev); err != nil {
			return err
		}
	}
	return nil
}

func rawHandoffEvent(b *testing.B, e *Env) error {
	for i := range b.N {
		a, to := e.S1, e.S2
		if i&1 == 1 {
			a, to = e.S2, e.S1
		}
		if err := cuda.EventRecord(e.Ev, a); err != nil {
			return err
		}
		if err := cuda.StreamWaitEvent(to, e.Ev, 0); err != nil {
			return err
		}
		if err := e.launchEmpty(to); err != nil {
			return err
		}
	}
	if err := cuda.StreamSynchronize(e.S1); err != nil {
		return err
	}
	return cuda.StreamSynchronize(e.S2)
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
		if err := cuda.StreamSynchronize(to); err != nil {
			return err
		}
	}
	return nil
}

func rawStreamCreateDestroy(b *testing.B, _ *Env) error {
	var s cuda.CUstream
	for range b.N {
		if err := cuda.StreamCreate(&s, uint32(cuda.CU_STREAM_NON_BLOCKING)); err != nil {
			return err
		}
		if err := cuda.StreamDestroy(s); err != nil {
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
	return cuda.StreamSynchronize(e.S1)
}

func rawGraphGraph10(b *testing.B, e *Env) error {
	for range b.N {
		if err := cuda.GraphLaunch(e.Graph10, e.S1); err != nil {
			return err
		}
	}
	return cuda.StreamSynchronize(e.S1)
}
