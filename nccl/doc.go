// Package nccl binds NCCL (collective communication between GPUs: all-reduce,
// broadcast, all-gather, send and receive, …) for Go.
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
//	owned := nccl.OwnComm(comm)
//	defer owned.Close()
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
// *dl.SymbolError. OwnedComm owns a communicator (from CommInitRank, CommInitRankConfig,
// CommInitRankScalable, CommInitAll, CommSplit or CommShrink): Close destroys it with
// ncclCommDestroy; one dropped without Close is destroyed by resource.Reclaim, never on
// the finalizer path (ncclCommDestroy is classed as one that may wait for the GPU until
// tools/blockprobe has measured it). CommAbort is the other way to release a
// communicator, for the raw layer only.
package nccl
