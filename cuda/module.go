package cuda

/*
#include <stdint.h>
#include <stdlib.h>

// gocuda_jit holds the option arrays of cuModuleLoadDataEx and the JIT error log. It
// lives in C memory: optionValues holds a pointer to the log, and an array of
// pointers into Go memory may not be passed to C.
enum { gocuda_jit_log_size = 16384 };
typedef struct {
	int32_t opts[2];
	void* vals[2];
	char log[gocuda_jit_log_size];
} gocuda_jit;

static gocuda_jit* gocuda_jit_new(int32_t optLog, int32_t optLogSize) {
	gocuda_jit* j = (gocuda_jit*)calloc(1, sizeof(gocuda_jit));
	if (j == NULL) return NULL;
	j->opts[0] = optLog;
	j->vals[0] = j->log;
	j->opts[1] = optLogSize;
	j->vals[1] = (void*)(uintptr_t)gocuda_jit_log_size;
	return j;
}

// gocuda_jit_log returns the log, NUL-terminated within its buffer.
static const char* gocuda_jit_log(gocuda_jit* j) {
	j->log[gocuda_jit_log_size - 1] = 0;
	return j->log;
}
*/
import "C"

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/internal/errs"
	"github.com/gocuda/gocuda/resource"
)

// Module is code loaded into a context: PTX (compiled for the device by the driver's
// JIT when loaded), a cubin or a fatbin. Get its kernels with Function and launch them
// with Function.Launch. A Module is safe for concurrent use.
//
// Close unloads it. cuModuleUnload waits for the GPU (measured: it blocks the caller
// for as long as unrelated work runs, ~500 ms behind a 500 ms kernel), so a Module
// dropped without Close is unloaded only by resource.Reclaim, never on the finalizer
// path. Functions keep their Module loaded while they are reachable.
//
// A Module is safe for concurrent use. Calls hold it while they pass it (or its
// functions) to the driver: Close waits for them, and calls after Close fail with
// ErrClosed. The Module keeps its Context alive.
type Module struct {
	ctx *Context
	h   cudaraw.CUmodule

	// mu guards h against Close while kernels of the module are being queued:
	// launches take the read lock, Close the write lock.
	mu     sync.RWMutex
	closed bool
	// funcs caches the module's Functions weakly: a Function points to its
	// Module, and a Module reachable from itself would never be unloaded.
	funcs map[string]weak.Pointer[Function]

	reg *resource.Registration
	// lease counts the graphs whose kernels are the module's (graph_lease.go):
	// the unload waits for the last.
	lease leaseState
}

// LoadModule loads a module image into the context: PTX text, a cubin (ELF) or a
// fatbin, for example from a //go:embed variable. PTX need not end in a NUL byte
// (LoadModule copies it and appends one when it does not). A PTX image that fails to
// compile returns an error that includes the JIT compiler's log.
func (c *Context) LoadModule(image []byte) (*Module, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if len(image) == 0 {
		return nil, fmt.Errorf("%w: empty module image", ErrInvalidArgument)
	}
	resource.Drain()
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.exit()
	img := moduleImage(image)
	jit := C.gocuda_jit_new(C.int32_t(cudaraw.CU_JIT_ERROR_LOG_BUFFER), C.int32_t(cudaraw.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES))
	if jit == nil {
		return nil, fmt.Errorf("cuda: loading a module: %w", cudaraw.ErrOutOfMemory)
	}
	defer C.free(unsafe.Pointer(jit))
	var h cudaraw.CUmodule
	err := cudaraw.ModuleLoadDataExIn(c.h, &h, unsafe.Pointer(&img[0]), 2,
		(*cudaraw.CUjit_option)(unsafe.Pointer(&jit.opts[0])), (*unsafe.Pointer)(unsafe.Pointer(&jit.vals[0])))
	runtime.KeepAlive(img)
	if err = c.faulted(err, "LoadModule", nil); err != nil {
		if f := c.faultErr(); f != nil {
			return nil, f
		}
		if log := strings.TrimSpace(C.GoString(C.gocuda_jit_log(jit))); log != "" {
			return nil, fmt.Errorf("cuda: loading a module: %w; JIT log:\n%s", err, log)
		}
		return nil, fmt.Errorf("cuda: loading a module: %w", err)
	}
	m := &Module{ctx: c, h: h}
	m.reg = resource.ResourceFinalizer((*Module).unload, m, true,
		resource.Kind("cuModuleUnload"), resource.WithContext(c.ctxState.res()), resource.CallerSkip(1))
	return m, nil
}

