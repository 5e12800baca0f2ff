// Package cuda binds the CUDA driver API for Go: devices, contexts, streams, events,
// memory, modules and kernel launches.
//
// # The idiomatic API
//
// Most programs need only these; everything else in the package is the raw layer
// (below). Each task has one way:
//
//	Devices     Device(n), DeviceCount, Device.Name, Device.Attribute, Device.ComputeCapability
//	Contexts    Device.Context (the primary context), NewContext, Context.Synchronize, Context.Close
//	Limits      Context.SetCacheLimit, Context.SetGCThreshold, Context.SetWrapLimit; MemoryStatus
//	Streams     Context.NewStream (WithPriority, WithLegacySync), Stream.Synchronize, Stream.Query,
//	            Stream.WaitEvent, Stream.Close
//	Events      Context.NewEvent, Event.Record, Event.Synchronize, Event.Query, Elapsed, Event.Close
//	Memory      AllocFor[T](stream, n) and Context.Alloc (device), Context.AllocHost (pinned),
//	            Context.AllocManaged (unified), Wrap (Go memory); DeviceBuffer.Slice (views);
//	            HostSlice (a host-visible buffer as a []T); Close on each
//	Copies      CopyToDevice(Async), CopyFromDevice(Async), Copy(Async), DeviceBuffer.Memset8/16/32(Async)
//	Kernels     Context.LoadModule, Module.Function, Module.Global, Function.Launch, LaunchBatch
//	Errors      ErrClosed, ErrInvalidArgument, ErrWrongContext, ErrNoDriver, and the Result
//	            sentinels (ErrOutOfMemory, ...), all matched with errors.Is
//
// Everything starts from a context: ctx, err := cuda.Device(0).Context(). Calls make
// their object's context current themselves, inside the same cgo call, so goroutines
// never need runtime.LockOSThread, and the driver is initialized at first use.
//
// # Close and concurrency
//
// Every object is safe for concurrent use, and Close may race with anything: each
// operation holds the objects it passes to the driver (its context, stream, event,
// module and memory arguments) until its work is queued. A concurrent Close waits for
// that (never for the GPU), and an operation that comes after Close fails with an
// error matching ErrClosed: the driver never sees a destroyed handle or freed memory.
//
// Close is the one way to release anything. Closing an object twice, or closing a
// nil one, returns an error matching both ErrClosed and resource.ErrReleased (the same
// in every gocuda package); closing an object whose context was closed returns nil,
// as the object went with its context. Objects keep their Context alive. One dropped
// without Close is released through package resource, never on the runtime's
// finalizer goroutine: releases that return promptly (cuStreamDestroy, cuEventDestroy,
// cuMemFreeAsync) run soon on an ordinary goroutine, those that may wait for the GPU
// (cuModuleUnload, cuMemHostUnregister, cuCtxDestroy) in resource.Reclaim, which the
// allocator runs when the device is out of memory.
//
// # Memory and launches
//
// DeviceBuffer memory comes from the device's stream-ordered pool, allocated on a
// stream: work on another stream that first uses the buffer waits for the allocation.
// A buffer closed on the stream that last used it leaves its block (up to 1 MiB) in
// that stream's cache, and the stream's next allocation of that size class takes it
// back without a driver call. HostBuffer and ManagedBuffer come from pinned and
// managed pools behind a cache of blocks whose last GPU use has finished. A buffer of
// AllocFor[T] has element type T: typed copies must use T, and Slice views its
// elements. Each context's SetCacheLimit bounds its caches (0 turns them off);
// MemoryStatus reports them.
//
// Function.Launch queues one kernel per call into the driver; LaunchBatch queues many
// with one call, for code that launches several small kernels at a time.
//
// # The raw layer
//
// The raw layer (zz_generated_*.go) has every function of cuda.h as a Go function
// named after it without the cu prefix and ABI suffix (cuMemAlloc_v2 is MemAlloc,
// cuCtxCreate_v4 is CtxCreate), binding exactly the symbol a C program compiled against
// the same headers calls. C types keep their spelling (CUstream, CUdeviceptr), constants
// their C names. Calls return nil or a Result, an error matching sentinels such as
// ErrOutOfMemory. Raw calls run in whatever context is current on the calling thread,
// as in C. Owner types (OwnedGraph, OwnedMemPool, ...) release raw handles of the
// resources that have no idiomatic type; a resource with one (a stream is a Stream)
// has no owner type.
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
