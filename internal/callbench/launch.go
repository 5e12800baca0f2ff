package callbench

/*
#include <stddef.h>
#include <stdint.h>
#include <time.h>

static int64_t launch_now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

typedef int (*launch_fn)(uintptr_t, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
	unsigned, uintptr_t, void**, void**);

// loop_launch calls cuLaunchKernel (fn) n times as a C program does: kernel f on
// stream, grid and block 1×1×1, no shared memory, kernelParams pointing into buf at
// offsets (NULL when nparams is 0).
static int64_t loop_launch(uintptr_t fn, uintptr_t f, uintptr_t stream, void* buf,
		const uintptr_t* offsets, int nparams, int64_t n) {
	void* params[64];
	if (nparams > 64) return -1;
	for (int i = 0; i < nparams; i++) params[i] = (char*)buf + offsets[i];
	launch_fn launch = (launch_fn)fn;
	void** kp = nparams ? params : NULL;
	int64_t t0 = launch_now_ns();
	for (int64_t i = 0; i < n; i++) {
		if (launch(f, 1, 1, 1, 1, 1, 1, 0, stream, kp, NULL) != 0) return -1;
	}
	return launch_now_ns() - t0;
}

// loop_launch_in_context is loop_launch with, before each launch, the check that
// gocuda's in-context calls make: cuCtxGetCurrent (get), and cuCtxSetCurrent (set)
// when ctx is not current.
static int64_t loop_launch_in_context(uintptr_t fn, uintptr_t get, uintptr_t set, uintptr_t ctx,
		uintptr_t f, uintptr_t stream, void* buf, const uintptr_t* offsets, int nparams, int64_t n) {
	void* params[64];
	if (nparams > 64) return -1;
	for (int i = 0; i < nparams; i++) params[i] = (char*)buf + offsets[i];
	launch_fn launch = (launch_fn)fn;
	void** kp = nparams ? params : NULL;
	int64_t t0 = launch_now_ns();
	for (int64_t i = 0; i < n; i++) {
		uintptr_t cur = 0;
		if (((int (*)(uintptr_t*))get)(&cur) != 0) return -1;
		if (cur != ctx && ((int (*)(uintptr_t))set)(ctx) != 0) return -1;
		if (launch(f, 1, 1, 1, 1, 1, 1, 0, stream, kp, NULL) != 0) return -1;
	}
	return launch_now_ns() - t0;
}
*/
import "C"

import (
	"time"
	"unsafe"
)

// LoopLaunch calls cuLaunchKernel (fn, its address) n times from C, the way a C
// program launches: kernel f on stream, grid and block 1×1×1, with kernelParams
// pointing at offsets[i] in params (nil for a kernel without parameters). It returns
// the total time. The kernel's context must be current on the calling thread.
func LoopLaunch(fn, f, stream uintptr, params []byte, offsets []uintptr, n int) (time.Duration, error) {
	var buf unsafe.Pointer
	if len(params) > 0 {
		buf = unsafe.Pointer(&params[0])
	}
	var offs *C.uintptr_t
	if len(offsets) > 0 {
		offs = (*C.uintptr_t)(unsafe.Pointer(&offsets[0]))
	}
	d := C.loop_launch(C.uintptr_t(fn), C.uintptr_t(f), C.uintptr_t(stream), buf, offs, C.int(len(offsets)), C.int64_t(n))
	if d < 0 {
		return 0, errCall
	}
	return time.Duration(d), nil
}

// LoopLaunchInContext is LoopLaunch with the context check that gocuda's in-context
// calls make before each launch: cuCtxGetCurrent (get), and cuCtxSetCurrent (set) to
// ctx when another context is current.
func LoopLaunchInContext(fn, get, set, ctx, f, stream uintptr, params []byte, offsets []uintptr, n int) (time.Duration, error) {
	var buf unsafe.Pointer
	if len(params) > 0 {
		buf = unsafe.Pointer(&params[0])
	}
	var offs *C.uintptr_t
	if len(offsets) > 0 {
		offs = (*C.uintptr_t)(unsafe.Pointer(&offsets[0]))
	}
	d := C.loop_launch_in_context(C.uintptr_t(fn), C.uintptr_t(get), C.uintptr_t(set), C.uintptr_t(ctx),
		C.uintptr_t(f), C.uintptr_t(stream), buf, offs, C.int(len(offsets)), C.int64_t(n))
	if d < 0 {
		return 0, errCall
	}
	return time.Duration(d), nil
}
