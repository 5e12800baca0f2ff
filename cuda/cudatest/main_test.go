package cudatest_test

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
)

func TestMain(m *testing.M) { os.Exit(cudatest.Main(m)) }

// testPTX declares kernels with the parameter layouts the tests check, and globals.
const testPTX = `.version 8.0
.target sm_90
.address_size 64

.global .align 4 .b8 table[40];
.const .align 4 .f32 scale;
.visible .global .u64 counter;
.global .align 4 .u32 magic = 12648430;
.const .align 4 .f32 coef[3] = {1.5, 0f40000000, -2};
.global .align 1 .b8 bytes[6] = {1, 2, 0x10, 255};

.visible .entry empty()
{
	ret;
}

.visible .entry axpy(
	.param .u64 .ptr .global .align 4 axpy_param_0,
	.param .f32 axpy_param_1,
	.param .u64 axpy_param_2,
	.param .u32 axpy_param_3
)
{
	ld.global.u32 %r1, [%rd1];
	ret;
}

.visible .entry mixed (
	.param .u8 mixed_param_0,
	.param .align 8 .b8 mixed_param_1[24],
	.param .u16 mixed_param_2
)
{
	ret;
}
`

// env is a test's own context on device 0, current on its locked OS thread. The
// raw layer runs in the thread's current context.
type env struct {
	t       *testing.T
	dev     cudaraw.CUdevice
	ctx     cudaraw.CUcontext
	scratch unsafe.Pointer // 64 KiB of pinned host memory for C-side arrays
	dead    bool           // the test destroyed ctx itself
}

// setup skips the test unless the strict fake is active, and fails it if it makes a
// violation it does not reset.
func setup(t *testing.T) *env {
	t.Helper()
	if !cudatest.Active() {
		t.Skip("needs the strict fake driver (cudatest.Main installs it where there is no GPU)")
	}
	return newEnv(t)
}

func newEnv(t *testing.T) *env {
	t.Helper()
	cudatest.Check(t)
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	require.NoError(t, cudaraw.Init(0))
	clearStack()
	e := &env{t: t}
	require.NoError(t, cudaraw.DeviceGet(&e.dev, 0))
	require.NoError(t, cudaraw.CtxCreate(&e.ctx, nil, 0, e.dev))
	t.Cleanup(func() {
		_ = cudatest.ResetInjections()
		if !e.dead {
			require.NoError(t, cudaraw.CtxSetCurrent(e.ctx))
			require.NoError(t, cudaraw.CtxDestroy(e.ctx))
		}
	})
	var scratch unsafe.Pointer // not &e.scratch: e holds Go pointers, which cgo refuses
	require.NoError(t, cudaraw.MemAllocHost(&scratch, 64<<10))
	e.scratch = scratch
	return e
}

// clearStack empties the calling thread's context stack: a thread the Go runtime
// reuses keeps what earlier tests (or the cuda package) left current on it.
func clearStack() {
	var c cudaraw.CUcontext
	for cudaraw.CtxPopCurrent(&c) == nil {
	}
}

// run runs a subtest, which the testing package runs on another goroutine: it locks
// that goroutine's thread and makes e's context current there.
func (e *env) run(name string, f func(t *testing.T)) {
	e.t.Run(name, func(t *testing.T) {
		cudatest.Check(t)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		clearStack()
		require.NoError(t, cudaraw.CtxSetCurrent(e.ctx))
		defer clearStack()
		// e's helpers report to the subtest meanwhile (subtests run one at a time).
		parent := e.t
		e.t = t
		defer func() { e.t = parent }()
		f(t)
	})
}

func (e *env) stream(nonBlocking bool) cudaraw.CUstream {
	var flags uint32
	if nonBlocking {
		flags = uint32(cudaraw.CU_STREAM_NON_BLOCKING)
	}
	var s cudaraw.CUstream
	require.NoError(e.t, cudaraw.StreamCreate(&s, flags))
	return s
}

func (e *env) event(timing bool) cudaraw.CUevent {
	var flags uint32
	if !timing {
		flags = uint32(cudaraw.CU_EVENT_DISABLE_TIMING)
	}
	var ev cudaraw.CUevent
	require.NoError(e.t, cudaraw.EventCreate(&ev, flags))
	return ev
}

func (e *env) alloc(n int) cudaraw.CUdeviceptr {
	var d cudaraw.CUdeviceptr
	require.NoError(e.t, cudaraw.MemAlloc(&d, uint64(n)))
	return d
}

