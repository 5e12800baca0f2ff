package main

import (
	"unsafe"

	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cudnn/cudnnraw"
	"github.com/gocuda/gocuda/cufft/cufftraw"
	"github.com/gocuda/gocuda/curand/curandraw"
	"github.com/gocuda/gocuda/cusparse/cusparseraw"
	"github.com/gocuda/gocuda/tools/internal/rawctx"
)

// Probe makes one resource, before the spin kernel starts, through the generated raw layer.
// It returns the release under test and a cleanup that runs once the GPU is idle again (for
// buffers and streams the resource needed). Variant names a second way to make the same
// resource (e.g. "managed" memory for cuMemFree_v2); "" is the plain one.
//
// Release names the function the probe's release calls when it is not the row's destroy
// but another function that releases the same resource (ncclCommAbort beside
// ncclCommDestroy): such a probe is measured and reported under its own name, and not
// judged, since the row's class is the one its destroy is released in.
type Probe struct {
	Variant string
	Release string
	Make    func(e *Env) (release func() error, cleanup func(), err error)
}

func noCleanup() {}

// probes is keyed by the destroy function named in headers/*.toml ([[resource]] destroy).
// A test checks that every destroy in the real headers has an entry here.
var probes = map[string][]Probe{
	// ---- cuda ----
	"cuStreamDestroy_v2": {{Make: func(e *Env) (func() error, func(), error) {
		var s cudaraw.CUstream
		if err := cudaraw.StreamCreate(&s, uint32(cudaraw.CU_STREAM_NON_BLOCKING)); err != nil {
			return nil, nil, err
		}
		return func() error { return cudaraw.StreamDestroy(s) }, noCleanup, nil
	}}},
	"cuEventDestroy_v2": {{Make: func(e *Env) (func() error, func(), error) {
		var ev cudaraw.CUevent
		if err := cudaraw.EventCreate(&ev, uint32(cudaraw.CU_EVENT_DISABLE_TIMING)); err != nil {
			return nil, nil, err
		}
		return func() error { return cudaraw.EventDestroy(ev) }, noCleanup, nil
	}}},
	"cuModuleUnload": {{Make: func(e *Env) (func() error, func(), error) {
		var m cudaraw.CUmodule
		img := rawctx.CString(kernelsPTX)
		if err := cudaraw.ModuleLoadData(&m, unsafe.Pointer(&img[0])); err != nil {
			return nil, nil, err
		}
		return func() error { return cudaraw.ModuleUnload(m) }, noCleanup, nil
	}}},
	"cuLibraryUnload": {{Make: func(e *Env) (func() error, func(), error) {
		var l cudaraw.CUlibrary
		img := rawctx.CString(kernelsPTX)
		if err := cudaraw.LibraryLoadData(&l, unsafe.Pointer(&img[0]), nil, nil, 0, nil, nil, 0); err != nil {
			return nil, nil, err
		}
		return func() error { return cudaraw.LibraryUnload(l) }, noCleanup, nil
	}}},
	"cuLinkDestroy": {{Make: func(e *Env) (func() error, func(), error) {
		var st cudaraw.CUlinkState
		if err := cudaraw.LinkCreate(0, nil, nil, &st); err != nil {
			return nil, nil, err
		}
		return func() error { return cudaraw.LinkDestroy(st) }, noCleanup, nil
	}}},
	"cuGraphDestroy": {{Make: func(e *Env) (func() error, func(), error) {
		g, s, err := captureEmpty(e)
		if err != nil {
			return nil, nil, err
		}
		return func() error { return cudaraw.GraphDestroy(g) }, func() { _ = cudaraw.StreamDestroy(s) }, nil
	}}},
	"cuGraphExecDestroy": {{Make: func(e *Env) (func() error, func(), error) {
		g, s, err := captureEmpty(e)
		if err != nil {
			return nil, nil, err
		}
		var ge cudaraw.CUgraphExec
		if err := cudaraw.GraphInstantiateWithFlags(&ge, g, 0); err != nil {
			return nil, nil, err
		}
		if err := cudaraw.GraphDestroy(g); err != nil {
			return nil, nil, err
		}
		if err := cudaraw.GraphLaunch(ge, s); err != nil { // used once
			return nil, nil, err
		}
		if err := cudaraw.StreamSynchronize(s); err != nil {
			return nil, nil, err
		}
		return func() error { return cudaraw.GraphExecDestroy(ge) }, func() { _ = cudaraw.StreamDestroy(s) }, nil
	}}},
	"cuMemFree_v2": {
		{Make: func(e *Env) (func() error, func(), error) {
			var d cudaraw.CUdeviceptr
			if err := cudaraw.MemAlloc(&d, 1<<20); err != nil {
				return nil, nil, err
			}
			return func() error { return cudaraw.MemFree(d) }, noCleanup, nil
		}},
		{Variant: "managed", Make: func(e *Env) (func() error, func(), error) {
			var d cudaraw.CUdeviceptr
			if err := cudaraw.MemAllocManaged(&d, 1<<20, uint32(cudaraw.CU_MEM_ATTACH_GLOBAL)); err != nil {
				return nil, nil, err
			}
			return func() error { return cudaraw.MemFree(d) }, noCleanup, nil
		}},
	},
	"cuMemPoolDestroy": {{Make: func(e *Env) (func() error, func(), error) {
		props := cudaraw.CUmemPoolProps{
			AllocType: cudaraw.CU_MEM_ALLOCATION_TYPE_PINNED,
			Location:  cudaraw.CUmemLocation{Type: cudaraw.CU_MEM_LOCATION_TYPE_DEVICE, Id: int32(e.Dev)},
		}
		var p cudaraw.CUmemoryPool
		if err := cudaraw.MemPoolCreate(&p, &props); err != nil {
			return nil, nil, err
		}
		thr := ^uint64(0)
		if err := cudaraw.MemPoolSetAttribute(p, cudaraw.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, unsafe.Pointer(&thr)); err != nil {
			return nil, nil, err
		}
		var d cudaraw.CUdeviceptr // the pool keeps 1 MiB reserved
		if err := cudaraw.MemAllocFromPoolAsync(&d, 1<<20, p, e.Busy); err != nil {
			return nil, nil, err
		}
		if err := cudaraw.MemFreeAsync(d, e.Busy); err != nil {
			return nil, nil, err
		}
		if err := cudaraw.StreamSynchronize(e.Busy); err != nil {
			return nil, nil, err
		}
		return func() error { return cudaraw.MemPoolDestroy(p) }, noCleanup, nil
	}}},
	"cuCtxDestroy_v2": {{Make: func(e *Env) (func() error, func(), error) {
		var c cudaraw.CUcontext
		if err := cudaraw.CtxCreate(&c, nil, 0, e.Dev); err != nil {
			return nil, nil, err
		}
		// cuCtxCreate made c current; the primary context goes back on this thread.
		if err := cudaraw.CtxSetCurrent(e.Ctx); err != nil {
			return nil, nil, err
		}
		return func() error { return cudaraw.CtxDestroy(c) }, noCleanup, nil
	}}},

	// ---- cublas ----
	"cublasDestroy_v2": {{Make: func(e *Env) (func() error, func(), error) {
		var h cublasraw.CublasHandle
		if err := cublasraw.Create(&h); err != nil {
			return nil, nil, err
		}
		return func() error { return cublasraw.Destroy(h) }, noCleanup, nil
	}}},

	// ---- cufft ----
	"cufftDestroy": {{Make: func(e *Env) (func() error, func(), error) {
		var p cufftraw.CufftHandle
		if err := cufftraw.Plan1d(&p, 1024, cufftraw.CUFFT_C2C, 1); err != nil {
			return nil, nil, err
		}
		return func() error { return cufftraw.Destroy(p) }, noCleanup, nil
	}}},

	// ---- curand ----
	"curandDestroyGenerator": {{Make: func(e *Env) (func() error, func(), error) {
		buf, free, err := deviceBuffer(4096)
		if err != nil {
			return nil, nil, err
		}
		var g curandraw.CurandGenerator
		if err := curandraw.CreateGenerator(&g, curandraw.CURAND_RNG_PSEUDO_DEFAULT); err != nil {
			free()
			return nil, nil, err
		}
		if err := curandraw.GenerateUniform(g, (*float32)(buf), 1024); err != nil { // used once
			free()
			return nil, nil, err
		}
		if err := cudaraw.CtxSynchronize(); err != nil {
			free()
			return nil, nil, err
		}
		return func() error { return curandraw.DestroyGenerator(g) }, free, nil
	}}},

	// ---- cusparse ----
	"cusparseDestroy": {{Make: func(e *Env) (func() error, func(), error) {
		var h cusparseraw.CusparseHandle
		if err := cusparseraw.Create(&h); err != nil {
			return nil, nil, err
		}
		return func() error { return cusparseraw.Destroy(h) }, noCleanup, nil
	}}},
	"cusparseDestroySpMat": {{Make: func(e *Env) (func() error, func(), error) {
		buf, free, err := deviceBuffer(256)
		if err != nil {
			return nil, nil, err
		}
		var m cusparseraw.CusparseSpMatDescr
		if err := cusparseraw.CreateCsr(&m, 4, 4, 0, buf, buf, buf, cusparseraw.CUSPARSE_INDEX_32I, cusparseraw.CUSPARSE_INDEX_32I,
			cusparseraw.CUSPARSE_INDEX_BASE_ZERO, cudaraw.CUDA_R_32F); err != nil {
			free()
			return nil, nil, err
		}
		return func() error { return cusparseraw.DestroySpMat(m) }, free, nil
	}}},
	"cusparseDestroyDnVec": {{Make: func(e *Env) (func() error, func(), error) {
		buf, free, err := deviceBuffer(256)
		if err != nil {
			return nil, nil, err
		}
		var v cusparseraw.CusparseDnVecDescr
		if err := cusparseraw.CreateDnVec(&v, 4, buf, cudaraw.CUDA_R_32F); err != nil {
			free()
			return nil, nil, err
		}
		return func() error { return cusparseraw.DestroyDnVec(v) }, free, nil
	}}},
	"cusparseDestroyDnMat": {{Make: func(e *Env) (func() error, func(), error) {
		buf, free, err := deviceBuffer(256)
		if err != nil {
			return nil, nil, err
		}
		var m cusparseraw.CusparseDnMatDescr
		if err := cusparseraw.CreateDnMat(&m, 4, 4, 4, buf, cudaraw.CUDA_R_32F, cusparseraw.CUSPARSE_ORDER_COL); err != nil {
			free()
			return nil, nil, err
		}
		return func() error { return cusparseraw.DestroyDnMat(m) }, free, nil
	}}},
	"cusparseDestroySpVec": {{Make: func(e *Env) (func() error, func(), error) {
		buf, free, err := deviceBuffer(256)
		if err != nil {
			return nil, nil, err
		}
		var v cusparseraw.CusparseSpVecDescr
		if err := cusparseraw.CreateSpVec(&v, 4, 0, buf, buf, cusparseraw.CUSPARSE_INDEX_32I, cusparseraw.CUSPARSE_INDEX_BASE_ZERO, cudaraw.CUDA_R_32F); err != nil {
			free()
			return nil, nil, err
		}
		return func() error { return cusparseraw.DestroySpVec(v) }, free, nil
	}}},

	// ---- cudnn ----
	"cudnnDestroy": {{Make: func(e *Env) (func() error, func(), error) {
		var h cudnnraw.CudnnHandle
		if err := cudnnraw.Create(&h); err != nil {
			return nil, nil, err
		}
		return func() error { return cudnnraw.Destroy(h) }, noCleanup, nil
	}}},
	"cudnnDestroyTensorDescriptor": {{Make: func(e *Env) (func() error, func(), error) {
		var t cudnnraw.CudnnTensorDescriptor
		if err := cudnnraw.CreateTensorDescriptor(&t); err != nil {
			return nil, nil, err
		}
		return func() error { return cudnnraw.DestroyTensorDescriptor(t) }, noCleanup, nil
	}}},
	"cudnnDestroyActivationDescriptor": {{Make: func(e *Env) (func() error, func(), error) {
		var a cudnnraw.CudnnActivationDescriptor
		if err := cudnnraw.CreateActivationDescriptor(&a); err != nil {
			return nil, nil, err
		}
		return func() error { return cudnnraw.DestroyActivationDescriptor(a) }, noCleanup, nil
	}}},
	"cudnnDestroyFilterDescriptor": {{Make: func(e *Env) (func() error, func(), error) {
		var f cudnnraw.CudnnFilterDescriptor
		if err := cudnnraw.CreateFilterDescriptor(&f); err != nil {
			return nil, nil, err
		}
		return func() error { return cudnnraw.DestroyFilterDescriptor(f) }, noCleanup, nil
	}}},
	"cudnnDestroyConvolutionDescriptor": {{Make: func(e *Env) (func() error, func(), error) {
		var c cudnnraw.CudnnConvolutionDescriptor
		if err := cudnnraw.CreateConvolutionDescriptor(&c); err != nil {
			return nil, nil, err
		}
		return func() error { return cudnnraw.DestroyConvolutionDescriptor(c) }, noCleanup, nil
	}}},
}

