// Package cuda binds the CUDA driver API for Go: devices, contexts, streams, events,
// memory, modules and kernel launches.
//
// # The idiomatic API
//
// Each task has one way:
//
//	Devices     Device(n), DeviceCount, Device.Name, Device.Attribute, Device.ComputeCapability
//	Contexts    Device.Context (the primary context), NewContext, Context.Synchronize, Context.Close
//	Limits      Context.SetCacheLimit, Context.SetGCThreshold, Context.SetWrapLimit,
//	            Context.SetStreamLimit; MemoryStatus
//	Streams     Context.WithStream (a pooled stream carried in a context.Context; StreamFromContext),
//	            Context.AcquireStream (pooled, Close gives it back), Context.NewStream (long-lived);
//	            WithPriority (High, Normal, Low), WithLegacySync; Stream.Synchronize(Context),
//	            Stream.Query, Stream.WaitEvent, Stream.Close
//	Events      Context.NewEvent, Event.Record, Event.Synchronize, Event.Query, Elapsed, Event.Close
//	Memory      AllocFor[T](stream, n) and Context.Alloc (device), Context.AllocHost (pinned),
//	            Context.AllocManaged (unified), Wrap (Go memory); DeviceBuffer.Slice (views);
//	            HostSlice (a host-visible buffer as a []T); Close on each
//	Copies      CopyToDevice(Async), CopyFromDevice(Async), Copy(Async), DeviceBuffer.Memset8/16/32(Async)
//	Kernels     Context.LoadModule, Module.Function, Module.Global, Function.Launch (In marks
//	            read-only arguments), Function.LaunchWith (LaunchConfig: cooperative, clusters,
//	            programmatic dependent launch, priority), MaxActiveBlocks, SuggestedBlockSize,
//	            LaunchBatch
//	Hand-off    automatic; Synchronize(Context) on each buffer; EnableStreamCheck
//	            (GOCUDA_STREAMCHECK=1)
//	Raw work    Enqueue (Reads, Writes) for calls into other libraries, the raw layer and
//	            cgo, with the addresses of Ptr or DevicePtr[T]; Context.Locked (a context
//	            current on a locked thread)
//	Errors      ErrClosed, ErrInvalidArgument, ErrWrongContext, ErrNoDriver, ErrOutOfMemory,
//	            and the driver's Result sentinels (cudaraw.ErrIllegalAddress, ...), all
//	            matched with errors.Is
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
// # Streams from goroutines
//
// A goroutine that has GPU work to do takes a stream from the context's pool for its
// duration, and passes it down the call tree in its context.Context:
//
//	err := ctx.WithStream(cctx, func(cctx context.Context, s *cuda.Stream) error {
//		return step(cctx) // deep inside: s := cuda.StreamFromContext(cctx)
//	})
//
// The pool (one per context, priority and kind) lends a stream that no one else holds
// and whose earlier work has finished, or makes one; it lends at most
// Context.SetStreamLimit at a time (acquirers then wait, honouring their
// context.Context) and keeps at most 32 released streams for reuse. A lent Stream is
// closed once given back; the stream moves to a new generation, so that memory used
// in an earlier one knows that work finished. Nested WithStream calls share the
// caller's stream; one asking for another priority gets a stream of that priority
// (switching back reuses the caller's), ordered after the caller's work and (when it
// succeeds) before the caller's next.
// Long-lived streams come from NewStream. Host waits that take a context.Context
// (Stream.SynchronizeContext, the buffers' SynchronizeContext, AcquireStream) return
// when it is done.
//
// # Hand-off between streams
//
// Memory used on several streams is ordered on the device: every operation the
// package queues (launch, copy, memset, batch) first makes its stream wait, with an
// event (cuStreamWaitEvent, never a host synchronization), for the earlier
// conflicting uses of each buffer on other streams. Reads don't serialize: a read
// waits for the last write only, a write for the last write and every read since.
// Copies know what they read; a kernel argument counts as written unless marked with
// In. The free of a buffer waits for every stream that used it since its last write.
// Hand-off works per allocation: views of one buffer used on different streams are
// ordered as if they overlapped. Uses that race (no happens-before in Go between
// them) are ordered as they come, and never freed early.
//
// Work the package does not see (the raw layer, another library, cgo) is queued
// through Enqueue, which orders it as the package's own operations are: it is the
// one way to hand a buffer's address (Ptr, or DevicePtr typed) to raw code.
// Synchronize waits on the host for every use of a buffer (do it before the host
// reads pinned or unified memory that the GPU wrote, or before code that orders
// nothing uses the address). Ptr itself orders nothing: with the stream checker on
// (GOCUDA_STREAMCHECK=1 or EnableStreamCheck), an address from Ptr that is launched
// on another stream while earlier work on it is outstanding, with no Enqueue ordering
// it there, is reported with both call sites.
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
// with one call, for code that launches several small kernels at a time;
// Function.LaunchWith is Launch with what cuLaunchKernelEx adds (cooperative grids,
// thread block clusters, programmatic dependent launch, a priority per launch). Either
// raises a function's dynamic shared memory limit when a launch asks for more than
// 48 KiB.
//
// # Graphs
//
// Context.Capture records the work a function queues on a capture stream into a
// Graph; Graph.Instantiate makes an Exec, whose Launch replays it on any stream with
// one call into the driver. A graph leases every buffer its operations use: Close (or
// the garbage collector) shuts a leased buffer for new operations at once, but its
// memory is freed only after the graph and its executables let go of it, after their
// last replay. Allocations in a capture come from the pool outside the graph, copies
// from Go slices are snapshots in pinned memory the graph owns, and operations that
// would invalidate a capture (synchronizing the stream, copying into Go memory) fail
// with a *CaptureError. Nothing is released while a capture is in progress, so a
// Close on another goroutine never invalidates it. A module whose kernels a graph
// replays stays loaded until the graph lets go of it.
//
// Graphs can also be built by hand: Context.NewGraph, then AddMemset, AddCopy,
// AddKernel, AddChild, AddEventRecord, AddEventWait, AddEmpty and CaptureInto, each
// after the nodes it depends on. Events a graph records or waits for are leased like
// memory: their Close is postponed until the graph lets go of them.
// Exec.Update re-targets an executable to another capture of the same operations,
// Exec.SetKernelArgs one kernel node, and an ExecCache does the former per call.
//
// # The raw layer
//
// Package cudaraw binds every function of cuda.h with its C name (cuMemAlloc_v2 is
// cudaraw.MemAlloc), for what this package does not cover, and defines the types the
// libraries share (cudaraw.CUstream, cudaraw.CUdeviceptr). Raw calls run in whatever
// context is current on the calling thread, as in C: Context.Locked runs a function
// with a context current on a locked thread, DevicePtr gives a buffer's address as the
// typed pointer a raw function takes, and Enqueue holds and orders the memory a raw
// call uses. Stream.Handle, Context.Handle and the like give the raw handles.
//
// # Loading
//
// libcuda.so.1 is opened at first use ($GOCUDA_CUDA_LIB overrides it). Without it,
// idiomatic calls return ErrNoDriver wrapping a *dl.LibraryError, and nothing panics.
package cuda
