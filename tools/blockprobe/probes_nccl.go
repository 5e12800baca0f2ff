package main

import (
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/nccl/ncclraw"
)

// Probes of NCCL's communicator (headers/nccl.toml, ncclComm_t): a one-rank communicator
// on the probe's device, made with ncclCommInitAll, which needs no unique id to be passed
// around. Each release is measured fresh (made and released, as a program that fails
// between the two would) and used (after one all-reduce on a stream of its own, waited
// for before the spin kernel starts: NCCL sets up its channels and kernels at the first
// collective). ncclCommAbort, which releases a communicator too, is measured the same
// ways and reported beside ncclCommDestroy without being judged: the row's class is its
// destroy's, the function owner types and resource.Reclaim call.

func init() {
	const destroy = "ncclCommDestroy"
	if _, dup := probes[destroy]; dup {
		panic("blockprobe: two probe sets for " + destroy + " (probes.go and probes_nccl.go)")
	}
	for _, release := range []struct {
		name string // "" for the row's destroy
		fn   func(ncclraw.NcclComm) error
	}{{"", ncclraw.CommDestroy}, {"ncclCommAbort", ncclraw.CommAbort}} {
		probes[destroy] = append(probes[destroy],
			Probe{Variant: "fresh", Release: release.name, Make: ncclProbe(release.fn, false)},
			Probe{Variant: "used", Release: release.name, Make: ncclProbe(release.fn, true)},
		)
	}
}

// ncclAllReduceCount is the number of float32 values the used variants all-reduce.
const ncclAllReduceCount = 1 << 10

// ncclProbe makes a one-rank communicator on e.Dev and returns release applied to it;
// with used, it first all-reduces (sum) a device buffer into another on a new stream
// and waits for it. The buffers and the stream are the cleanup's.
func ncclProbe(release func(ncclraw.NcclComm) error, used bool) func(e *Env) (func() error, func(), error) {
	return func(e *Env) (func() error, func(), error) {
		var frees []func()
		cleanup := func() {
			for i := len(frees) - 1; i >= 0; i-- {
				frees[i]()
			}
		}
		fail := func(err error) (func() error, func(), error) {
			cleanup()
			return nil, nil, err
		}
		dev := int32(e.Dev)
		var comm ncclraw.NcclComm
		if err := ncclraw.CommInitAll(&comm, 1, &dev); err != nil {
			return fail(err)
		}
		// ncclCommInitAll selects the device through the CUDA runtime, which makes the
		// device's primary context current: the probe's context (e.Ctx) already.
		if err := cudaraw.CtxSetCurrent(e.Ctx); err != nil {
			_ = ncclraw.CommDestroy(comm)
			return fail(err)
		}
		if used {
			if err := ncclAllReduceOnce(comm, &frees); err != nil {
				_ = ncclraw.CommDestroy(comm)
				return fail(err)
			}
		}
		return func() error { return release(comm) }, cleanup, nil
	}
}

// ncclAllReduceOnce sums ncclAllReduceCount float32 values of one device buffer into
// another over comm on a new stream and waits for it; what it allocates is freed by
// the functions it appends to frees.
func ncclAllReduceOnce(comm ncclraw.NcclComm, frees *[]func()) error {
	const bytes = ncclAllReduceCount * 4
	send, freeSend, err := deviceBuffer(bytes)
	if err != nil {
		return err
	}
	*frees = append(*frees, freeSend)
	recv, freeRecv, err := deviceBuffer(bytes)
	if err != nil {
		return err
	}
	*frees = append(*frees, freeRecv)
	var s cudaraw.CUstream
	if err := cudaraw.StreamCreate(&s, uint32(cudaraw.CU_STREAM_NON_BLOCKING)); err != nil {
		return err
	}
	*frees = append(*frees, func() { _ = cudaraw.StreamDestroy(s) })
	if err := ncclraw.AllReduce(send, recv, ncclAllReduceCount, ncclraw.NcclFloat32, ncclraw.NcclSum, comm, s); err != nil {
		return err
	}
	return cudaraw.StreamSynchronize(s)
}
