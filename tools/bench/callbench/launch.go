package callbench

/*
#include <stddef.h>
#include <stdint.h>

#include "clock.h"

// loop_graph_launch calls cuGraphLaunch (fn) n times as a C program does.
static int64_t loop_graph_launch(uintptr_t fn, uintptr_t exec, uintptr_t stream, int64_t n) {
	int64_t t0 = callbench_now_ns();
	for (int64_t i = 0; i < n; i++)
		if (((int (*)(uintptr_t, uintptr_t))fn)(exec, stream) != 0) return -1;
	return callbench_now_ns() - t0;
}

// loop_graph_launch_in_context is loop_graph_launch with, before each launch, the
// check that gocuda's in-context calls make (see loop_launch_in_context).
static int64_t loop_graph_launch_in_context(uintptr_t fn, uintptr_t get, uintptr_t set, uintptr_t ctx,
		uintptr_t exec, uintptr_t stream, int64_t n) {
	int64_t t0 = callbench_now_ns();
	for (int64_t i = 0; i < n; i++) {
		uintptr_t cur = 0;
		if (((int (*)(uintptr_t*))get)(&cur) != 0) return -1;
		if (cur != ctx && ((int (*)(uintptr_t))set)(ctx) != 0) return -1;
		if (((int (*)(uintptr_t, uintptr_t))fn)(exec, stream) != 0) return -1;
	}
	return callbench_now_ns() - t0;
}

// loop_graph_launch_touching is loop_graph_launch writing, after each launch, one
// byte in each of lines cache lines of buf, stride bytes apart: what the CPU does
// between two launches, as much memory as a binding's bookkeeping touches, without
// its instructions.
static int64_t loop_graph_launch_touching(uintptr_t fn, uintptr_t exec, uintptr_t stream,
		volatile uint8_t* buf, int64_t lines, int64_t stride, int64_t n) {
	int64_t t0 = callbench_now_ns();
	for (int64_t i = 0; i < n; i++) {
		if (((int (*)(uintptr_t, uintptr_t))fn)(exec, stream) != 0) return -1;
		for (int64_t l = 0; l < lines; l++) buf[l * stride]++;
	}
	return callbench_now_ns() - t0;
}

// kernel_params points params[i] at offsets[i] in buf and returns cuLaunchKernel's
// kernelParams: params, or NULL for a kernel without parameters (or more than 64).
static void** kernel_params(void** params, void* buf, const uintptr_t* offsets, int nparams) {
	if (nparams == 0 || nparams > 64) return NULL;
	for (int i = 0; i < nparams; i++) params[i] = (char*)buf + offsets[i];
	return params;
}

typedef int (*launch_fn)(uintptr_t, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
	unsigned, uintptr_t, void**, void**);

// loop_launch calls cuLaunchKernel (fn) n times as a C program does: kernel f on
// stream, grid and block 1×1×1, no shared memory, kernelParams pointing into buf at
// offsets (NULL when nparams is 0).
static int64_t loop_launch(uintptr_t fn, uintptr_t f, uintptr_t stream, void* buf,
		const uintptr_t* offsets, int nparams, int64_t n) {
	void* params[64];
	void** kp = kernel_params(params, buf, offsets, nparams);
	if (nparams > 64) return -1;
	launch_fn launch = (launch_fn)fn;
	int64_t t0 = callbench_now_ns();
	for (int64_t i = 0; i < n; i++) {
		if (launch(f, 1, 1, 1, 1, 1, 1, 0, stream, kp, NULL) != 0) return -1;
	}
	return callbench_now_ns() - t0;
}

// loop_launch_in_context is loop_launch with, before each launch, the check that
// gocuda's in-context calls make: cuCtxGetCurrent (get), and cuCtxSetCurrent (set)
// when ctx is not current.
static int64_t loop_launch_in_context(uintptr_t fn, uintptr_t get, uintptr_t set, uintptr_t ctx,
		uintptr_t f, uintptr_t stream, void* buf, const uintptr_t* offsets, int nparams, int64_t n) {
	void* params[64];
	void** kp = kernel_params(params, buf, offsets, nparams);
	if (nparams > 64) return -1;
	launch_fn launch = (launch_fn)fn;
	int64_t t0 = callbench_now_ns();
	for (int64_t i = 0; i < n; i++) {
		uintptr_t cur = 0;
		if (((int (*)(uintptr_t*))get)(&cur) != 0) return -1;
		if (cur != ctx && ((int (*)(uintptr_t))set)(ctx) != 0) return -1;
		if (launch(f, 1, 1, 1, 1, 1, 1, 0, stream, kp, NULL) != 0) return -1;
	}
	return callbench_now_ns() - t0;
}

typedef int (*record_fn)(uintptr_t, uintptr_t);
typedef int (*wait_fn)(uintptr_t, uintptr_t, unsigned);

// loop_handoff hands a buffer between two streams n times as a C program does: each
// iteration records ev on the stream of the previous iteration, makes the other
// stream wait for it and launches f there (grid 1, block threads), starting with s1
// waiting for s2.
static int64_t loop_handoff(uintptr_t record, uintptr_t wait, uintptr_t fn, uintptr_t ev, uintptr_t s1,
		uintptr_t s2, uintptr_t f, unsigned threads, void* buf, const uintptr_t* offsets, int nparams, int64_t n) {
	void* params[64];
	void** kp = kernel_params(params, buf, offsets, nparams);
	if (nparams > 64) return -1;
	launch_fn launch = (launch_fn)fn;
	int64_t t0 = callbench_now_ns();
	for (int64_t i = 0; i < n; i++) {
		uintptr_t prev = (i & 1) ? s1 : s2, next = (i & 1) ? s2 : s1;
		if (((record_fn)record)(ev, prev) != 0) return -1;
		if (((wait_fn)wait)(next, ev, 0) != 0) return -1;
		if (launch(f, 1, 1, 1, threads, 1, 1, 0, next, kp, NULL) != 0) return -1;
	}
	return callbench_now_ns() - t0;
}
*/
import "C"

