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
// JoinFromEnv does it all for a process that a launcher started (torchrun, Slurm, an
// MPI launcher, a Kubernetes indexed Job): its rank, the number of ranks, its device
// and rank 0's address come from the launcher's variables (LaunchFromEnv).
//
// The collectives are functions typed by the element type T (Element) and taking the
// communicator first: AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, Send and
// Recv, on the cuda package's memory (buffers, views) and the caller's stream:
//
//	comms, err := nccl.NewComms(ctx, cuda.Device(0), cuda.Device(1))
//	…
//	err = nccl.Group(func() error { // one goroutine, both GPUs: one group
//		for i, c := range comms {
//			if err := nccl.AllReduce[float32](c, streams[i], grads[i], grads[i], nccl.Sum); err != nil {
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
// ncclCommDestroy may wait for the GPU (tools/block// # The raw layer
//
// Package ncclraw binds every function of nccl.h (ncclAllReduce is
// ncclraw.AllReduce, ncclCommInitAll ncclraw.CommInitAll), for what this package does
// not cover. Comm.Handle gives a communicator's raw handle to those functions
// (ncclCommSplit, ncclCommRegister, …); queue them with cuda.Enqueue, which orders them
// with the memory's other uses. NCCL works in the device's primary context
// (cuda.Device(n).Context()). A communicator made with the raw functions is released
// with ncclraw.CommDestroy or ncclraw.CommAbort, outside cuda.Enqueue: both may wait
// for the GPU.
//
// libnccl.so.2 is opened at first use ($GOCUDA_NCCL_LIB overrides it); without it, calls
// return a *dl.LibraryError, and a function the installed library lacks returns a
// *dl.SymbolError.
package nccl
