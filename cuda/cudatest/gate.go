package cudatest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"
	"unsafe"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/dl"
)

// RequireEnv is the environment variable that turns Require's skips into
// failures: set GOCUDA_GPU_TESTS=require on the GPU machine so that a broken
// driver or a missing library fails the run instead of skipping it.
const RequireEnv = "GOCUDA_GPU_TESTS"

// GPU is the device and context that [Require] made current.
type GPU struct {
	Device  cudaraw.CUdevice
	Context cudaraw.CUcontext // the device's primary context, current on the test's thread
}

// Need is what a test needs beyond a driver with a device.
type Need int

// Kernels marks a test that checks what kernels compute (or how long they take): it
// needs a GPU, and skips on the fake driver, which records
// launches but runs no kernel.
const Kernels Need = 1

// Require returns device 0 with its primary context retained and made
// current on the calling goroutine's OS thread, which it locks until the end
// of the test (the CUDA driver keeps the current context per thread). The
// context is released and the thread unlocked in t.Cleanup, after every
// cleanup that the test registers later (cleanups run last in, first out).
//
// Where the driver library cannot be loaded, cuInit fails or there is no
// device, Require skips the test with a message saying so; with
// GOCUDA_GPU_TESTS=require in the environment it fails the test instead. On
// the fake driver (CI) it skips the tests that need Kernels.
func Require(t testing.TB, needs ...Need) *GPU {
	t.Helper()
	for _, n := range needs {
		if n == Kernels && FakeLoaded() {
			t.Skip("runs kernels: needs a GPU (the fake driver records launches, runs no kernel); GPU tests run on the GPU machine")
		}
	}
	skip := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv(RequireEnv) == "require" {
			t.Fatalf("%s (%s=require)", msg, RequireEnv)
		}
		t.Skip(msg)
	}
	if err := cudaraw.Init(0); err != nil {
		switch {
		case errors.Is(err, dl.ErrLibraryNotFound):
			skip("no CUDA driver: %v; GPU tests run on the GPU machine", err)
		case errors.Is(err, cudaraw.ErrNoDevice):
			skip("no CUDA device: %v; GPU tests run on the GPU machine", err)
		default:
			skip("no CUDA driver: cuInit failed: %v; GPU tests run on the GPU machine", err)
		}
	}
	var n int32
	if err := cudaraw.DeviceGetCount(&n); err != nil {
		skip("no CUDA device: cuDeviceGetCount: %v; GPU tests run on the GPU machine", err)
	}
	if n == 0 {
		skip("no CUDA device: cuDeviceGetCount reports 0 devices; GPU tests run on the GPU machine")
	}

	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)

	g := &GPU{}
	if err := cudaraw.DeviceGet(&g.Device, 0); err != nil {
		t.Fatalf("cuDeviceGet(0): %v", err)
	}
	if err := cudaraw.DevicePrimaryCtxRetain(&g.Context, g.Device); err != nil {
		t.Fatalf("cuDevicePrimaryCtxRetain: %v", err)
	}
	t.Cleanup(func() {
		if err := cudaraw.DevicePrimaryCtxRelease(g.Device); err != nil {
			t.Errorf("cuDevicePrimaryCtxRelease: %v", err)
		}
	})
	if err := cudaraw.CtxSetCurrent(g.Context); err != nil {
		t.Fatalf("cuCtxSetCurrent: %v", err)
	}
	return g
}

// Sync waits for all work in the current context (cuCtxSynchronize).
func (g *GPU) Sync(t testing.TB) {
	t.Helper()
	if err := cudaraw.CtxSynchronize(); err != nil {
		t.Fatalf("cuCtxSynchronize: %v", err)
	}
}

// DevPtr converts a device pointer to the typed pointer that the library
// functions take for device data, such as *float32. The result points into
// device memory: it must never be dereferenced on the host. It is the
// vet-clean form of (*T)(unsafe.Pointer(uintptr(p))).
func DevPtr[T any](p cudaraw.CUdeviceptr) *T {
	return *(**T)(unsafe.Pointer(&p))
}

// DevUnsafe converts a device pointer to the unsafe.Pointer that the
// functions taking untyped device data (void *) expect.
func DevUnsafe(p cudaraw.CUdeviceptr) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&p))
}

// Alloc allocates n elements of T in device memory with cuMemAlloc and frees
// it with cuMemFree in t.Cleanup.
func Alloc[T any](t testing.TB, g *GPU, n int) cudaraw.CUdeviceptr {
	t.Helper()
	var zero T
	bytes := uint64(n) * uint64(unsafe.Sizeof(zero))
	if bytes == 0 {
		bytes = 1
	}
	var d cudaraw.CUdeviceptr
	if err := cudaraw.MemAlloc(&d, bytes); err != nil {
		t.Fatalf("cuMemAlloc(%d bytes): %v", bytes, err)
	}
	t.Cleanup(func() {
		// Cleanups run on the test's goroutine, still locked to its thread;
		// setting the context again keeps Free correct if that ever changes.
		if err := cudaraw.CtxSetCurrent(g.Context); err != nil {
			t.Errorf("cuCtxSetCurrent: %v", err)
		}
		if err := cudaraw.MemFree(d); err != nil {
			t.Errorf("cuMemFree: %v", err)
		}
	})
	return d
}