// moduleImage returns image as the driver reads it: cubins and fatbins as they are,
// anything else (PTX) NUL-terminated.
func moduleImage(image []byte) []byte {
	switch {
	case bytes.HasPrefix(image, []byte("\x7fELF")): // cubin
		return image
	case bytes.HasPrefix(image, []byte{0x50, 0xed, 0x55, 0xba}): // fatbin, magic 0xBA55ED50
		return image
	case image[len(image)-1] == 0:
		return image
	}
	img := make([]byte, len(image)+1)
	copy(img, image)
	return img
}

// unload is the release function: it runs once, from Close or from Reclaim.
func (m *Module) unload() error {
	lockCounting(&m.mu)
	m.closed = true
	m.mu.Unlock()
	if m.lease.postpone(m.unloadNow, true) {
		return nil // a graph replays the module's kernels: unloaded after it
	}
	return m.unloadNow()
}

// unloadNow unloads the module.
func (m *Module) unloadNow() error {
	c := m.ctx
	if c.enter() != nil {
		return resource.ErrContextDestroyed // unloaded with its context
	}
	defer c.exit()
	return cudaraw.ModuleUnloadIn(c.h, m.h)
}

func checkModule(m *Module) error {
	if m == nil || m.ctx == nil {
		return fmt.Errorf("%w: nil or zero *cuda.Module", ErrInvalidArgument)
	}
	return m.ctx.check()
}

// rlock enters the module's context and takes its read lock, or fails for a closed
// module or context.
func (m *Module) rlock() error {
	if err := m.ctx.enter(); err != nil {
		return err
	}
	m.mu.RLock()
	if m.closed {
		m.runlock()
		return errModuleClosed
	}
	return nil
}

func (m *Module) runlock() {
	m.mu.RUnlock()
	m.ctx.exit()
}

var errModuleClosed = fmt.Errorf("cuda: module: %w", ErrClosed)

// Handle returns the raw module, or 0 for a nil or closed Module (as os.File.Fd, no
// live handle after Close). Keep the Module open while the handle is in use.
func (m *Module) Handle() cudaraw.CUmodule {
	if m == nil {
		return 0
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return 0
	}
	return m.h
}

// Context returns the module's context (nil for a nil Module).
func (m *Module) Context() *Context {
	if m == nil {
		return nil
	}
	return m.ctx
}

// Function returns the module's kernel called name (for CUDA C++ kernels, the mangled
// name unless the kernel is declared extern "C"). Functions are cached: asking for the
// same name again returns the same *Function. A name the module lacks returns an error
// matching ErrNotFound.
func (m *Module) Function(name string) (*Function, error) {
	if err := checkModule(m); err != nil {
		return nil, err
	}
	if strings.IndexByte(name, 0) >= 0 {
		return nil, fmt.Errorf("%w: function name %q contains a NUL byte", ErrInvalidArgument, name)
	}
	if err := m.ctx.enter(); err != nil {
		return nil, err
	}
	defer m.ctx.exit()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, errModuleClosed
	}
	if f := m.funcs[name].Value(); f != nil {
		return f, nil
	}
	cname := append([]byte(name), 0)
	var h cudaraw.CUfunction
	if err := cudaraw.ModuleGetFunctionIn(m.ctx.h, &h, m.h, &cname[0]); err != nil {
		return nil, fmt.Errorf("cuda: module function %q: %w", name, err)
	}
	f := &Function{mod: m, h: h, name: name}
	f.loadParams()
	if m.funcs == nil {
		m.funcs = make(map[string]weak.Pointer[Function])
	}
	m.funcs[name] = weak.Make(f)
	return f, nil
}

// Global returns the address and size in bytes of the module's global variable called
// name (a __device__ or __constant__ variable). A name the module lacks returns an
// error matching ErrNotFound.
func (m *Module) Global(name string) (cudaraw.CUdeviceptr, int, error) {
	if err := checkModule(m); err != nil {
		return 0, 0, err
	}
	if strings.IndexByte(name, 0) >= 0 {
		return 0, 0, fmt.Errorf("%w: global name %q contains a NUL byte", ErrInvalidArgument, name)
	}
	if err := m.rlock(); err != nil {
		return 0, 0, err
	}
	defer m.runlock()
	cname := append([]byte(name), 0)
	var p cudaraw.CUdeviceptr
	var size uint64
	if err := cudaraw.ModuleGetGlobalIn(m.ctx.h, &p, &size, m.h, &cname[0]); err != nil {
		return 0, 0, fmt.Errorf("cuda: module global %q: %w", name, err)
	}
	return p, int(size), nil
}

