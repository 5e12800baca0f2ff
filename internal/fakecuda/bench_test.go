package fakecuda_test

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/internal/fakecuda"
)

// benchEnv makes a context of its own current on the benchmark's locked thread,
// with a non-blocking stream.
func benchEnv(b *testing.B) cuda.CUstream {
	if !fakecuda.Active() {
		b.Skip("needs the strict fake driver")
	}
	lockThread(b)
	require.NoError(b, cuda.Init(0))
	clearStack()
	var ctx cuda.CUcontext
	require.NoError(b, cuda.CtxCreate(&ctx, nil, 0, 0))
	b.Cleanup(func() { require.NoError(b, cuda.CtxDestroy(ctx)) })
	var s cuda.CUstream
	require.NoError(b, cuda.StreamCreate(&s, uint32(cuda.CU_STREAM_NON_BLOCKING)))
	return s
}

// The per-call cost of the strict fake through the raw layer (cgo call included).
func BenchmarkStrictMemsetQuery(b *testing.B) {
	s := benchEnv(b)
	var d cuda.CUdeviceptr
	require.NoError(b, cuda.MemAlloc(&d, 4096))
	for b.Loop() {
		if err := cuda.MemsetD8Async(d, 1, 4096, s); err != nil {
			b.Fatal(err)
		}
		_ = cuda.StreamQuery(s)
	}
	require.NoError(b, cuda.StreamSynchronize(s))
}

func BenchmarkStrictLaunch(b *testing.B) {
	s := benchEnv(b)
	var scratch unsafe.Pointer
	require.NoError(b, cuda.MemAllocHost(&scratch, 4096))
	img := append([]byte(testPTX), 0)
	var m cuda.CUmodule
	require.NoError(b, cuda.ModuleLoadData(&m, unsafe.Pointer(&img[0])))
	var f cuda.CUfunction
	require.NoError(b, cuda.ModuleGetFunction(&f, m, cstr("axpy")))
	var d cuda.CUdeviceptr
	require.NoError(b, cuda.MemAlloc(&d, 4096))
	params := u64(uint64(d), 0, uint64(d), 0)[:28]
	for b.Loop() {
		if err := launchWith(scratch, f, [3]uint32{1, 1, 1}, [3]uint32{128, 1, 1}, 0, s, params); err != nil {
			b.Fatal(err)
		}
	}
	require.NoError(b, cuda.StreamSynchronize(s))
}

func BenchmarkStrictAllocFree(b *testing.B) {
	s := benchEnv(b)
	for b.Loop() {
		var p cuda.CUdeviceptr
		if err := cuda.MemAllocAsync(&p, 256, s); err != nil {
			b.Fatal(err)
		}
		if err := cuda.MemFreeAsync(p, s); err != nil {
			b.Fatal(err)
		}
	}
	require.NoError(b, cuda.StreamSynchronize(s))
}

// The floor: a cgo call the fake answers from thread-local state, without its lock.
func BenchmarkStrictCtxGetCurrent(b *testing.B) {
	benchEnv(b)
	var c cuda.CUcontext
	for b.Loop() {
		if err := cuda.CtxGetCurrent(&c); err != nil {
			b.Fatal(err)
		}
	}
}
