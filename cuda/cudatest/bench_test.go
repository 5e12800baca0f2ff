package cudatest_test

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
)

// benchEnv makes a context of its own current on the benchmark's locked thread,
// with a non-blocking stream.
func benchEnv(b *testing.B) cudaraw.CUstream {
	if !cudatest.Active() {
		b.Skip("needs the strict fake driver")
	}
	lockThread(b)
	require.NoError(b, cudaraw.Init(0))
	clearStack()
	var ctx cudaraw.CUcontext
	require.NoError(b, cudaraw.CtxCreate(&ctx, nil, 0, 0))
	b.Cleanup(func() { require.NoError(b, cudaraw.CtxDestroy(ctx)) })
	var s cudaraw.CUstream
	require.NoError(b, cudaraw.StreamCreate(&s, uint32(cudaraw.CU_STREAM_NON_BLOCKING)))
	return s
}

// The per-call cost of the strict fake through the raw layer (cgo call included).
func BenchmarkStrictMemsetQuery(b *testing.B) {
	s := benchEnv(b)
	var d cudaraw.CUdeviceptr
	require.NoError(b, cudaraw.MemAlloc(&d, 4096))
	for b.Loop() {
		if err := cudaraw.MemsetD8Async(d, 1, 4096, s); err != nil {
			b.Fatal(err)
		}
		_ = cudaraw.StreamQuery(s)
	}
	require.NoError(b, cudaraw.StreamSynchronize(s))
}

func BenchmarkStrictLaunch(b *testing.B) {
	s := benchEnv(b)
	var scratch unsafe.Pointer
	require.NoError(b, cudaraw.MemAllocHost(&scratch, 4096))
	img := append([]byte(testPTX), 0)
	var m cudaraw.CUmodule
	require.NoError(b, cudaraw.ModuleLoadData(&m, unsafe.Pointer(&img[0])))
	var f cudaraw.CUfunction
	require.NoError(b, cudaraw.ModuleGetFunction(&f, m, cstr("axpy")))
	var d cudaraw.CUdeviceptr
	require.NoError(b, cudaraw.MemAlloc(&d, 4096))
	params := u64(uint64(d), 0, uint64(d), 0)[:28]
	for b.Loop() {
		if err := launchWith(scratch, f, [3]uint32{1, 1, 1}, [3]uint32{128, 1, 1}, 0, s, params); err != nil {
			b.Fatal(err)
		}
	}
	require.NoError(b, cudaraw.StreamSynchronize(s))
}

func BenchmarkStrictAllocFree(b *testing.B) {
	s := benchEnv(b)
	for b.Loop() {
		var p cudaraw.CUdeviceptr
		if err := cudaraw.MemAllocAsync(&p, 256, s); err != nil {
			b.Fatal(err)
		}
		if err := cudaraw.MemFreeAsync(p, s); err != nil {
			b.Fatal(err)
		}
	}
	require.NoError(b, cudaraw.StreamSynchronize(s))
}

// The floor: a cgo call the fake answers from thread-local state, without its lock.
func BenchmarkStrictCtxGetCurrent(b *testing.B) {
	benchEnv(b)
	var c cudaraw.CUcontext
	for b.Loop() {
		if err := cudaraw.CtxGetCurrent(&c); err != nil {
			b.Fatal(err)
		}
	}
}
