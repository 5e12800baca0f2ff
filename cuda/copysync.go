package cuda

/*
#cgo noescape gocuda_copy
#cgo nocallback gocuda_copy
#cgo noescape gocuda_event_spin
#cgo nocallback gocuda_event_spin
#include <stdint.h>
#include <stddef.h>
#include <time.h>
#include "current.h"

static int64_t gocuda_cs_now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// gocuda_copy makes ctx current, queues a copy of n bytes on stream with copy (dir 0:
// cuMemcpyHtoDAsync(dev, host), 1: cuMemcpyDtoHAsync(host, dev), 2:
// cuMemcpyAsync(dev, src)) and, with ev not 0, records ev after it: one call into C
// for a synchronous copy's two. The result is 0 or the failed call's CUresult, with
// bit 32 set when making ctx current failed, or bit 33 when only the record failed
// (the copy is queued).
static int64_t gocuda_copy(uintptr_t copy, uintptr_t record, uintptr_t get, uintptr_t set, uintptr_t ctx,
		int dir, uintptr_t dev, void* host, uintptr_t src, size_t n, uintptr_t stream, uintptr_t ev) {
	int64_t c = gocuda_make_current(get, set, ctx);
	if (c) return c;
	int32_t s;
	switch (dir) {
	case 0: s = ((int32_t (*)(uintptr_t, void*, size_t, uintptr_t))copy)(dev, host, n, stream); break;
	case 1: s = ((int32_t (*)(void*, uintptr_t, size_t, uintptr_t))copy)(host, dev, n, stream); break;
	default: s = ((int32_t (*)(uintptr_t, uintptr_t, size_t, uintptr_t))copy)(dev, src, n, stream); break;
	}
	if (s) return (uint32_t)s;
	if (ev == 0) return 0;
	s = ((int32_t (*)(uintptr_t, uintptr_t))record)(ev, stream);
	return s ? (((int64_t)1 << 33) | (uint32_t)s) : 0;
}

// gocuda_event_spin makes ctx current and queries ev (cuEventQuery) until it is not
// CUDA_ERROR_NOT_READY or spin_ns have passed; it returns the last answer, with bit 32
// set when making ctx current failed.
static int64_t gocuda_event_spin(uintptr_t query, uintptr_t get, uintptr_t set, uintptr_t ctx, uintptr_t ev, int64_t spin_ns) {
	int64_t c = gocuda_make_current(get, set, ctx);
	if (c) return c;
	int64_t t0 = gocuda_cs_now();
	for (;;) {
		int32_t s = ((int32_t (*)(uintptr_t))query)(ev);
		if (s != 600 || gocuda_cs_now() - t0 >= spin_ns) return (uint32_t)s;
	}
}
*/
import "C"

import (
	"errors"
	"time"
	"unsafe"

	"github.com/gocuda/gocuda/internal/ctxswitch"
)

// Directions of copyRecord.
const (
	copyHtoD = 0 // device ← host
	copyDtoH = 1 // host ← device
	copyAny  = 2 // any ← any (unified addressing)
)

// opEnd is what an op of runRecorded leaves its caller to wait for.
type opEnd uint8

const (
	endWait opEnd = iota // ev (when not 0) is recorded after the op's work
	endDone              // nothing: the work is complete, or done with the host memory
)

// errUnrecorded wraps the failure of the event record after a copy that was queued:
// the copy is a use of its memory all the same.
type errUnrecorded struct{ err error }

func (e *errUnrecorded) Error() string { return e.err.Error() }
func (e *errUnrecorded) Unwrap() error { return e.err }

// queued reports whether an op that failed with err queued its work anyway.
func queued(err error) bool {
	var u *errUnrecorded
	return errors.As(err, &u)
}

// copyReq is one copy of copyQueue: n bytes from host to dev (copyHtoD), from dev
// to host (copyDtoH) or from src to dev (copyAny).
type copyReq struct {
	dir      int
	dev, src CUdeviceptr
	host     unsafe.Pointer
	n        uint64
}

// copyQueue queues c on stream h in ctx and, with ev not 0, records ev after it, in
// one call into C. The wait for ev is the caller's, after its bookkeeping, which
// then overlaps with the copy (spinning here measured slower on the H200).
func copyQueue(ctx CUcontext, c copyReq, h CUstream, ev CUevent) (opEnd, error) {
	var proc = proc_cuMemcpyAsync
	switch c.dir {
	case copyHtoD:
		proc = proc_cuMemcpyHtoDAsync_v2
	case copyDtoH:
		proc = proc_cuMemcpyDtoHAsync_v2
	}
	fn, err := proc.Addr()
	if err != nil {
		return endWait, err
	}
	record, err := proc_cuEventRecord.Addr()
	if err != nil {
		return endWait, err
	}
	get, set, err := ctxswitch.Procs()
	if err != nil {
		return endWait, err
	}
	r := int64(C.gocuda_copy(C.uintptr_t(fn), C.uintptr_t(record), C.uintptr_t(get), C.uintptr_t(set), C.uintptr_t(ctx),
		C.int(c.dir), C.uintptr_t(c.dev), c.host, C.uintptr_t(c.src), C.size_t(c.n), C.uintptr_t(h), C.uintptr_t(ev)))
	switch {
	case r == 0 && ev == 0:
		return endDone, nil
	case r == 0:
		return endWait, nil
	case r>>33 != 0:
		return endWait, &errUnrecorded{Result(int32(r)).err()}
	case r>>32 != 0:
		return endWait, Result(int32(r))
	}
	return endWait, Result(int32(r)).err()
}

// spinEvent queries ev in ctx from C for at most d, and reports whether it completed.
func spinEvent(ctx CUcontext, ev CUevent, d time.Duration) (bool, error) {
	query, err := proc_cuEventQuery.Addr()
	if err != nil {
		return false, err
	}
	get, set, err := ctxswitch.Procs()
	if err != nil {
		return false, err
	}
	r := int64(C.gocuda_event_spin(C.uintptr_t(query), C.uintptr_t(get), C.uintptr_t(set), C.uintptr_t(ctx), C.uintptr_t(ev), C.int64_t(d)))
	if r>>32 != 0 {
		return false, Result(int32(r))
	}
	return ready(Result(int32(r)).err())
}
