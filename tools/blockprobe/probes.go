package main

import (
	"unsafe"

	"github.com/gocuda/gocuda/cublas"
	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cudnn"
	"github.com/gocuda/gocuda/cufft"
	"github.com/gocuda/gocuda/curand"
	"github.com/gocuda/gocuda/cusparse"
	"github.com/gocuda/gocuda/internal/rawctx"
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
		var s cuda.CUstream
		if err := cuda.StreamCreate(&s, uint32(cuda.CU_STREAM_NON_BLOCKING)); err != nil {
			return nil, nil, err
		}
		return func() error { return cuda.StreamDestroy(s) }, noCleanup, nil
	}}},
	"cuEventDestroy_v2": {{Make: func(e *Env) (func() error, func(), error) {
		var ev cuda.CUevent
		if err := cuda.EventCreate(&ev, uint32(cuda.CU_EVENT_DISABLE_TIMING)); err != nil {
			return nil, nil, err
		}
		return func() error { return cuda.EventDestroy(ev) }, noCleanup, nil
	}}},
	"cuModuleUnload": {{Make: func(e *Env) (func() error, func(), error) {
		var m cuda.CUmodule
		img := rawctx.CString(kernelsPTX)
		if err := cuda.ModuleLoadData(&m, unsafe.Pointer(&img[0])); err != nil {
			return nil, nil, err
		}
		return func() error { return cuda.ModuleUnload(m) }, noCleanup, nil
	}}},
	"cuLibraryUnload": {{Make: func(e *Env) (func() error, func(), error) {
		var l cuda.CUlibrary
		img := rawctx.CString(kernelsPTX)
		if err := cuda.LibraryLoadData(&l, unsafe.Pointer(&img[0]), nil, nil, 0, nil, nil, 0); err != nil {
			return nil, nil, err
		}
		return func() error { return cuda.LibraryUnload(l) }, noCleanup, nil
	}}},
	"cuLinkDestroy": {{Make: func(e *Env) (func() error, func(), error) {
		var st cuda.CUlinkState
		if err := cuda.LinkCreate(0, nil, nil, &st); err != nil {
			return nil, nil, err
		}
		return func() error { return cuda.LinkDestroy(st) }, noCleanup, nil
	}}},
	"cuGraphDestroy": {{Make: func(e *Env) (func() error, func(), error) {
		g, s, err := captureEmpty(e)
		if err != nil {
			return nil, nil, err
		}
		return func() error { return cuda.GraphDestroy(g) }, func() { _ = cuda.StreamDestroy(s) }, nil
	}}},
	"cuGraphExecDestroy": {{Make: func(e *Env) (func() error, func(), error) {
		g, s, err := captureEmpty(e)
		if err != nil {
			return nil, nil, err
		}
		var ge cuda.CUgraphExec
		if err := cuda.GraphInstantiateWithFlags(&ge, g, 0); err != nil {
			return nil, nil, err
		}
		if err := cuda.GraphDestroy(g); err != nil {
			return nil, nil, err
		}
		if err := cuda.GraphLaunch(ge, s); err != nil { // used once
			return nil, nil, err
		}
		if err := cuda.StreamSynchronize(s); err != nil {
			return nil, nil, err
		}
		return func() error { return cuda.GraphExecDestroy(ge) }, func() { _ = cuda.StreamDestroy(s) }, nil
	}}},
	"cuMemFree_v2": {
		{Make: func(e *Env) (func() error, func(), error) {
			var d cuda.CUdeviceptr
			if err := cuda.MemAlloc(&d, 1<<20); err != nil {
				return nil, nil, err
			}
			return func() error { return cuda.MemFree(d) }, noCleanup, nil
		}},
		{Variant: "managed", Make: func(e *Env) (func() error, func(), error) {
			var d cuda.CUdeviceptr
			if err := cuda.MemAllocManaged(&d, 1<<20, uint32(cuda.CU_MEM_ATTACH_GLOBAL)); err != nil {
				return nil, nil, err
			}
			return func() error { return cuda.MemFree(d) }, noCleanup, nil
		}},
	},
	"cuMemPoolDestroy": {{Make: func(e *Env) (func() error, func(), error) {
		props := cuda.CUmemPoolProps{
			AllocType: cuda.CU_MEM_ALLOCATION_TYPE_PINNED,
			Location:  cuda.CUmemLocation{Type: cuda.CU_MEM_LOCATION_TYPE_DEVICE, Id: int32(e.Dev)},
		}
		var p cuda.CUmemoryPool
		if err := cuda.MemPoolCreate(&p, &props); err != nil {
			return nil, nil, err
		}
		thr := ^uint64(0)
		if err := cuda.MemPoolSetAttribute(p, cuda.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, unsafe.Pointer(&thr)); err != nil {
			return nil, nil, err
		}
		var d cuda.CUdeviceptr // the pool keeps 1 MiB reserved
		if err := cuda.MemAllocFromPoolAsync(&d, 1<<20, p, e.Busy); err != nil {
			return nil, nil, err
		}
		if err := cuda.MemFreeAsync(d, e.Busy); err != nil {
			return nil, nil, err
		}
		if err := cuda.StreamSynchronize(e.Busy); err != nil {
			return nil, nil, err
		}
		return func() error { return cuda.MemPoolDestroy(p) }, noCleanup, nil
	}}},
	"cuCtxDestroy_v2": {{Make: func(e *Env) (func() error, func(), error) {
		var c cuda.CUcontext
		if err := cuda.CtxCreate(&c, nil, 0, e.Dev); err != nil {
			return nil, nil, err
		}
		// cuCtxCreate made c current; the primary context goes back on this thread.
		if err := cuda.CtxSetCurrent(e.Ctx); err != nil {
			return nil, nil, err
		}
		return func() error { return cuda.CtxDestroy(c) }, noCleanup, nil
	}}},

	// ---- cublas ----
	"cublasDestroy_v2": {{Make: func(e *Env) (func() error, func(), error) {
		var h cublas.CublasHandle
		if err := cublas.Create(&h); err != nil {
			return nil, nil, err
		}
		return func() error { return cublas.Destroy(h) }, noCleanup, nil
	}}},

	// ---- cufft ----
	"cufftDestroy": {{Make: func(e *Env) (func() error, func(), error) {
		var p cufft.CufftHandle
		if err := cufft.Plan1d(&p, 1024, cufft.CUFFT_C2C, 1); err != nil {
			return nil, nil, err
		}
		return func() error { return cufft.Destroy(p) }, noCleanup, nil
	}}},

	// ---- curand ----
	"curandDestroyGenerator": {{Make: func(e *Env) (func() error, func(), error) {
		buf, free, err := deviceBuffer(4096)
		if err != nil {
			return nil, nil, err
		}
		var g curand.CurandGenerator
		if err := curand.CreateGenerator(&g, curand.CURAND_RNG_PSEUDO_DEFAULT); err != nil {
			free()
			return nil, nil, err
		}
		if err := curand.GenerateUniform(g, (*float32)(buf), 1024); err != nil { // used once
			free()
			return nil, nil, err
		}
		if err := cuda.CtxSynchronize(); err != nil {
			free()
			return nil, nil, err
		}
		return func() error { return curand.DestroyGenerator(g) }, free, nil
	}}},

	// ---- cusparse ----
	"cusparseDestroy": {{Make: func(e *Env) (func() error, func(), error) {
		var h cusparse.CusparseHandle
		if err := cusparse.Create(&h); err != nil {
			return nil, nil, err
		}
		return func() error { return cusparse.Destroy(h) }, noCleanup, nil
	}}},
	"cusparseDestroySpMat": {{Make: func(e *Env) (func() error, func(), error) {
		buf, free, err := deviceBuffer(256)
		if err != nil {
			return nil, nil, err
		}
		var m cusparse.CusparseSpMatDescr
		if err := cusparse.CreateCsr(&m, 4, 4, 0, buf, buf, buf, cusparse.CUSPARSE_INDEX_32I, cusparse.CUSPARSE_INDEX_32I,
			cusparse.CUSPARSE_INDEX_BASE_ZERO, cuda.CUDA_R_32F); err != nil {
			free()
			return nil, nil, err
		}
		return func() error { return cusparse.DestroySpMat(m) }, free, nil
	}}},
	"cusparseDestroyDnVec": {{Make: func(e *Env) (func() error, func(), error) {
		buf, free, err := deviceBuffer(256)
		if err != nil {
			return nil, nil, err
		}
		var v cusparse.CusparseDnVecDescr
		if err := cusparse.CreateDnVec(&v, 4, buf, cuda.CUDA_R_32F); err != nil {
			free()
			return nil, nil, err
		}
		return func() error { return cusparse.DestroyDnVec(v) }, free, nil
	}}},
	"cusparseDestroyDnMat": {{Make: func(e *Env) (func() error, func(), error) {
		buf, free, err := deviceBuffer(256)
		if err != nil {
			return nil, nil, err
		}
		var m cusparse.CusparseDnMatDescr
		if err := cusparse.CreateDnMat(&m, 4, 4, 4, buf, cuda.CUDA_R_32F, cusparse.CUSPARSE_ORDER_COL); err != nil {
			free()
			return nil, nil, err
		}
		return func() error { return cusparse.DestroyDnMat(m) }, free, nil
	}}},
	"cusparseDestroySpVec": {{Make: func(e *Env) (func() error, func(), error) {
		buf, free, err := deviceBuffer(256)
		if err != nil {
			return nil, nil, err
		}
		var v cusparse.CusparseSpVecDescr
		if err := cusparse.CreateSpVec(&v, 4, 0, buf, buf, cusparse.CUSPARSE_INDEX_32I, cusparse.CUSPARSE_INDEX_BASE_ZERO, cuda.CUDA_R_32F); err != nil {
			free()
			return nil, nil, err
		}
		return func() error { return cusparse.DestroySpVec(v) }, free, nil
	}}},

	// ---- cudnn ----
	"cudnnDestroy": {{Make: func(e *Env) (func() error, func(), error) {
		var h cudnn.CudnnHandle
		if err := cudnn.Create(&h); err != nil {
			return nil, nil, err
		}
		return func() error { return cudnn.Destroy(h) }, noCleanup, nil
	}}},
	"cudnnDestroyTensorDescriptor": {{Make: func(e *Env) (func() error, func(), error) {
		var t cudnn.CudnnTensorDescriptor
		if err := cudnn.CreateTensorDescriptor(&t); err != nil {
			return nil, nil, err
		}
		return func() error { return cudnn.DestroyTensorDescriptor(t) }, noCleanup, nil
	}}},
	"cudnnDestroyActivationDescriptor": {{Make: func(e *Env) (func() error, func(), error) {
		var a cudnn.CudnnActivationDescriptor
		if err := cudnn.CreateActivationDescriptor(&a); err != nil {
			return nil, nil, err
		}
		return func() error { return cudnn.DestroyActivationDescriptor(a) }, noCleanup, nil
	}}},
	"cudnnDestroyFilterDescriptor": {{Make: func(e *Env) (func() error, func(), error) {
		var f cudnn.CudnnFilterDescriptor
		if err := cudnn.CreateFilterDescriptor(&f); err != nil {
			return nil, nil, err
		}
		return func() error { return cudnn.DestroyFilterDescriptor(f) }, noCleanup, nil
	}}},
	"cudnnDestroyConvolutionDescriptor": {{Make: func(e *Env) (func() error, func(), error) {
		var c cudnn.CudnnConvolutionDescriptor
		if err := cudnn.CreateConvolutionDescriptor(&c); err != nil {
			return nil, nil, err
		}
		return func() error { return cudnn.DestroyConvolutionDescriptor(c) }, noCleanup, nil
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
		return cuda.CtxSynchronize, noCleanup, nil
	}}},
}

