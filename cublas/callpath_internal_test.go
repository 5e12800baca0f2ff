package cublas

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/tools/bench/callbench"
	"github.com/stretchr/testify/require"
)

// BenchmarkCallPath splits Gemm's cost over a C loop of cublasSgemm_v2 (the 256×16×256
// SGEMM of an MLP layer, as cublas/sgemm-small) into its layers, all in alternating
// chunks on one locked thread, every side on a handle with a workspace of
// DefaultWorkspaceSize: the raw binding, the generated call that makes the context current
// (in), the handle cache without the hand-off (take), the hand-off without the cache
// (enqueue), call (both), and Gemm (with its operand checks). The -noop sides run the
// same Go layers around no cuBLAS call: what they cost on their own, against what
// they add to the call they surround.
func BenchmarkCallPath(b *testing.B) {
	const m, n, k = 256, 16, 256
	s, ops := gemmSetup(b, m*k, k*n, m*n)
	a, x, y := ops[0], ops[1], ops[2]
	ctx := s.Context()
	pa, _ := cuda.DevicePtr[float32](a)
	px, _ := cuda.DevicePtr[float32](x)
	py, _ := cuda.DevicePtr[float32](y)

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	require.NoError(b, cudaraw.CtxSetCurrent(ctx.Handle()))
	var hr cublasraw.CublasHandle
	require.NoError(b, cublasraw.Create(&hr))
	defer func() { _ = s.Synchronize(); _ = cublasraw.Destroy(hr) }()
	require.NoError(b, cublasraw.SetStream(hr, s.Handle()))
	// The raw handle's workspace: pool memory of the idiomatic handles' size, so
	// that cuBLAS picks the same kernels on both (its own default workspace is larger).
	ws, err := cuda.AllocFor[byte](s, DefaultWorkspaceSize)
	require.NoError(b, err)
	defer ws.Close()
	pw, err := cuda.DevicePtr[byte](ws)
	require.NoError(b, err)
	require.NoError(b, cublasraw.SetWorkspace(hr, unsafe.Pointer(pw), DefaultWorkspaceSize))
	sc := &scalars{}
	alpha, beta := setScalars[float32](sc, 1, 0)
	ch := ctx.Handle()
	uses := []cuda.Use{cuda.Reads(a), cuda.Reads(x), cuda.Writes(y)}
	gemm := func(c cudaraw.CUcontext, h cublasraw.CublasHandle, sc *scalars) error {
		al, be := setScalars[float32](sc, 1, 0)
		return cublasraw.SgemmIn(c, h, NoTrans, NoTrans, m, n, k, al, pa, m, px, k, be, py, m)
	}
	noop := func(cudaraw.CUcontext, cublasraw.CublasHandle, *scalars) error { return nil }
	take1 := func(f func(cudaraw.CUcontext, cublasraw.CublasHandle, *scalars) error) error {
		h, err := take(ctx, s, uses)
		if err != nil {
			return err
		}
		defer handles.Put(s, h)
		if err := bind(ch, h, s.Handle()); err != nil {
			return err
		}
		return f(ch, h.Raw, h.State.scal)
	}
	proc, err := cublasraw.Library().NewProc("cublasSgemm_v2").Addr()
	require.NoError(b, err)
	c1 := &callbench.MLP{Sgemm: proc, Handle: uintptr(hr), Stream: uintptr(s.Handle()),
		W: []uintptr{uintptr(unsafe.Pointer(pa))}, H: []uintptr{uintptr(unsafe.Pointer(px)), uintptr(unsafe.Pointer(py))},
		Width: m, Batch: n}
	callbench.Alternate(b, 400, s.Synchronize, callbench.Side{Name: "c", Run: c1.Loop},
		callbench.Loop("raw", func() error {
			return cublasraw.Sgemm(hr, NoTrans, NoTrans, m, n, k, alpha, pa, m, px, k, beta, py, m)
		}),
		callbench.Loop("in", func() error { return gemm(ch, hr, sc) }),
		callbench.Loop("take", func() error { return take1(gemm) }),
		callbench.Loop("enqueue", func() error {
			return cuda.Enqueue(s, func(c cudaraw.CUcontext, _ cudaraw.CUstream) error { return gemm(c, hr, sc) }, uses...)
		}),
		callbench.Loop("call", func() error { return call("gemm", s, gemm, uses...) }),
		callbench.Loop("gemm", func() error {
			return Gemm[float32](s, NoTrans, NoTrans, m, n, k, 1, a, m, x, k, 0, y, m)
		}),
		callbench.Loop("take-noop", func() error { return take1(noop) }),
		callbench.Loop("enqueue-noop", func() error {
			return cuda.Enqueue(s, func(cudaraw.CUcontext, cudaraw.CUstream) error { return nil }, uses...)
		}),
		callbench.Loop("call-noop", func() error { return call("gemm", s, noop, uses...) }),
	)
}

// gemmSetup skips without a GPU or cuBLAS, and returns a stream of device 0's
// primary context with zeroed float32 buffers of the given lengths, closed when b
// ends (BenchmarkCallPath, BenchmarkGemmSmall).
func gemmSetup(b *testing.B, lens ...int) (*cuda.Stream, []*cuda.DeviceBuffer) {
	cudatest.Require(b)
	cudatest.RequireLibrary(b, cublasraw.Library())
	ctx, err := cuda.Device(0).Context()
	require.NoError(b, err)
	s, err := ctx.NewStream()
	require.NoError(b, err)
	b.Cleanup(func() { s.Close() })
	bufs := make([]*cuda.DeviceBuffer, len(lens))
	for i, n := range lens {
		bufs[i], err = cuda.AllocFor[float32](s, n)
		require.NoError(b, err)
		b.Cleanup(func() { bufs[i].Close() })
		require.NoError(b, bufs[i].Memset32Async(s, 0))
	}
	require.NoError(b, s.Synchronize())
	return s, bufs
}
