package cuda

/*
#include <stdint.h>
#include "current.h"

// gocuda_ctx_create_v2 calls cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev).
static int32_t gocuda_ctx_create_v2(uintptr_t fn, uintptr_t* pctx, uint32_t flags, int32_t dev) {
	return ((int32_t (*)(uintptr_t*, uint32_t, int32_t))fn)(pctx, flags, dev);
}

// gocuda_in_event_elapsed makes ctx current (gocuda_make_current), then calls
// cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd).
static int64_t gocuda_in_event_elapsed(uintptr_t fn, uintptr_t get, uintptr_t set, uintptr_t ctx,
		float* ms, uintptr_t start, uintptr_t end) {
	int64_t c = gocuda_make_current(get, set, ctx);
	if (c) return c;
	return (uint32_t)((int32_t (*)(float*, uintptr_t, uintptr_t))fn)(ms, start, end);
}
*/
import "C"

import (
	"errors"
	"unsafe"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/dl"
)

// Older drivers
//
// The generated layer binds the symbols that the CUDA 13.0 headers name. Where one
// the idiomatic layer needs is newer than the oldest driver it supports (CUDA 11.8,
// R520), the call falls back to the entry point such a driver exports instead, bound
// here by hand since the generator binds no legacy symbol. The fallback runs only
// when the newer symbol is missing (dl.ErrSymbolNotFound), so current drivers take
// the generated path. Anything else the core leaves to a newer driver degrades where
// it is used: without cuFuncGetParamInfo (CUDA 12.4) a kernel's parameter layout is
// unknown (Function.Params), and without host or managed memory pools, pinned and
// unified memory come from cuMemAllocHost and cuMemAllocManaged (Context.AllocHost).
var (
	// cuCtxCreate_v2 is cuCtxCreate before cuCtxCreate_v4 (CUDA 12.5) added creation
	// parameters; NewContext passes none.
	procCtxCreateV2 = cudaraw.Library().NewProc("cuCtxCreate_v2")
	// cuEventElapsedTime is the entry point of drivers without cuEventElapsedTime_v2,
	// with the same signature.
	procEventElapsedTimeV1 = cudaraw.Library().NewProc("cuEventElapsedTime")
)

// ctxCreate creates a context with cuCtxCreate_v4 without creation parameters, or
// with cuCtxCreate_v2 where the driver lacks cuCtxCreate_v4. Either pushes the new
// context on the calling thread's stack.
func ctxCreate(pctx *cudaraw.CUcontext, flags uint32, dev cudaraw.CUdevice) error {
	err := cudaraw.CtxCreate(pctx, nil, flags, dev)
	if !errors.Is(err, dl.ErrSymbolNotFound) {
		return err
	}
	fn, ferr := procCtxCreateV2.Addr()
	if ferr != nil {
		return err // not a CUDA driver of any age: report the symbol the headers name
	}
	return cudaraw.Result(C.gocuda_ctx_create_v2(C.uintptr_t(fn), (*C.uintptr_t)(unsafe.Pointer(pctx)), C.uint32_t(flags), C.int32_t(dev))).Err()
}

// inEventElapsed is cudaraw.EventElapsedTimeIn (cuEventElapsedTime_v2), or cuEventElapsedTime
// where the driver lacks the former, with ctx current.
func inEventElapsed(ctx cudaraw.CUcontext, ms *float32, start, end cudaraw.CUevent) error {
	err := cudaraw.EventElapsedTimeIn(ctx, ms, start, end)
	if !errors.Is(err, dl.ErrSymbolNotFound) {
		return err
	}
	fn, ferr := procEventElapsedTimeV1.Addr()
	if ferr != nil {
		return err
	}
	get, set, serr := cudaraw.CtxSwitchProcs()
	if serr != nil {
		return serr
	}
	r := int64(C.gocuda_in_event_elapsed(C.uintptr_t(fn), C.uintptr_t(get), C.uintptr_t(set), C.uintptr_t(ctx),
		(*C.float)(unsafe.Pointer(ms)), C.uintptr_t(start), C.uintptr_t(end)))
	if r>>32 != 0 {
		return cudaraw.Result(int32(r))
	}
	return cudaraw.Result(r).Err()
}
