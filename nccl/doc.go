// Package nccl binds NCCL (collective communication between GPUs: all-reduce,
// broadcast, all-gather, send and receive, …) for Go.
//
// # Communicators
//
// A Comm is one rank of a communicator: a group of GPUs that run collectives together.
// NewComms makes the communicators of several GPUs of this process at once (one rank
// per GPU); Join makes one rank of a communicator whose ranks are in several processes
// (typically one GPU each), after a rendezvous that hands rank 0's unique id to the
// others: TCPRendezvous over TCP (rank 0 listens, the others dial with retries until a
// deadline), ConnRendezvous over connections the program already has, or any
// Rendezvous of the program's own (MPI, a key-value store). A rank that never comes
// makes the others fail with a *TimeoutError naming it, not hang.
//
// The collectives are methods of Of[T](c), typed by the element type T (Element):
// AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, Send and Recv, on the cuda
// package's memory (buffers, views) and the caller's stream:
//
//	comms, err := nccl.NewComms(ctx, cuda.Device(0), cuda.Device(1))
//	…
//	err = nccl.Group(func() error { // one goroutine, both GPUs: one group
//		for i, c := range comms {
//			if err := nccl.Of[float32](c).AllReduce(streams[i], grads[i], grads[i], nccl.Sum); err != nil {
//				return err
//			}
//		}
//		return nil
//	})
//	…
//	err = comms[0].Wait(ctx, streams[0]) // the work queued on the stream is done
//
// Arguments are checked before any NCCL call (memory of another element type, sizes
// that do not match, a root out of range, a stream of another context: errors
// matching cuda.ErrInvalidArgument or cuda.ErrWrongContext), and a collective takes
// part in the cuda package's hand-off like the package's own operations: its inputs
// are read and its outputs written on the stream, which waits on the GPU for their
// conflicting uses elsewhere, and they are held until the work is queued. Group
// queues the collectives a function calls as one NCCL group (ncclGroupStart …
// ncclGroupEnd): needed when one goroutine drives several GPUs, and for sends and
// receives that must progress together.
//
// Communicators are non-blocking (ncclConfig_t.blocking = 0), so no call blocks in
// NCCL: where NCCL is still working (an init, a connection), this package polls
// ncclCommGetAsyncError, and a wait can end. The init of NewComms and Join ends with
// its context: the communicator is aborted (ncclCommAbort) and the error wraps the
// context's. Comm.Wait waits for a stream's work while watching the communicator: an
// asynchronous error (a peer died, a network failure) is returned as an *AsyncError,
// and the end of the context as its error; either aborts the communicator, so that
// its kernels, which would otherwise wait for the lost peer for ever, end. Abort does
// that from any goroutine.
//
// Close destroys a communicator (ncclCommDestroy); one dropped without Close or Abort
// is destroyed by resource.Reclaim, never on the finalizer goroutine, since
// ncclCommDestroy may wait for the GPU (tools/blockprobe measured it).
//
// # The raw layer
//
// The raw layer (zz_generated_*.go) has every function of nccl.h as a Go function named
// after it without the nccl prefix: ncclAllReduce is AllReduce, ncclCommInitAll is
// CommInitAll, ncclGetVersion is GetVersion. The pncclX profiling aliases that nccl.h
// declares beside each ncclX are the same functions under other names, and are not bound
// (nor the deprecated ncclResetDebugInit). C types keep their spelling with the first
// letter exported and _t dropped (NcclComm, NcclUniqueId, NcclConfig, NcclDataType,
// NcclRedOp), enumeration values their C names with the first letter exported (NcclSum,
// NcclFloat32) and #define constants their C names (NCCL_SPLIT_NOCOLOR,
// NCCL_VERSION_CODE). Functions return nil on ncclSuccess or a Result, which matches the
// Err* sentinels with errors.Is. A communicator made non-blocking (NcclConfig.Blocking =
// 0) answers ncclInProgress while it works, which is a Result error (ErrInProgress) here
// like any other status: poll CommGetAsyncError until it reports NcclSuccess. Streams
// are the driver's: a cuda.CUstream passes to AllReduce as is.
//
// NCCL selects each communicator's device itself, through the CUDA runtime, which works
// in the device's primary context: use the communicator with streams and memory of that
// context (cuda.Device(n).Context()). Raw calls run on the calling thread: wrap them in
// cuda.Context.Locked, take device pointers with cuda.DevicePtr, and queue collectives
// with cuda.Enqueue to order them with the memory's other uses:
//
//	ctx, _ := cuda.Device(0).Context()
//	dev := int32(0)
//	var comm nccl.NcclComm
//	err := ctx.Locked(func() error { return nccl.CommInitAll(&comm, 1, &dev) })
//	defer ctx.Locked(func() error { return nccl.CommDestroy(comm) })
//	send, _ := cuda.DevicePtr[float32](sendBuf)
//	recv, _ := cuda.DevicePtr[float32](recvBuf)
//	err = cuda.Enqueue(s, func(_ cuda.CUcontext, h cuda.CUstream) error {
//		return ctx.Locked(func() error {
//			return nccl.AllReduce(unsafe.Pointer(send), unsafe.Pointer(recv), n,
//				nccl.NcclFloat32, nccl.NcclSum, comm, h)
//		})
//	}, cuda.Reads(sendBuf), cuda.Writes(recvBuf))
//
// libnccl.so.2 is opened at first use ($GOCUDA_NCCL_LIB overrides it); without it, calls
// return a *dl.LibraryError, and a function the installed library lacks returns a
// *dl.SymbolError. The raw layer has no owner type for ncclComm_t: Comm is the type that
// owns a communicator (headers/nccl.toml names it), and Comm.Handle gives its raw
// communicator to the functions that have no method (ncclCommSplit, ncclCommRegister,
// …). A communicator made with the raw functions is released with CommDestroy or
// CommAbort, outside cuda.Enqueue: both may wait for the GPU.
package nccl
