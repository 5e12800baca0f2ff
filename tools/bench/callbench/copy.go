package callbench

/*
#include <stddef.h>
#include <stdint.h>

#include "clock.h"

// loop_copy copies n bytes between host and dev iters times as a C program would,
// in one of the ways of CopyWay (mode); see LoopCopy.
static int64_t loop_copy(int h2d, int mode, uintptr_t fn, uintptr_t record, uintptr_t query,
		uintptr_t dev, void* host, size_t n, uintptr_t stream, uintptr_t ev, int64_t iters) {
	int64_t t0 = callbench_now_ns();
	for (int64_t i = 0; i < iters; i++) {
		int s;
		if (mode == 0)
			s = h2d ? ((int (*)(uintptr_t, void*, size_t))fn)(dev, host, n)
			        : ((int (*)(void*, uintptr_t, size_t))fn)(host, dev, n);
		else
			s = h2d ? ((int (*)(uintptr_t, void*, size_t, uintptr_t))fn)(dev, host, n, stream)
			        : ((int (*)(void*, uintptr_t, size_t, uintptr_t))fn)(host, dev, n, stream);
		if (s != 0) return -1;
		if (mode == 1) {
			if (((int (*)(uintptr_t, uintptr_t))record)(ev, stream) != 0) return -1;
			while ((s = ((int (*)(uintptr_t))query)(ev)) == 600) {}
			if (s != 0) return -1;
		} else if (mode == 2) {
			while ((s = ((int (*)(uintptr_t))query)(stream)) == 600) {}
			if (s != 0) return -1;
		}
	}
	return callbench_now_ns() - t0;
}

// loop_copy_flag is loop_copy's async copy followed by cuStreamWriteValue32 (write)
// of an increasing value to the mapped page-locked word at flag (its device address
// flag_dev), which the loop spins on: the wait without a driver call.
static int64_t loop_copy_flag(int h2d, uintptr_t fn, uintptr_t write, uintptr_t dev, void* host, size_t n,
		uintptr_t stream, uintptr_t flag_dev, volatile uint32_t* flag, int64_t iters) {
	uint32_t seq = *flag;
	int64_t t0 = callbench_now_ns();
	for (int64_t i = 0; i < iters; i++) {
		int s = h2d ? ((int (*)(uintptr_t, void*, size_t, uintptr_t))fn)(dev, host, n, stream)
		            : ((int (*)(void*, uintptr_t, size_t, uintptr_t))fn)(host, dev, n, stream);
		if (s != 0) return -1;
		seq++;
		if (((int (*)(uintptr_t, uintptr_t, uint32_t, unsigned))write)(stream, flag_dev, seq, 0) != 0) return -1;
		while (*flag != seq) {}
	}
	return callbench_now_ns() - t0;
}

// Fakes of cuMemcpyHtoDAsync and cuStreamWriteValue32 for the tests: the copy counts
// its calls; the write stores the value at the address at once; either fails at
// call fake_copy_fail_at (counted together).
static int64_t fake_copy_calls, fake_copy_fail_at = -1;
static int fake_copy(uintptr_t dev, void* host, size_t n, uintptr_t stream) {
	return fake_copy_calls++ == fake_copy_fail_at ? 1 : 0;
}
static int fake_write(uintptr_t stream, uintptr_t addr, uint32_t val, unsigned flags) {
	if (fake_copy_calls++ == fake_copy_fail_at) return 1;
	*(volatile uint32_t*)addr = val;
	return 0;
}
static uintptr_t fake_copy_addr(void) { return (uintptr_t)fake_copy; }
static uintptr_t fake_write_addr(void) { return (uintptr_t)fake_write; }
static void fake_copy_reset(int64_t fail_at) { fake_copy_calls = 0; fake_copy_fail_at = fail_at; }
static int64_t fake_copy_count(void) { return fake_copy_calls; }
*/
import "C"

import (
	"time"
	"unsafe"
)

// CopyWay is how LoopCopy copies and waits.
type CopyWay int

// The ways of LoopCopy.
const (
	// CopySync calls the synchronous cuMemcpyHtoD / cuMemcpyDtoH (fn).
	CopySync CopyWay = iota
	// CopyEvent calls cuMemcpyHtoDAsync / cuMemcpyDtoHAsync (fn) on the stream, records
	// ev after it (record: cuEventRecord) and spins on cuEventQuery (query).
	CopyEvent
	// CopyStreamQuery calls the async copy and spins on cuStreamQuery (query).
	CopyStreamQuery
	// CopyNoWait calls the async copy and does not wait.
	CopyNoWait
)

// LoopCopy copies n bytes between host memory at host and device memory at dev
// (host to device when h2d) iters times from C, the way way says, and returns the
// total time. The context must be current on the calling thread.
func LoopCopy(h2d bool, way CopyWay, fn, record, query, dev uintptr, host unsafe.Pointer, n int, stream, ev uintptr, iters int) (time.Duration, error) {
	d := C.loop_copy(C.int(b2i(h2d)), C.int(way), C.uintptr_t(fn), C.uintptr_t(record), C.uintptr_t(query),
		C.uintptr_t(dev), host, C.size_t(n), C.uintptr_t(stream), C.uintptr_t(ev), C.int64_t(iters))
	if d < 0 {
		return 0, errCall
	}
	return time.Duration(d), nil
}

// LoopCopyFlag is LoopCopy with the async copy (fn), waited for on a word of mapped
// page-locked memory (flag, at device address flagDev) that cuStreamWriteValue32
// (write) sets after each copy: a wait without a driver call in its loop.
func LoopCopyFlag(h2d bool, fn, write, dev uintptr, host unsafe.Pointer, n int, stream, flagDev uintptr, flag *uint32, iters int) (time.Duration, error) {
	d := C.loop_copy_flag(C.int(b2i(h2d)), C.uintptr_t(fn), C.uintptr_t(write), C.uintptr_t(dev), host, C.size_t(n),
		C.uintptr_t(stream), C.uintptr_t(flagDev), (*C.uint32_t)(unsafe.Pointer(flag)), C.int64_t(iters))
	if d < 0 {
		return 0, errCall
	}
	return time.Duration(d), nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// fakeCopyFlag returns the addresses of C fakes of an async host-to-device copy and
// of cuStreamWriteValue32 (tests), which fail at call failAt (-1: never), counted
// with the calls before in fakeCopyCalls.
func fakeCopyFlag(failAt int) (copyFn, write uintptr) {
	C.fake_copy_reset(C.int64_t(failAt))
	return uintptr(C.fake_copy_addr()), uintptr(C.fake_write_addr())
}

// fakeCopyCalls returns the number of calls of fakeCopyFlag's fakes.
func fakeCopyCalls() int { return int(C.fake_copy_count()) }
