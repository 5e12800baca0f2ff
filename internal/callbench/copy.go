package callbench

/*
#include <stddef.h>
#include <stdint.h>

#include "clock.h"

// loop_copy copies n bytes between host and dev iters times as a C program would,
// in one of the ways of CopyWay (mode); see LoopCopy.
static int64_t loop_copy(int h2d, int mode, uintptr_t fn, uintptr_t record, uintptr_t query,
		uintptr_t dev, void* host, size_t n, uintptr_t stream, uintptr_t ev, int64_t iters) {
	int64_t t0 = now_ns();
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
	return now_ns() - t0;
}
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

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