import (
	"errors"
	"time"
	"unsafe"
)

// LoopGraphLaunch calls cuGraphLaunch (fn, its address) n times from C with exec and
// stream, and returns the total time. The context must be current on the calling thread.
func LoopGraphLaunch(fn, exec, stream uintptr, n int) (time.Duration, error) {
	d := C.loop_graph_launch(C.uintptr_t(fn), C.uintptr_t(exec), C.uintptr_t(stream), C.int64_t(n))
	if d < 0 {
		return 0, errCall
	}
	return time.Duration(d), nil
}

// LoopGraphLaunchTouching is LoopGraphLaunch writing, after each launch, one byte
// in each of lines cache lines stride bytes apart in buf (at least
// (lines-1)*stride+1 bytes): it shows how much the launch slows when the CPU
// touches that much other memory between launches.
func LoopGraphLaunchTouching(fn, exec, stream uintptr, buf []byte, lines, stride, n int) (time.Duration, error) {
	if lines < 0 || stride < 1 || (lines > 0 && (lines-1)*stride >= len(buf)) {
		return 0, errors.New("callbench: LoopGraphLaunchTouching: buf too small for lines*stride")
	}
	var p *C.uint8_t
	if len(buf) > 0 {
		p = (*C.uint8_t)(unsafe.Pointer(&buf[0]))
	}
	d := C.loop_graph_launch_touching(C.uintptr_t(fn), C.uintptr_t(exec), C.uintptr_t(stream), p,
		C.int64_t(lines), C.int64_t(stride), C.int64_t(n))
	if d < 0 {
		return 0, errCall
	}
	return time.Duration(d), nil
}

// LoopGraphLaunchInContext is LoopGraphLaunch with, before each launch, the check
// that gocuda's in-context calls make: cuCtxGetCurrent (get), and cuCtxSetCurrent
// (set) when ctx is not current.
func LoopGraphLaunchInContext(fn, get, set, ctx, exec, stream uintptr, n int) (time.Duration, error) {
	d := C.loop_graph_launch_in_context(C.uintptr_t(fn), C.uintptr_t(get), C.uintptr_t(set), C.uintptr_t(ctx),
		C.uintptr_t(exec), C.uintptr_t(stream), C.int64_t(n))
	if d < 0 {
		return 0, errCall
	}
	return time.Duration(d), nil
}

// LoopLaunch calls cuLaunchKernel (fn, its address) n times from C, the way a C
// program launches: kernel f on stream, grid and block 1×1×1, with kernelParams
// pointing at offsets[i] in params (nil for a kernel without parameters). It returns
// the total time. The kernel's context must be current on the calling thread.
func LoopLaunch(fn, f, stream uintptr, params []byte, offsets []uintptr, n int) (time.Duration, error) {
	buf, offs := cParams(params, offsets)
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
	buf, offs := cParams(params, offsets)
	d := C.loop_launch_in_context(C.uintptr_t(fn), C.uintptr_t(get), C.uintptr_t(set), C.uintptr_t(ctx),
		C.uintptr_t(f), C.uintptr_t(stream), buf, offs, C.int(len(offsets)), C.int64_t(n))
	if d < 0 {
		return 0, errCall
	}
	return time.Duration(d), nil
}

// LoopHandoff hands work between streams s1 and s2 n times from C: each iteration
// records ev (cuEventRecord, record) on the stream of the previous iteration, makes
// the other wait for it (cuStreamWaitEvent, wait) and launches kernel f there
// (cuLaunchKernel, fn) with one block of threads and kernelParams at offsets in
// params. Iteration 0 launches on s1. The streams' context must be current.
func LoopHandoff(record, wait, fn, ev, s1, s2, f uintptr, threads int, params []byte, offsets []uintptr, n int) (time.Duration, error) {
	buf, offs := cParams(params, offsets)
	d := C.loop_handoff(C.uintptr_t(record), C.uintptr_t(wait), C.uintptr_t(fn), C.uintptr_t(ev), C.uintptr_t(s1),
		C.uintptr_t(s2), C.uintptr_t(f), C.unsigned(threads), buf, offs, C.int(len(offsets)), C.int64_t(n))
	if d < 0 {
		return 0, errCall
	}
	return time.Duration(d), nil
}

// cParams returns params and offsets as the C loops take them.
func cParams(params []byte, offsets []uintptr) (unsafe.Pointer, *C.uintptr_t) {
	var buf unsafe.Pointer
	if len(params) > 0 {
		buf = unsafe.Pointer(&params[0])
	}
	var offs *C.uintptr_t
	if len(offsets) > 0 {
		offs = (*C.uintptr_t)(unsafe.Pointer(&offsets[0]))
	}
	return buf, offs
}
