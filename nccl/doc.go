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
// ncclCommDestroy may wait for the GPU (tools/blockprobe).
//
// # Elastic jobs
//
// NCCL by itself waits for a dead rank for ever. A job that must go on with the ranks
// left joins through a rendezvous that watches the ranks (WatchingRendezvous):
// TCPRendezvous with a Liveness, where each rank stays connected to rank 0, which
// relays; or etcdrendezvous.Rendezvous with Watch, where each rank keeps its lease
// and watches the job's keys. A rank whose process exits, or that aborts its
// communicator, is reported at once; one that falls silent (a dead host, a cut
// network) within the Liveness (or the etcd TTL). Once a rank is reported gone, the
// survivors' Comm.Wait, Comm.Err, collectives and inits fail with a *RankGoneError
// (matching ErrRankGone) naming the ranks gone, and the communicator is kept, failed,
// for what comes next:
//
//	err := c.Wait(ctx, s)
//	var gone *nccl.RankGoneError
//	if errors.As(err, &gone) {
//		c, err = c.Shrink(ctx, gone.Ranks) // every survivor, with the same ranks
//		…                                  // agree on the state (a Broadcast), re-shard, go on
//	}
//
// Comm.Shrink (ncclCommShrink, NCCL 2.27 and later) makes the communicator of the ranks
// left without a new rendezvous, renumbered in order (RankAfter), ending the failed
// communicator's pending work (NCCL_SHRINK_ABORT) and aborting it; it is the
// recommended way. Comm.Rebuild joins the ranks left through a new rendezvous
// instead: with an older NCCL, on a communicator already aborted, or to renew a watch
// whose hub (the TCP rendezvous's rank 0) is gone. A communicator closed at the end of
// a job says goodbye: the others do not take it for gone. Example_elastic shows a
// data-parallel job that loses a rank and finishes on the others.
//
// # The raw layer
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