// Close unloads the module. It waits for the GPU to finish the work queued in the
// context (that is what cuModuleUnload does), so it may block for as long as that
// takes. Closing again, or closing a nil Module, returns an error matching ErrClosed
// and resource.ErrReleased; any later use of the module or its functions returns
// ErrClosed.
func (m *Module) Close() error {
	if m == nil || m.reg == nil {
		return errs.Closed("cuda: module")
	}
	// unload waits for launches in flight, and keeps new ones out, before
	// unloading; the unload itself runs without the lock.
	err := m.reg.Release()
	runtime.KeepAlive(m)
	return closeError("cuda: module", err)
}

// Function is a kernel of a Module. It is safe for concurrent use; its Module stays
// loaded while the Function is reachable.
type Function struct {
	mod  *Module
	h    cudaraw.CUfunction
	name string

	// params is the kernel's parameter layout as the driver reports it
	// (cuFuncGetParamInfo, CUDA 12.4 and later drivers); known is false where the
	// driver does not report it, and launches then lay arguments out by their
	// natural alignment, unchecked.
	params []paramInfo
	known  bool
	// argSize is the size of the parameter buffer: the end of the last parameter.
	argSize uintptr
	// sharedMem is the dynamic shared memory limit raised for launches
	// (raiseSharedMem); 0 until one needs more than 48 KiB.
	sharedMem atomic.Int64
}

// Param is one kernel parameter: its offset in the parameter buffer and its size, in
// bytes.
type Param struct {
	Offset, Size int
}

// loadParams asks the driver for the kernel's parameters, one index at a time until
// it answers CUDA_ERROR_INVALID_VALUE (past the last one). Where it answers anything
// else (a driver before CUDA 12.4 lacks cuFuncGetParamInfo), the layout stays unknown
// and launches are not checked.
func (f *Function) loadParams() {
	var params []paramInfo
	for i := uint64(0); ; i++ {
		var off, size uint64
		err := cudaraw.FuncGetParamInfoIn(f.mod.ctx.h, f.h, i, &off, &size)
		if err == nil {
			params = append(params, paramInfo{offset: uintptr(off), size: uintptr(size)})
			continue
		}
		if !errors.Is(err, cudaraw.ErrInvalidValue) {
			return
		}
		break
	}
	f.params, f.known = params, true
	for _, p := range params {
		f.argSize = max(f.argSize, p.offset+p.size)
	}
}

// Name returns the kernel's name in its module.
func (f *Function) Name() string {
	if f == nil {
		return ""
	}
	return f.name
}

// Handle returns the raw function, or 0 for a nil Function or one whose module is
// closed. Keep the Function reachable and its module open while the handle is in
// use.
func (f *Function) Handle() cudaraw.CUfunction {
	if f == nil || f.mod.Handle() == 0 {
		return 0
	}
	return f.h
}

// Module returns the function's module (nil for a nil Function).
func (f *Function) Module() *Module {
	if f == nil {
		return nil
	}
	return f.mod
}

// Params returns the kernel's parameters as the driver reports them; ok is false
// where the driver does not (before CUDA 12.4), and Launch then cannot check
// arguments against them.
func (f *Function) Params() (params []Param, ok bool) {
	if f == nil || !f.known {
		return nil, false
	}
	params = make([]Param, len(f.params))
	for i, p := range f.params {
		params[i] = Param{Offset: int(p.offset), Size: int(p.size)}
	}
	return params, true
}

// Attribute returns one of the function's attributes, such as
// CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK or CU_FUNC_ATTRIBUTE_NUM_REGS.
func (f *Function) Attribute(a cudaraw.CUfunction_attribute) (int, error) {
	if f == nil {
		return 0, fmt.Errorf("%w: nil *cuda.Function", ErrInvalidArgument)
	}
	m := f.mod
	if err := checkModule(m); err != nil {
		return 0, err
	}
	if err := m.rlock(); err != nil {
		return 0, err
	}
	defer m.runlock()
	var v int32
	if err := cudaraw.FuncGetAttributeIn(m.ctx.h, &v, a, f.h); err != nil {
		return 0, fmt.Errorf("cuda: function %q attribute %v: %w", f.name, a, err)
	}
	return int(v), nil
}
