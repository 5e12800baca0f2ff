// Package callbench times C calls from C, so benchmarks can put the cost of a call
// through gocuda's bindings beside the same call made from C in one run.
package callbench

/*
#include <stdint.h>

#include "clock.h"

// loop_ptr calls int fn(void*) n times with the same argument.
static int64_t loop_ptr(uintptr_t fn, void *arg, int64_t n) {
	int (*f)(void*) = (int (*)(void*))fn;
	int64_t t0 = callbench_now_ns();
	for (int64_t i = 0; i < n; i++) {
		if (f(arg) != 0) return -1;
	}
	return callbench_now_ns() - t0;
}

// loop_attr calls int fn(int*, int, int) n times (cuDeviceGetAttribute's shape).
static int64_t loop_attr(uintptr_t fn, int attr, int dev, int64_t n) {
	int (*f)(int*, int, int) = (int (*)(int*, int, int))fn;
	int v;
	int64_t t0 = callbench_now_ns();
	for (int64_t i = 0; i < n; i++) {
		if (f(&v, attr, dev) != 0) return -1;
	}
	return callbench_now_ns() - t0;
}

static void noop(void) {}

// loop_clock reads CLOCK_MONOTONIC n times and returns the time it took.
static int64_t loop_clock(int64_t n) {
	int64_t t0 = callbench_now_ns();
	for (int64_t i = 0; i < n; i++) (void)callbench_now_ns();
	return callbench_now_ns() - t0;
}
*/
import "C"

import (
	"errors"
	"time"
	"unsafe"
)

var errCall = errors.New("callbench: the C call returned an error")

// Noop makes one cgo call into an empty C function: the cost of crossing into C
// and back, which every binding call pays.
func Noop() { C.noop() }

// LoopClock reads the monotonic clock n times from C and returns the mean time per
// read (a machine whose clock source is not read in user space pays a system call).
func LoopClock(n int) time.Duration {
	return time.Duration(int64(C.loop_clock(C.int64_t(n))) / int64(max(n, 1)))
}

// LoopPtr calls the C function fn(arg) (returning int, 0 on success) n times from C
// and returns the mean time per call.
func LoopPtr(fn uintptr, arg unsafe.Pointer, n int) (time.Duration, error) {
	d := C.loop_ptr(C.uintptr_t(fn), arg, C.int64_t(n))
	if d < 0 {
		return 0, errCall
	}
	return time.Duration(int64(d) / int64(n)), nil
}

// LoopAttr calls fn(&v, attr, dev) n times from C and returns the mean time per call.
func LoopAttr(fn uintptr, attr, dev int32, n int) (time.Duration, error) {
	d := C.loop_attr(C.uintptr_t(fn), C.int(attr), C.int(dev), C.int64_t(n))
	if d < 0 {
		return 0, errCall
	}
	return time.Duration(int64(d) / int64(n)), nil
}
