package cuda

/*
#cgo noescape gocuda_copy_record
#cgo nocallback gocuda_copy_record
#cgo noescape gocuda_event_spin
#cgo nocallback gocuda_event_spin
#cgo nocallback gocuda_flag_spin
#include <stdint.h>
#include <stddef.h>
#include <time.h>
#include "current.h"

// gocuda_copy_record makes ctx current, queues a copy of n bytes on stream with copy
// (dir 0: cuMemcpyHtoDAsync(dev, host), 1: cuMemcpyDtoHAsync(host, dev), 2:
// cuMemcpyAsync(dev, src)), then, if ev is not 0, records ev after it: one call into C
// for a synchronous copy's two. The result is 0, the failed call's CUresult, with bit 32
// set when making ctx current failed, or bit 33 when only the record failed (the copy
// is queued).
//
// With flag not 0, it writes val there after the copy with write
// (cuStreamWriteValue32_v2, default flags: after a fence) instead of recording an
// event; a failed write is reported as a failed record.
static int64_t gocuda_copy_record(uintptr_t copy, uintptr_t record, uintptr_t get, uintptr_t set, uintptr_t ctx,
		int dir, uintptr_t dev, void* host, uintptr_t src, size_t n, uintptr_t stream, uintptr_t ev,
		uintptr_t write, uintptr_t flag, uint32_t val) {
	int64_t c = gocuda_make_current(get, set, ctx);
	if (c) return c;
	int32_t s;
	switch (dir) {
	case 0: s = ((int32_t (*)(uintptr_t, void*, size_t, uintptr_t))copy)(dev, host, n, stream); break;
	case 1: s = ((int32_t (*)(void*, uintptr_t, size_t, uintptr_t))copy)(host, dev, n, stream); break;
	default: s = ((int32_t (*)(uintptr_t, uintptr_t, size_t, uintptr_t))copy)(dev, src, n, stream); break;
	}
	if (s) return (uint32_t)s;
	if (flag != 0)
		s = ((int32_t (*)(uintptr_t, uintptr_t, uint32_t, unsigned))write)(stream, flag, val, 0);
	else if (ev != 0)
		s = ((int32_t (*)(uintptr_t, uintptr_t))record)(ev, stream);
	return s ? (((int64_t)1 << 33) | (uint32_t)s) : 0;
}

// gocuda_write_flag makes ctx current and queues write (cuStreamWriteValue32_v2) of
// val to flag on stream; the result as gocuda_event_spin's.
static int64_t gocuda_write_flag(uintptr_t write, uintptr_t get, uintptr_t set, uintptr_t ctx, uintptr_t stream,
		uintptr_t flag, uint32_t val) {
	int64_t c = gocuda_make_current(get, set, ctx);
	if (c) return c;
	return (uint32_t)((int32_t (*)(uintptr_t, uintptr_t, uint32_t, unsigned))write)(stream, flag, val, 0);
}

static int64_t gocuda_cs_now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
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

// gocuda_flag_spin reads the word at flag until it is val or spin_ns have passed,
// and reports whether it was val.
static int gocuda_flag_spin(volatile uint32_t* flag, uint32_t val, int64_t spin_ns) {
	int64_t t0 = gocuda_cs_now();
	for (;;) {
		for (int i = 0; i < 64; i++)
			if (__atomic_load_n(flag, __ATOMIC_ACQUIRE) == val) return 1;
		if (gocuda_cs_now() - t0 >= spin_ns) return 0;
	}
}
*/
import "C"

import (
	"errors"
	"time"
	"unsafe"

	"github.com/gocuda/gocuda/cuda/cudaraw"
)

// The cgo side of copies and of their waits: one call into C that makes the context
// current, queues a copy and signals its end (an event record or a flag write), and
// the loops in C that spin on an event or a flag for a synchronous copy's wait.