// host returns n bytes of pinned host memory.
func (e *env) host(n int) []byte {
	var p unsafe.Pointer
	require.NoError(e.t, cudaraw.MemAllocHost(&p, uint64(n)))
	return unsafe.Slice((*byte)(p), n)
}

func (e *env) module(ptx string) cudaraw.CUmodule {
	img := append([]byte(ptx), 0)
	var m cudaraw.CUmodule
	require.NoError(e.t, cudaraw.ModuleLoadData(&m, unsafe.Pointer(&img[0])))
	return m
}

func (e *env) function(m cudaraw.CUmodule, name string) cudaraw.CUfunction {
	var f cudaraw.CUfunction
	require.NoError(e.t, cudaraw.ModuleGetFunction(&f, m, cstr(name)))
	return f
}

// download copies n bytes of device memory to the host, after the context's work.
func (e *env) download(d cudaraw.CUdeviceptr, n int) []byte {
	require.NoError(e.t, cudaraw.CtxSynchronize())
	out := make([]byte, n)
	require.NoError(e.t, cudaraw.MemcpyDtoH(unsafe.Pointer(&out[0]), d, uint64(n)))
	return out
}

// launch launches f with params through cuLaunchKernel's extra array, as the cuda
// package passes them.
func (e *env) launch(f cudaraw.CUfunction, grid, block [3]uint32, shm uint32, s cudaraw.CUstream, params []byte) error {
	return launchWith(e.scratch, f, grid, block, shm, s, params)
}

// launchWith builds the extra array and the parameter buffer in scratch, C memory
// (an array of pointers into Go memory may not be passed to C).
func launchWith(scratch unsafe.Pointer, f cudaraw.CUfunction, grid, block [3]uint32, shm uint32, s cudaraw.CUstream, params []byte) error {
	extra := unsafe.Slice((*uintptr)(scratch), 6)
	size := (*uint64)(unsafe.Add(scratch, 48))
	buf := unsafe.Slice((*byte)(unsafe.Add(scratch, 64)), len(params))
	copy(buf, params)
	*size = uint64(len(params))
	var ex *unsafe.Pointer
	if len(params) > 0 {
		extra[0], extra[1], extra[2], extra[3], extra[4] = 1, uintptr(unsafe.Pointer(&buf[0])), 2, uintptr(unsafe.Pointer(size)), 0
		ex = (*unsafe.Pointer)(scratch)
	}
	return cudaraw.LaunchKernel(f, grid[0], grid[1], grid[2], block[0], block[1], block[2], shm, s, nil, ex)
}

func cstr(s string) *byte { return &append([]byte(s), 0)[0] }

// gostr reads a C string.
func gostr(p *byte) string {
	if p == nil {
		return ""
	}
	var b []byte
	for q := unsafe.Pointer(p); *(*byte)(q) != 0; q = unsafe.Add(q, 1) {
		b = append(b, *(*byte)(q))
	}
	return string(b)
}

// ptr converts device (or managed, or pinned) memory to a pointer: the fake's
// memory is host memory.
func ptr(d cudaraw.CUdeviceptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&d)) }

func u64(vs ...uint64) []byte {
	b := make([]byte, 8*len(vs))
	for i, v := range vs {
		*(*uint64)(unsafe.Pointer(&b[8*i])) = v
	}
	return b
}

func fill(n int, v byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = v
	}
	return b
}

// violation runs f, which must fail with code (or succeed, for code 0) and make
// exactly one violation whose message contains want; then it resets the violations.
func violation(t *testing.T, want string, code cudaraw.Result, f func() error) {
	t.Helper()
	before, _ := cudatest.Violations()
	err := f()
	if code == 0 {
		require.NoError(t, err)
	} else {
		require.ErrorIs(t, err, code)
	}
	n, text := cudatest.Violations()
	require.Equal(t, before+1, n, "violations:\n%s", text)
	lines := strings.Split(strings.TrimSpace(text), "\n")
	require.Contains(t, lines[len(lines)-1], want)
	cudatest.ResetViolations()
}

// child runs the test in a subprocess with env when called in the parent (and
// reports false: the caller returns); in the child it reports true.
func child(t *testing.T, env map[string]string) bool {
	t.Helper()
	if os.Getenv(cudatest.EnvChild) != "" {
		return true
	}
	if !cudatest.Active() {
		t.Skip("needs the strict fake driver")
	}
	cudatest.Subprocess(t, env)
	return false
}

func lockThread(t testing.TB) {
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
}
