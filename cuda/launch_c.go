package cuda

/*
#cgo noescape gocuda_launch_batch
#cgo nocallback gocuda_launch_batch
#cgo noescape gocuda_launch_after
#cgo nocallback gocuda_launch_after
#cgo noescape gocuda_launch
#cgo nocallback gocuda_launch
#include <stddef.h>
#include <stdint.h>
#include "current.h"

typedef int32_t (*gocuda_launch_fn)(uintptr_t, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t,
	uint32_t, uint32_t, uintptr_t, void**, void**);

// gocuda_launch_after makes ctx current and launches f with its parameters packed in
// one buffer, passed through cuLaunchKernel's extra array, which is built here on the
// C stack (size 0: a kernel without parameters). First, for a hand-off, for each of
// the n events it records it on from[i] (unless from[i] is 0: an event recorded
// already) and makes stream wait for it: one call into C for what a C program does
// in 2n+1 calls. The result is the CUresult of the failed call or the launch, or
// gocuda_make_current's failure.
static int64_t gocuda_launch_after(uintptr_t fn, uintptr_t record, uintptr_t wait, uintptr_t get, uintptr_t set,
		uintptr_t ctx, const uint64_t* evs, const uint64_t* from, size_t n,
		uintptr_t f, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t bx, uint32_t by, uint32_t bz,
		uint32_t shmem, uintptr_t stream, const uint64_t* buf, size_t size) {
	int64_t c = gocuda_make_current(get, set, ctx);
	if (c) return c;
	for (size_t i = 0; i < n; i++) {
		int32_t s = 0;
		if (from[i]) s = ((int32_t (*)(uintptr_t, uintptr_t))record)((uintptr_t)evs[i], (uintptr_t)from[i]);
		if (!s) s = ((int32_t (*)(uintptr_t, uintptr_t, uint32_t))wait)(stream, (uintptr_t)evs[i], 0);
		if (s) return (uint32_t)s;
	}
	void* extra[5] = {(void*)1, (void*)buf, (void*)2, &size, (void*)0};
	return (uint32_t)((gocuda_launch_fn)fn)(f, gx, gy, gz, bx, by, bz, shmem, stream, NULL, size ? extra : NULL);
}

// gocuda_shape is a launch's grid, block and dynamic shared memory (launchShape).
typedef struct {
	uint32_t gx, gy, gz, bx, by, bz, shm;
} gocuda_shape;

// gocuda_launch is gocuda_launch_after without a hand-off, the usual launch: fewer
// arguments to pass (the shape by address).
static int64_t gocuda_launch(uintptr_t fn, uintptr_t get, uintptr_t set, uintptr_t ctx, uintptr_t f,
		const gocuda_shape* sh, uintptr_t stream, const uint64_t* buf, size_t size) {
	int64_t c = gocuda_make_current(get, set, ctx);
	if (c) return c;
	void* extra[5] = {(void*)1, (void*)buf, (void*)2, &size, (void*)0};
	return (uint32_t)((gocuda_launch_fn)fn)(f, sh->gx, sh->gy, sh->gz, sh->bx, sh->by, sh->bz, sh->shm, stream,
		NULL, size ? extra : NULL);
}

// gocuda_batch_rec is one launch of a LaunchBatch: its parameters are size bytes at
// byte offset off of the batch's parameter buffer.
typedef struct {
	uintptr_t f;
	uint32_t gx, gy, gz, bx, by, bz, shmem, pad;
	uint64_t off, size;
} gocuda_batch_rec;

// gocuda_launch_batch makes ctx current, then launches the n records in order on
// stream, stopping at the first failure; *done is the number launched. The result
// is as gocuda_launch's.
static int64_t gocuda_launch_batch(uintptr_t fn, uintptr_t get, uintptr_t set, uintptr_t ctx,
		uintptr_t stream, const gocuda_batch_rec* recs, size_t n, const uint64_t* args, size_t* done) {
	*done = 0;
	int64_t c = gocuda_make_current(get, set, ctx);
	if (c) return c;
	for (size_t i = 0; i < n; i++) {
		const gocuda_batch_rec* r = &recs[i];
		size_t size = r->size;
		void* extra[5] = {(void*)1, (void*)((const char*)args + r->off), (void*)2, &size, (void*)0};
		int32_t s = ((gocuda_launch_fn)fn)(r->f, r->gx, r->gy, r->gz, r->bx, r->by, r->bz, r->shmem,
			stream, NULL, size ? extra : NULL);
		if (s != 0) return (uint32_t)s;
		*done = i + 1;
	}
	return 0;
}
*/
import "C"

import (
	"unsafe"

	"github.com/gocuda/gocuda/cuda/cudaraw"
)

// The cgo side of kernel launches: the C functions that make the context current
// and call cuLaunchKernel in one crossing (one launch, a launch after a hand-off's
// waits, a batch), and the Go functions that call them. The parameter buffer
// reaches C as a pointer to a pointer-free type, so cgo neither copies nor checks it
// (see launch_args.go).

