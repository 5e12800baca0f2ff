// Package cuda binds the CUDA driver API for Go: devices, contexts, streams, events,
// memory, modules and kernel launches.
//
// # Two layers
//
// The raw layer (zz_generated_*.go) has every function of cuda.h as a Go function
// named after it without the cu prefix and ABI suffix (cuMemAlloc_v2 is MemAlloc,
// cuCtxCreate_v4 is CtxCreate), binding exactly the symbol a C program compiled against
// the same headers calls. C types keep their spelling (CUstream, CUdeviceptr), constants
// their C names. Calls return nil or a Result, an error matching sentinels such as
// ErrOutOfMemory. Raw calls run in whatever context is current on the calling thread,
// as in C.
//
// The idiomatic layer (Device, Context, Stream, Event, and the memory and module
// types) is what most programs use. Its calls make their object's context current
// themselves, inside the same cgo call, so goroutines never need runtime.LockOSThread,
// and the driver is initialized at first use. Every handle has a Close; one dropped
// without Close is released through package resource, never on the runtime's
// finalizer goroutine: releases that return promptly (cuStreamDestroy, cuEventDestroy,
// cuMemFreeAsync) run soon on an ordinary goroutine, those that may wait for the GPU
// (cuModuleUnload, cuMemHostUnregister) in resource.Reclaim, which the allocator runs
// when the device is out of memory.
//
// # Close and concurrency
//
// Every object is safe for concurrent use, and Close may race with anything: each
// operation holds the objects it passes to the driver (its context, stream, event,
// module and memory arguments) until its work is queued. A concurrent Close waits for
// that (never for the GPU), and an operation that comes after Close fails with an
// error matching ErrClosed: the driver never sees a destroyed handle or freed memory.
// Closing an object twice returns ErrClosed; closing an object whose context was
// closed returns nil, as the object went with its context. Objects keep their Context
// alive, and a Context of NewContext dropped without Close is destroyed in
// resource.Reclaim.
//
// # Memory and launches
//
// DeviceBuffer memory comes from the device's stream-ordered pool; a buffer closed on
// the stream that last used it leaves its block (up to 1 MiB) in that stream's cache,
// and the stream's next allocation of that size class takes it back without a driver
// call. HostBuffer and ManagedBuffer come from pinned and managed pools behind a cache
// of blocks whose last GPU use has finished. SetCacheLimit bounds the caches (0 turns
// them off); MemoryStatus reports them.
//
// Function.Launch queues one kernel per call into the driver; LaunchBatch queues many
// with one call, for code that launches several small kernels at a time.
//
// # Loading
//
// libcuda.so.1 is opened at first use ($GOCUDA_CUDA_LIB overrides it). Without it,
// idiomatic calls return ErrNoDriver wrapping a *dl.LibraryError, and nothing panics.
//
// Shared types: cudaDataType, libraryPropertyType, cuComplex and cuDoubleComplex are
// defined here once (CudaDataType, LibraryPropertyType, CuComplex, CuDoubleComplex) and
// used by the other libraries' packages; cudaStream_t is CUstream.
package cuda
