// Package dl loads the CUDA shared libraries that gocuda binds at run time,
// with dlopen and dlsym, so that gocuda has no link-time dependency on any
// CUDA library: building and testing gocuda needs only Go and a C compiler,
// and a program that uses gocuda starts (and can report a useful error) on a
// machine without CUDA.
//
// # Lazy loading
//
// A [Library] names a shared library by its soname (for example
// "libcublas.so.13"). [NewLibrary] opens nothing and touches no file, so
// package-level variables such as
//
//	var libcublas = dl.NewLibrary("cublas", "libcublas.so.13", "GOCUDA_CUBLAS_LIB")
//	var procCublasSgemm_v2 = libcublas.NewProc("cublasSgemm_v2")
//
// can never make package initialisation fail. The library is opened once, at
// its first use: the first [Proc.Addr] or [Proc.Find] of any of its procs, or
// an explicit [Library.Open] or [Library.Path]. The outcome, a handle or a
// [*LibraryError], is cached for the life of the process; a library is never
// closed. Each [Proc] resolves its symbol with dlsym once, at its first use,
// and caches the address or the [*SymbolError]. After a successful
// resolution [Proc.Addr] costs one atomic load and a comparison: no lock and
// no allocation. All methods are safe for concurrent use.
//
// Libraries are opened with RTLD_LAZY|RTLD_LOCAL. RTLD_LAZY defers the
// binding of each library's own function references until they are first
// called, which keeps opening the very large CUDA libraries (cuBLAS, cuDNN)
// cheap; a missing dependency library is still reported by dlopen either way.
// RTLD_LOCAL keeps the libraries' symbols out of the global namespace, so
// they cannot interpose on each other or on the host program's symbols;
// gocuda never needs global visibility because every symbol is looked up
// with dlsym on the handle of the library that defines it.
//
// # Environment overrides
//
// Each library has an environment variable that, when set to a non-empty
// value, is passed to dlopen instead of the soname: an absolute path to a
// particular build of the library, or another name for the dynamic linker to
// search for. The variable is read when the library is opened, not when the
// [Library] value is made. gocuda uses these names:
//
//	GOCUDA_CUDA_LIB      CUDA driver API   (default libcuda.so.1)
//	GOCUDA_CUBLAS_LIB    cuBLAS            (default libcublas.so.13)
//	GOCUDA_CUFFT_LIB     cuFFT             (default libcufft.so.12)
//	GOCUDA_CURAND_LIB    cuRAND            (default libcurand.so.10)
//	GOCUDA_CUSPARSE_LIB  cuSPARSE          (default libcusparse.so.12)
//	GOCUDA_CUDNN_LIB     cuDNN             (default libcudnn.so.9)
//	GOCUDA_CUSOLVER_LIB  cuSOLVER          (default libcusolver.so.12)
//	GOCUDA_NVRTC_LIB     NVRTC             (default libnvrtc.so.13)
//	GOCUDA_NCCL_LIB      NCCL              (default libnccl.so.2)
//	GOCUDA_NVML_LIB      NVML              (default libnvidia-ml.so.1)
//	GOCUDA_CUPTI_LIB     CUPTI             (default libcupti.so.13)
//
// # Errors
//
// Failures are returned as values, never as panics: a library that cannot be
// opened yields a [*LibraryError] (errors.Is(err, [ErrLibraryNotFound]) is
// true) and a symbol the library lacks yields a [*SymbolError]
// (errors.Is(err, [ErrSymbolNotFound]) is true). Both can be inspected with
// errors.As. When a proc's library failed to open, its Addr returns that
// library's *LibraryError, the same value every time.
//
// # Calling a resolved function
//
// Go cannot call a C function pointer directly; generated code passes the
// address from [Proc.Addr] to a small C trampoline in its cgo preamble that
// casts it to the right function type and calls it:
//
//	static cublasStatus_t gocuda_call_cublasSgemm_v2(uintptr_t fn, ...) {
//		return ((cublasStatus_t (*)(...))fn)(...);
//	}
//
// This costs the ordinary cgo call overhead plus one indirect call.
package dl
