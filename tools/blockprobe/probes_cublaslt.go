package main

import (
	"unsafe"

	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cublaslt/cublasltraw"
	"github.com/gocuda/gocuda/cuda/cudaraw"
)

// cuBLASLt's handle, fresh and after one matmul (a 32×32 float32 product on the
// legacy stream, heuristic-chosen algorithm, no workspace), and its descriptors.
func init() {
	probes["cublasLtDestroy"] = []Probe{
		{Variant: "fresh", Make: func(e *Env) (func() error, func(), error) {
			var h cublasltraw.CublasLtHandle
			if err := cublasltraw.Create(&h); err != nil {
				return nil, nil, err
			}
			return func() error { return cublasltraw.Destroy(h) }, noCleanup, nil
		}},
		{Variant: "used", Make: func(e *Env) (func() error, func(), error) {
			const n = 32
			var h cublasltraw.CublasLtHandle
			if err := cublasltraw.Create(&h); err != nil {
				return nil, nil, err
			}
			m, freeM, err := deviceBuffer(3 * n * n * 4)
			if err != nil {
				_ = cublasltraw.Destroy(h)
				return nil, nil, err
			}
			fail := func(err error) (func() error, func(), error) {
				_ = cublasltraw.Destroy(h)
				freeM()
				return nil, nil, err
			}
			var desc cublasltraw.CublasLtMatmulDesc
			if err := cublasltraw.MatmulDescCreate(&desc, cublasraw.CUBLAS_COMPUTE_32F, cudaraw.CUDA_R_32F); err != nil {
				return fail(err)
			}
			defer cublasltraw.MatmulDescDestroy(desc)
			var l cublasltraw.CublasLtMatrixLayout
			if err := cublasltraw.MatrixLayoutCreate(&l, cudaraw.CUDA_R_32F, n, n, n); err != nil {
				return fail(err)
			}
			defer cublasltraw.MatrixLayoutDestroy(l)
			alpha, beta := float32(1), float32(0)
			a, b, c := m, unsafe.Add(m, n*n*4), unsafe.Add(m, 2*n*n*4)
			if err := cublasltraw.Matmul(h, desc, unsafe.Pointer(&alpha), a, l, b, l, unsafe.Pointer(&beta), c, l, c, l, nil, nil, 0, 0); err != nil {
				return fail(err)
			}
			if err := cudaraw.CtxSynchronize(); err != nil {
				return fail(err)
			}
			return func() error { return cublasltraw.Destroy(h) }, freeM, nil
		}},
	}
	probes["cublasLtMatmulDescDestroy"] = []Probe{{Make: func(e *Env) (func() error, func(), error) {
		var d cublasltraw.CublasLtMatmulDesc
		if err := cublasltraw.MatmulDescCreate(&d, cublasraw.CUBLAS_COMPUTE_32F, cudaraw.CUDA_R_32F); err != nil {
			return nil, nil, err
		}
		return func() error { return cublasltraw.MatmulDescDestroy(d) }, noCleanup, nil
	}}}
	probes["cublasLtMatrixLayoutDestroy"] = []Probe{{Make: func(e *Env) (func() error, func(), error) {
		var l cublasltraw.CublasLtMatrixLayout
		if err := cublasltraw.MatrixLayoutCreate(&l, cudaraw.CUDA_R_32F, 32, 32, 32); err != nil {
			return nil, nil, err
		}
		return func() error { return cublasltraw.MatrixLayoutDestroy(l) }, noCleanup, nil
	}}}
	probes["cublasLtMatmulPreferenceDestroy"] = []Probe{{Make: func(e *Env) (func() error, func(), error) {
		var p cublasltraw.CublasLtMatmulPreference
		if err := cublasltraw.MatmulPreferenceCreate(&p); err != nil {
			return nil, nil, err
		}
		return func() error { return cublasltraw.MatmulPreferenceDestroy(p) }, noCleanup, nil
	}}}
	probes["cublasLtMatrixTransformDescDestroy"] = []Probe{{Make: func(e *Env) (func() error, func(), error) {
		var d cublasltraw.CublasLtMatrixTransformDesc
		if err := cublasltraw.MatrixTransformDescCreate(&d, cudaraw.CUDA_R_32F); err != nil {
			return nil, nil, err
		}
		return func() error { return cublasltraw.MatrixTransformDescDestroy(d) }, noCleanup, nil
	}}}
	probes["cublasLtEmulationDescDestroy"] = []Probe{{Make: func(e *Env) (func() error, func(), error) {
		var d cublasltraw.CublasLtEmulationDesc
		if err := cublasltraw.EmulationDescCreate(&d); err != nil {
			return nil, nil, err
		}
		return func() error { return cublasltraw.EmulationDescDestroy(d) }, noCleanup, nil
	}}}
}
