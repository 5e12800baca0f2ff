package callbench

/*
#include <stddef.h>
#include <stdint.h>

#include "clock.h"

typedef int (*probe_launch_fn)(uintptr_t, unsigned, unsigned, unsigned, unsigned, unsigned,
	unsigned, unsigned, uintptr_t, void**, void**);

// spin burns iters iterations of a loop the compiler cannot remove.
static void spin(int64_t iters) {
	for (volatile int64_t j = 0; j < iters; j++) {
	}
}

// spin_ns returns the time n iterations of spin take.
static int64_t spin_ns(int64_t iters) {
	int64_t t0 = callbench_now_ns();
	spin(iters);
	return callbench_now_ns() - t0;
}

// loop_launch_gap is a C launch loop (empty kernel, 1×1×1) that spins iters
// iterations after each launch: the time other code between launches takes.
static int64_t loop_launch_gap(uintptr_t fn, uintptr_t f, uintptr_t stream, int64_t iters, int64_t n) {
	probe_launch_fn launch = (probe_launch_fn)fn;
	int64_t t0 = callbench_now_ns();
	for (int64_t i = 0; i < n; i++) {
		if (launch(f, 1, 1, 1, 1, 1, 1, 0, stream, NULL, NULL) != 0) return -1;
		spin(iters);
	}
	return callbench_now_ns() - t0;
}

// launch_k launches the empty kernel k times: one cgo call for k launches.
static int launch_k(uintptr_t fn, uintptr_t f, uintptr_t stream, int k) {
	probe_launch_fn launch = (probe_launch_fn)fn;
	for (int i = 0; i < k; i++) {
		int s = launch(f, 1, 1, 1, 1, 1, 1, 0, stream, NULL, NULL);
		if (s != 0) return s;
	}
	return 0;
}

typedef int (*alloc_fn)(uint64_t*, size_t, uintptr_t);
typedef int (*memset_fn)(uint64_t, unsigned char, size_t, uintptr_t);
typedef int (*free_fn)(uint64_t, uintptr_t);

// alloc_once is cuMemAllocAsync, cuMemsetD8Async and cuMemFreeAsync of size bytes
// on stream: the device alloc/touch/free loop body in one cgo call.
static int alloc_once(uintptr_t a, uintptr_t m, uintptr_t f, uintptr_t stream, size_t size) {
	uint64_t p = 0;
	int s = ((alloc_fn)a)(&p, size, stream);
	if (s == 0) s = ((memset_fn)m)(p, 1, size, stream);
	if (s == 0) s = ((free_fn)f)(p, stream);
	return s;
}

// loop_alloc runs alloc_once n times from C.
static int64_t loop_alloc(uintptr_t a, uintptr_t m, uintptr_t f, uintptr_t stream, size_t size, int64_t n) {
	int64_t t0 = callbench_now_ns();
	for (int64_t i = 0; i < n; i++) {
		if (alloc_once(a, m, f, stream, size) != 0) return -1;
	}
	return callbench_now_ns() - t0;
}
*/
import "C"

import (
	"fmt"
	"time"
)

// SpinIters returns how many iterations of the C spin loop take about d.
func SpinIters(d time.Duration) int64 {
	const probe = 10_000_000
	best := int64(C.spin_ns(probe))
	for range 4 {
		best = min(best, int64(C.spin_ns(probe)))
	}
	if best <= 0 {
		return 0
	}
	return int64(float64(d.Nanoseconds()) * probe / float64(best))
}

// LoopLaunchGap launches the empty kernel f n times from C, spinning iters
// iterations (see SpinIters) after each launch, and returns the total time.
func LoopLaunchGap(fn, f, stream uintptr, iters int64, n int) (time.Duration, error) {
	d := C.loop_launch_gap(C.uintptr_t(fn), C.uintptr_t(f), C.uintptr_t(stream), C.int64_t(iters), C.int64_t(n))
	if d < 0 {
		return 0, errCall
	}
	return time.Duration(d), nil
}

// LaunchK launches the empty kernel f k times in one cgo call.
func LaunchK(fn, f, stream uintptr, k int) error {
	if s := C.launch_k(C.uintptr_t(fn), C.uintptr_t(f), C.uintptr_t(stream), C.int(k)); s != 0 {
		return fmt.Errorf("callbench: cuLaunchKernel returned %d", int(s))
	}
	return nil
}

// AllocOnce makes the three calls of the device alloc/touch/free loop
// (cuMemAllocAsync a, cuMemsetD8Async m, cuMemFreeAsync f, addresses) of size
// bytes on stream in one cgo call.
func AllocOnce(a, m, f, stream uintptr, size int) error {
	if s := C.alloc_once(C.uintptr_t(a), C.uintptr_t(m), C.uintptr_t(f), C.uintptr_t(stream), C.size_t(size)); s != 0 {
		return fmt.Errorf("callbench: alloc/memset/free returned %d", int(s))
	}
	return nil
}

// LoopAlloc runs the device alloc/touch/free loop body n times from C and returns
// the total time.
func LoopAlloc(a, m, f, stream uintptr, size, n int) (time.Duration, error) {
	d := C.loop_alloc(C.uintptr_t(a), C.uintptr_t(m), C.uintptr_t(f), C.uintptr_t(stream), C.size_t(size), C.int64_t(n))
	if d < 0 {
		return 0, errCall
	}
	return time.Duration(d), nil
}