// captureEmpty captures one empty-kernel launch into a graph on a new stream.
func captureEmpty(e *Env) (cuda.CUgraph, cuda.CUstream, error) {
	var s cuda.CUstream
	if err := cuda.StreamCreate(&s, uint32(cuda.CU_STREAM_NON_BLOCKING)); err != nil {
		return 0, 0, err
	}
	if err := cuda.StreamBeginCapture(s, cuda.CU_STREAM_CAPTURE_MODE_RELAXED); err != nil {
		return 0, 0, err
	}
	if err := cuda.LaunchKernel(e.Empty, 1, 1, 1, 1, 1, 1, 0, s, nil, nil); err != nil {
		return 0, 0, err
	}
	var g cuda.CUgraph
	if err := cuda.StreamEndCapture(s, &g); err != nil {
		return 0, 0, err
	}
	return g, s, nil
}

// deviceBuffer allocates size bytes of zeroed device memory and returns its address as a
// pointer (device memory is never Go memory) and a function that frees it (cuMemFree waits for
// the GPU, so it runs in a probe's cleanup, once the spin kernel is over).
func deviceBuffer(size uint64) (unsafe.Pointer, func(), error) {
	var d cuda.CUdeviceptr
	if err := cuda.MemAlloc(&d, size); err != nil {
		return nil, nil, err
	}
	if err := cuda.MemsetD8(d, 0, size); err != nil {
		_ = cuda.MemFree(d)
		return nil, nil, err
	}
	return *(*unsafe.Pointer)(unsafe.Pointer(&d)), func() { _ = cuda.MemFree(d) }, nil
}