// launchPacked launches f with the packed parameter buffer params, in one cgo call
// that also makes ctx current.
func launchPacked(ctx cudaraw.CUcontext, f cudaraw.CUfunction, sh launchShape, s cudaraw.CUstream, params []byte) error {
	fn, err := cudaraw.ProcLaunchKernel.Addr()
	if err != nil {
		return err
	}
	get, set, err := cudaraw.CtxSwitchProcs()
	if err != nil {
		return err
	}
	r := int64(C.gocuda_launch(C.uintptr_t(fn), C.uintptr_t(get), C.uintptr_t(set), C.uintptr_t(ctx), C.uintptr_t(f),
		(*C.gocuda_shape)(unsafe.Pointer(&sh)), C.uintptr_t(s), paramsArg(params), C.size_t(len(params))))
	return launchResult(r)
}

// paramsArg passes a launch's parameter buffer to C as a pointer to a pointer-free C
// type, which cgo does not check at run time (nil for no parameters).
func paramsArg(params []byte) *C.uint64_t {
	if len(params) == 0 {
		return nil
	}
	return (*C.uint64_t)(unsafe.Pointer(&params[0]))
}

// launchResult is the error of a launch's C call: the failure of its make-current
// (bit 32 set, see gocuda_make_current) or the CUresult of its driver calls.
func launchResult(r int64) error {
	if r>>32 != 0 {
		return cudaraw.Result(int32(r))
	}
	return cudaraw.Result(r).Err()
}

// launchShape and C's gocuda_shape are the same seven uint32s (a compile-time check).
var (
	_ = [1]struct{}{}[unsafe.Sizeof(launchShape{})-unsafe.Sizeof(C.gocuda_shape{})]
	_ = [1]struct{}{}[unsafe.Offsetof(launchShape{}.shm)-unsafe.Offsetof(C.gocuda_shape{}.shm)]
)

// launchAfterC makes launchAfter's call: the event records and waits, then the launch.
func launchAfterC(ctx cudaraw.CUcontext, evs, from []uint64, f cudaraw.CUfunction, sh launchShape, s cudaraw.CUstream, params []byte) error {
	fn, err := cudaraw.ProcLaunchKernel.Addr()
	if err != nil {
		return err
	}
	get, set, err := cudaraw.CtxSwitchProcs()
	if err != nil {
		return err
	}
	var record, wait uintptr
	var pe, pf *C.uint64_t
	if len(evs) > 0 {
		if record, err = cudaraw.ProcEventRecord.Addr(); err != nil {
			return err
		}
		if wait, err = cudaraw.ProcStreamWaitEvent.Addr(); err != nil {
			return err
		}
		pe, pf = (*C.uint64_t)(unsafe.Pointer(&evs[0])), (*C.uint64_t)(unsafe.Pointer(&from[0]))
	}
	r := int64(C.gocuda_launch_after(C.uintptr_t(fn), C.uintptr_t(record), C.uintptr_t(wait), C.uintptr_t(get), C.uintptr_t(set),
		C.uintptr_t(ctx), pe, pf, C.size_t(len(evs)),
		C.uintptr_t(f), C.uint32_t(sh.gx), C.uint32_t(sh.gy), C.uint32_t(sh.gz), C.uint32_t(sh.bx), C.uint32_t(sh.by), C.uint32_t(sh.bz),
		C.uint32_t(sh.shm), C.uintptr_t(s), paramsArg(params), C.size_t(len(params))))
	return launchResult(r)
}

// batchRec is a launch of a LaunchBatch as gocuda_launch_batch reads it.
type batchRec = C.gocuda_batch_rec

// newBatchRec returns the record of a launch of f with shape d, whose parameters are
// size bytes at byte offset off of the batch's buffer.
func newBatchRec(f cudaraw.CUfunction, d launchShape, off, size uintptr) batchRec {
	return batchRec{
		f:  C.uintptr_t(f),
		gx: C.uint32_t(d.gx), gy: C.uint32_t(d.gy), gz: C.uint32_t(d.gz),
		bx: C.uint32_t(d.bx), by: C.uint32_t(d.by), bz: C.uint32_t(d.bz),
		shmem: C.uint32_t(d.shm),
		off:   C.uint64_t(off), size: C.uint64_t(size),
	}
}

// launchBatch launches recs on s with one cgo call that also makes ctx current, and
// returns how many were launched.
func launchBatch(ctx cudaraw.CUcontext, s cudaraw.CUstream, recs []batchRec, args []uint64) (int, error) {
	fn, err := cudaraw.ProcLaunchKernel.Addr()
	if err != nil {
		return 0, err
	}
	get, set, err := cudaraw.CtxSwitchProcs()
	if err != nil {
		return 0, err
	}
	var a *C.uint64_t
	if len(args) > 0 {
		a = (*C.uint64_t)(unsafe.Pointer(&args[0]))
	}
	var done C.size_t
	r := int64(C.gocuda_launch_batch(C.uintptr_t(fn), C.uintptr_t(get), C.uintptr_t(set), C.uintptr_t(ctx),
		C.uintptr_t(s), &recs[0], C.size_t(len(recs)), a, &done))
	return int(done), launchResult(r) // done is 0 when making ctx current failed
}