// Reference is a call that is not a release but whose behaviour is known: cuCtxSynchronize
// waits for the spin kernel (blocking) and holds no lock that other threads' launches need.
var references = []struct {
	Name     string
	Blocking bool
	Probe    Probe
}{
	{"cuCtxSynchronize (reference)", true, Probe{Make: func(e *Env) (func() error, func(), error) {
		return cudaraw.CtxSynchronize, noCleanup, nil
	}}},
}

// captureEmpty captures one empty-kernel launch into a graph on a new stream.
func captureEmpty(e *Env) (cudaraw.CUgraph, cudaraw.CUstream, error) {
	var s cudaraw.CUstream
	if err := cudaraw.StreamCreate(&s, uint32(cudaraw.CU_STREAM_NON_BLOCKING)); err != nil {
		return 0, 0, err
	}
	if err := cudaraw.StreamBeginCapture(s, cudaraw.CU_STREAM_CAPTURE_MODE_RELAXED); err != nil {
		return 0, 0, err
	}
	if err := cudaraw.LaunchKernel(e.Empty, 1, 1, 1, 1, 1, 1, 0, s, nil, nil); err != nil {
		return 0, 0, err
	}
	var g cudaraw.CUgraph
	if err := cudaraw.StreamEndCapture(s, &g); err != nil {
		return 0, 0, err
	}
	return g, s, nil
}

// deviceBuffer allocates size bytes of zeroed device memory and returns its address as a
// pointer (device memory is never Go memory) and a function that frees it (cuMemFree waits for
// the GPU, so it runs in a probe's cleanup, once the spin kernel is over).
func deviceBuffer(size uint64) (unsafe.Pointer, func(), error) {
	var d cudaraw.CUdeviceptr
	if err := cudaraw.MemAlloc(&d, size); err != nil {
		return nil, nil, err
	}
	if err := cudaraw.MemsetD8(d, 0, size); err != nil {
		_ = cudaraw.MemFree(d)
		return nil, nil, err
	}
	return *(*unsafe.Pointer)(unsafe.Pointer(&d)), func() { _ = cudaraw.MemFree(d) }, nil
}