// Upload copies host to d with cuMemcpyHtoD. d must hold len(host) elements.
func Upload[T any](t testing.TB, d cudaraw.CUdeviceptr, host []T) {
	t.Helper()
	if len(host) == 0 {
		return
	}
	bytes := uint64(len(host)) * uint64(unsafe.Sizeof(host[0]))
	if err := cudaraw.MemcpyHtoD(d, unsafe.Pointer(&host[0]), bytes); err != nil {
		t.Fatalf("cuMemcpyHtoD(%d bytes): %v", bytes, err)
	}
}

// Download copies len(host) elements from d into host with cuMemcpyDtoH,
// which waits for earlier work on the legacy default stream.
func Download[T any](t testing.TB, host []T, d cudaraw.CUdeviceptr) {
	t.Helper()
	if len(host) == 0 {
		return
	}
	bytes := uint64(len(host)) * uint64(unsafe.Sizeof(host[0]))
	if err := cudaraw.MemcpyDtoH(unsafe.Pointer(&host[0]), d, bytes); err != nil {
		t.Fatalf("cuMemcpyDtoH(%d bytes): %v", bytes, err)
	}
}

// ToDevice allocates device memory for host (freed in t.Cleanup) and copies
// host into it.
func ToDevice[T any](t testing.TB, g *GPU, host []T) cudaraw.CUdeviceptr {
	t.Helper()
	d := Alloc[T](t, g, len(host))
	Upload(t, d, host)
	return d
}

// FromDevice returns n elements of T copied from d.
func FromDevice[T any](t testing.TB, d cudaraw.CUdeviceptr, n int) []T {
	t.Helper()
	host := make([]T, n)
	Download(t, host, d)
	return host
}

// Float32sToDevice and Float32sFromDevice are [ToDevice] and [FromDevice]
// for the common float32 case.
func Float32sToDevice(t testing.TB, g *GPU, host []float32) cudaraw.CUdeviceptr {
	t.Helper()
	return ToDevice(t, g, host)
}

// Float32sFromDevice returns n float32 values copied from d.
func Float32sFromDevice(t testing.TB, d cudaraw.CUdeviceptr, n int) []float32 {
	t.Helper()
	return FromDevice[float32](t, d, n)
}

// Rand returns a deterministic random source for test data.
func Rand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
}

// RandFloat32s returns n values uniform in [-1, 1).
func RandFloat32s(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = 2*r.Float32() - 1
	}
	return s
}

// RequireLibrary skips the test when lib cannot be opened (with
// GOCUDA_GPU_TESTS=require it fails instead) and logs the loaded file's path.
func RequireLibrary(t testing.TB, lib *dl.Library) {
	t.Helper()
	p, err := lib.Path()
	if err != nil {
		msg := fmt.Sprintf("no %s library: %v; GPU tests run on the GPU machine", lib.Name(), err)
		if os.Getenv(RequireEnv) == "require" {
			t.Fatalf("%s (%s=require)", msg, RequireEnv)
		}
		t.Skip(msg)
	}
	t.Logf("%s loaded from %s", lib.Name(), p)
}

// Stream is Require for tests of the idiomatic layers: it returns device 0's primary
// context (cuda.Device(0).Context) and a new stream of it, closed when the test
// ends.
func Stream(t testing.TB, needs ...Need) (*cuda.Context, *cuda.Stream) {
	t.Helper()
	Require(t, needs...)
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		t.Fatalf("primary context: %v", err)
	}
	s, err := ctx.NewStream()
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return ctx, s
}

// DeviceBytes returns the bytes of the cuda package's live device buffers in device
// 0's primary context (cuda.MemoryStatus): library tests check with it that their
// scratch memory comes from the package's pool.
func DeviceBytes(t testing.TB) int64 {
	t.Helper()
	st, err := cuda.MemoryStatus()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range st.Contexts {
		if c.Primary && c.Device == 0 {
			return c.Kinds[cuda.KindDevice].Bytes
		}
	}
	return 0
}

// RunParallel runs body from b.RunParallel's goroutines, each with a stream of its
// own lent by ctx's pool (returned when the goroutine ends); an error of body, or of
// acquiring the stream, fails b.
func RunParallel(b *testing.B, ctx *cuda.Context, body func(s *cuda.Stream, pb *testing.PB) error) {
	b.RunParallel(func(pb *testing.PB) {
		s, err := ctx.AcquireStream(context.Background())
		if err != nil {
			b.Error(err)
			return
		}
		defer s.Close()
		if err := body(s, pb); err != nil {
			b.Error(err)
		}
	})
}