// Directions of copyRecord.
const (
	copyHtoD = 0 // device ← host
	copyDtoH = 1 // host ← device
	copyAny  = 2 // any ← any (unified addressing)
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

// copyRecord queues a copy of n bytes in ctx on stream h (dir: copyHtoD from host to
// dev, copyDtoH from dev to host, copyAny from src to dev) and, after it, sets w's
// flag slot or records w's event (when it has either), in one call into C.
func copyRecord(ctx cudaraw.CUcontext, dir int, dev cudaraw.CUdeviceptr, host unsafe.Pointer, src cudaraw.CUdeviceptr, n uint64, h cudaraw.CUstream, w *waiter) error {
	var proc = cudaraw.ProcMemcpyAsync
	switch dir {
	case copyHtoD:
		proc = cudaraw.ProcMemcpyHtoDAsync
	case copyDtoH:
		proc = cudaraw.ProcMemcpyDtoHAsync
	}
	fn, err := proc.Addr()
	if err != nil {
		return err
	}
	record, err := cudaraw.ProcEventRecord.Addr()
	if err != nil {
		return err
	}
	var write uintptr
	if w.flag.word != nil {
		if write, err = cudaraw.ProcStreamWriteValue32.Addr(); err != nil {
			return err
		}
	}
	get, set, err := cudaraw.CtxSwitchProcs()
	if err != nil {
		return err
	}
	r := int64(C.gocuda_copy_record(C.uintptr_t(fn), C.uintptr_t(record), C.uintptr_t(get), C.uintptr_t(set), C.uintptr_t(ctx),
		C.int(dir), C.uintptr_t(dev), host, C.uintptr_t(src), C.size_t(n), C.uintptr_t(h), C.uintptr_t(w.ev),
		C.uintptr_t(write), C.uintptr_t(w.flag.dev), C.uint32_t(w.flag.val)))
	switch {
	case r == 0:
		return nil
	case r>>33 != 0:
		return &errUnrecorded{cudaraw.Result(int32(r)).Err()}
	case r>>32 != 0:
		return cudaraw.Result(int32(r))
	}
	return cudaraw.Result(int32(r)).Err()
}

// spinEvent queries ev in ctx from C for at most d, and reports whether it completed.
func spinEvent(ctx cudaraw.CUcontext, ev cudaraw.CUevent, d time.Duration) (bool, error) {
	query, err := cudaraw.ProcEventQuery.Addr()
	if err != nil {
		return false, err
	}
	get, set, err := cudaraw.CtxSwitchProcs()
	if err != nil {
		return false, err
	}
	r := int64(C.gocuda_event_spin(C.uintptr_t(query), C.uintptr_t(get), C.uintptr_t(set), C.uintptr_t(ctx), C.uintptr_t(ev), C.int64_t(d)))
	if r>>32 != 0 {
		return false, cudaraw.Result(int32(r))
	}
	return ready(cudaraw.Result(int32(r)).Err())
}

// spinFlag reads f's word from C for at most d, and reports whether it was set.
func spinFlag(f *flagSlot, d time.Duration) bool {
	return C.gocuda_flag_spin((*C.uint32_t)(unsafe.Pointer(f.word)), C.uint32_t(f.val), C.int64_t(d)) != 0
}

// writeFlag queues the write of val to the flag word at dev on stream h in ctx.
func writeFlag(ctx cudaraw.CUcontext, h cudaraw.CUstream, dev cudaraw.CUdeviceptr, val uint32) error {
	write, err := cudaraw.ProcStreamWriteValue32.Addr()
	if err != nil {
		return err
	}
	get, set, err := cudaraw.CtxSwitchProcs()
	if err != nil {
		return err
	}
	r := int64(C.gocuda_write_flag(C.uintptr_t(write), C.uintptr_t(get), C.uintptr_t(set), C.uintptr_t(ctx), C.uintptr_t(h),
		C.uintptr_t(dev), C.uint32_t(val)))
	if r>>32 != 0 {
		return cudaraw.Result(int32(r))
	}
	return cudaraw.Result(int32(r)).Err()
}
