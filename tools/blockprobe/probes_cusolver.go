package main

import (
	"unsafe"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cusolver/cusolverraw"

	"github.com/gocuda/gocuda/cusolver"
)

// cuSOLVER's dense handle, fresh and after one factorization (a 32×32 identity by
// cusolverDnSpotrf on the legacy stream, with its workspace and info on the device).
func init() {
	probes["cusolverDnDestroy"] = []Probe{
		{Variant: "fresh", Make: func(e *Env) (func() error, func(), error) {
			var h cusolverraw.CusolverDnHandle
			if err := cusolverraw.DnCreate(&h); err != nil {
				return nil, nil, err
			}
			return func() error { return cusolverraw.DnDestroy(h) }, noCleanup, nil
		}},
		{Variant: "used", Make: func(e *Env) (func() error, func(), error) {
			const n = 32
			eye := make([]float32, n*n)
			for i := range n {
				eye[i+i*n] = 1
			}
			a, freeA, err := deviceBuffer(n * n * 4)
			if err != nil {
				return nil, nil, err
			}
			var h cusolverraw.CusolverDnHandle
			if err := cusolverraw.DnCreate(&h); err != nil {
				freeA()
				return nil, nil, err
			}
			fail := func(err error) (func() error, func(), error) {
				_ = cusolverraw.DnDestroy(h)
				freeA()
				return nil, nil, err
			}
			if err := cudaraw.MemcpyHtoD(*(*cudaraw.CUdeviceptr)(unsafe.Pointer(&a)), unsafe.Pointer(&eye[0]), n*n*4); err != nil {
				return fail(err)
			}
			var lwork int32
			if err := cusolverraw.DnSpotrfBufferSize(h, cusolver.Lower, n, (*float32)(a), n, &lwork); err != nil {
				return fail(err)
			}
			w, freeW, err := deviceBuffer(uint64(max(lwork, 1))*4 + 4) // the workspace, then the info
			if err != nil {
				return fail(err)
			}
			info := unsafe.Add(w, uintptr(max(lwork, 1))*4)
			if err := cusolverraw.DnSpotrf(h, cusolver.Lower, n, (*float32)(a), n, (*float32)(w), lwork, (*int32)(info)); err != nil {
				freeW()
				return fail(err)
			}
			if err := cudaraw.CtxSynchronize(); err != nil {
				freeW()
				return fail(err)
			}
			return func() error { return cusolverraw.DnDestroy(h) }, func() { freeW(); freeA() }, nil
		}},
	}
}
