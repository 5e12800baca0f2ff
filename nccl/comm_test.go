package nccl_test

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/nccl"
	"github.com/gocuda/gocuda/nccl/ncclraw"
	"github.com/gocuda/gocuda/resource"
)

// These tests run the communicator's logic — init and its polling, argument checks,
// the hand-off, groups, Close, Abort, Wait, asynchronous errors, the release of
// dropped communicators — on the fake NCCL of export_test.go, with the cuda package's
// memory and streams (on the fake driver in CI, on the GPU elsewhere). They need no
// NCCL; what NCCL computes is tested by the GPU tests (gpu_test.go).

// fakeComm returns a communicator of one rank on device 0 made by NewComms on the
// fake NCCL, with a stream of device 0's primary context.
func fakeComm(t *testing.T) (*nccl.FakeNCCL, *nccl.Comm, *cuda.Stream) {
	t.Helper()
	_, s := cudatest.Stream(t)
	f := nccl.InstallFakeNCCL(t)
	comms, err := nccl.NewComms(t.Context(), 0)
	require.NoError(t, err)
	require.Len(t, comms, 1)
	t.Cleanup(func() { _ = comms[0].Abort() })
	return f, comms[0], s
}

// TestNewCommsFake: the communicators are made non-blocking with NCCL's config
// initializer, in one group, with one id, rank i on devices[i]; NewComms polls until
// they are ready.
func TestNewCommsFake(t *testing.T) {
	cudatest.Require(t)
	f := nccl.InstallFakeNCCL(t)
	f.InitPolls = 5
	comms, err := nccl.NewComms(t.Context(), 0)
	require.NoError(t, err)
	c := comms[0]
	assert.Equal(t, 0, c.Rank())
	assert.Equal(t, 1, c.Size())
	assert.Equal(t, cuda.Device(0), c.Device())
	ctx0, err := cuda.Device(0).Context()
	require.NoError(t, err)
	assert.Equal(t, ctx0.Handle(), c.Context().Handle())
	require.Len(t, f.Inits, 1)
	in := f.Inits[0]
	assert.Equal(t, c.Handle(), in.Comm)
	assert.Equal(t, int32(0), in.Blocking, "non-blocking")
	assert.Equal(t, uint32(0xcafebeef), in.Magic)
	assert.Equal(t, uint32(ncclraw.NCCL_VERSION_CODE), in.Version)
	assert.Equal(t, uint32(unsafe.Sizeof(ncclraw.NcclConfig{})), in.Size)
	cfg := nccl.ConfigForTest()
	assert.Equal(t, int32(ncclraw.NCCL_CONFIG_UNDEF_INT), cfg.CgaClusterSize, "fields left to NCCL are undefined, as NCCL_CONFIG_INITIALIZER has them")
	assert.Nil(t, cfg.NetName)
	assert.Equal(t, 1, f.GroupEnds, "made in a group")
	assert.NoError(t, c.Err())
	require.NoError(t, c.Close())
	assert.Zero(t, c.Handle(), "no live handle after Close")
	_, aborted, destroyed := f.Snapshot()
	assert.Equal(t, []ncclraw.NcclComm{in.Comm}, destroyed)
	assert.Empty(t, aborted)
}

// TestNewCommsArguments: no devices, a device twice or a negative one are invalid
// arguments, before NCCL is called.
func TestNewCommsArguments(t *testing.T) {
	cudatest.Require(t)
	f := nccl.InstallFakeNCCL(t)
	for _, devs := range [][]cuda.Device{nil, {0, 0}, {-1}} {
		_, err := nccl.NewComms(t.Context(), devs...)
		assert.ErrorIs(t, err, cuda.ErrInvalidArgument, "%v", devs)
	}
	_, err := nccl.Join(t.Context(), nil, 0, 1, 0)
	assert.ErrorIs(t, err, cuda.ErrInvalidArgument)
	_, err = nccl.Join(t.Context(), &nccl.ConnRendezvous{}, 1, 1, 0)
	assert.ErrorIs(t, err, cuda.ErrInvalidArgument)
	assert.Empty(t, f.Inits)
}

// TestNewCommsFailure: an init that fails asynchronously, or does not finish before
// the context's deadline, is aborted; the error says why (the context's error, and
// ErrAborted).
func TestNewCommsFailure(t *testing.T) {
	cudatest.Require(t)
	t.Run("async", func(t *testing.T) {
		f := nccl.InstallFakeNCCL(t)
		f.InitPolls = 3
		f.State = ncclraw.NcclRemoteError
		_, err := nccl.NewComms(t.Context(), 0)
		require.Error(t, err)
		assert.ErrorIs(t, err, ncclraw.ErrRemoteError)
		assert.ErrorIs(t, err, nccl.ErrAborted)
		var ae *nccl.AsyncError
		require.ErrorAs(t, err, &ae)
		assert.Contains(t, ae.Detail, "peer went away")
		_, aborted, destroyed := f.Snapshot()
		assert.Len(t, aborted, 1)
		assert.Empty(t, destroyed)
	})
	t.Run("deadline", func(t *testing.T) {
		f := nccl.InstallFakeNCCL(t)
		f.Forever = true
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := nccl.NewComms(ctx, 0)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.ErrorIs(t, err, nccl.ErrAborted)
		assert.Less(t, time.Since(start), 5*time.Second)
		_, aborted, _ := f.Snapshot()
		assert.Len(t, aborted, 1)
	})
}

// TestJoinFake: ranks in goroutines join one communicator through a TCP rendezvous:
// every init has rank 0's id, its own rank and the number of ranks; ncclGetUniqueId
// runs once.
func TestJoinFake(t *testing.T) {
	cudatest.Require(t)
	f := nccl.InstallFakeNCCL(t)
	f.InitPolls = 2
	ln := listen(t)
	addr := ln.Addr().String()
	const n = 3
	comms := make([]*nccl.Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			rv := &nccl.TCPRendezvous{Addr: addr}
			if r == 0 {
				rv.Listener = ln
			}
			// Every rank on device 0: the fake does not care, NCCL would.
			comms[r], errs[r] = nccl.Join(t.Context(), rv, r, n, 0)
		})
	}
	wg.Wait()
	for r := range n {
		require.NoError(t, errs[r], "rank %d", r)
		assert.Equal(t, r, comms[r].Rank())
		assert.Equal(t, n, comms[r].Size())
	}
	require.Len(t, f.Inits, n)
	for _, in := range f.Inits {
		assert.Equal(t, f.Inits[0].ID, in.ID)
		assert.Equal(t, n, in.NRanks)
	}
	for _, c := range comms {
		require.NoError(t, c.Close())
	}

	// One rank over the program's own (here: no) connections.
	c, err := nccl.Join(t.Context(), &nccl.ConnRendezvous{}, 0, 1, 0)
	require.NoError(t, err)
	require.NoError(t, c.Close())

	// A rank whose peers never come: the rendezvous's timeout, and no init.
	inits := len(f.Inits)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	a, _ := net.Pipe()
	defer a.Close()
	_, err = nccl.Join(ctx, &nccl.ConnRendezvous{Conns: []io.ReadWriter{a}}, 0, 2, 0)
	var te *nccl.TimeoutError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, []int{1}, te.Missing)
	assert.Len(t, f.Inits, inits)
}

// TestCollectivesFake: each collective reaches NCCL with the memory's addresses, the
// count from the memory, T's data type, the root or peer, the communicator and the
// stream's handle; it waits for the communicator while NCCL answers ncclInProgress.
func TestCollectivesFake(t *testing.T) {
	f, c, s := fakeComm(t)
	f.CallPolls = 3
	a, err := cuda.AllocFor[float32](s, 6)
	require.NoError(t, err)
	defer a.Close()
	b, err := cuda.AllocFor[float32](s, 6)
	require.NoError(t, err)
	defer b.Close()
	half, err := b.Slice(0, 3) // a view
	require.NoError(t, err)
	defer half.Close()
	i64, err := cuda.AllocFor[int64](s, 4)
	require.NoError(t, err)
	defer i64.Close()

	require.NoError(t, nccl.AllReduce[float32](c, s, a, b, nccl.Max))
	require.NoError(t, nccl.AllReduce[float32](c, s, b, b, nccl.Sum)) // in place
	require.NoError(t, nccl.Broadcast[float32](c, s, a, b, 0))
	require.NoError(t, nccl.Reduce[float32](c, s, a, b, nccl.Prod, 0))
	require.NoError(t, nccl.AllGather[float32](c, s, half, half)) // one rank: recv is 1 × send
	require.NoError(t, nccl.ReduceScatter[float32](c, s, a, b, nccl.Avg))
	require.NoError(t, nccl.Send[int64](c, s, i64, 0))
	require.NoError(t, nccl.Recv[int64](c, s, i64, 0))
	require.NoError(t, s.Synchronize())

	calls, _, _ := f.Snapshot()
	h := c.Handle()
	pa, pb, ph, pi := uintptr(a.Ptr()), uintptr(b.Ptr()), uintptr(half.Ptr()), uintptr(i64.Ptr())
	want := []nccl.FakeCall{
		{Op: "allreduce", Send: pa, Recv: pb, Count: 6, Type: ncclraw.NcclFloat32, RedOp: nccl.Max},
		{Op: "allreduce", Send: pb, Recv: pb, Count: 6, Type: ncclraw.NcclFloat32, RedOp: nccl.Sum},
		{Op: "broadcast", Send: pa, Recv: pb, Count: 6, Type: ncclraw.NcclFloat32},
		{Op: "reduce", Send: pa, Recv: pb, Count: 6, Type: ncclraw.NcclFloat32, RedOp: nccl.Prod},
		{Op: "allgather", Send: ph, Recv: ph, Count: 3, Type: ncclraw.NcclFloat32},
		{Op: "reducescatter", Send: pa, Recv: pb, Count: 6, Type: ncclraw.NcclFloat32, RedOp: nccl.Avg},
		{Op: "send", Send: pi, Count: 4, Type: ncclraw.NcclInt64},
		{Op: "recv", Recv: pi, Count: 4, Type: ncclraw.NcclInt64},
	}
	require.Len(t, calls, len(want))
	for i := range want {
		want[i].Comm, want[i].Stream = h, s.Handle()
		assert.Equal(t, want[i], calls[i], "call %d", i)
	}
}

// TestDataTypes: each element type maps to its NCCL data type.
func TestDataTypes(t *testing.T) {
	assert.Equal(t, ncclraw.NcclInt8, nccl.DataType[int8]())
	assert.Equal(t, ncclraw.NcclUint8, nccl.DataType[uint8]())
	assert.Equal(t, ncclraw.NcclInt32, nccl.DataType[int32]())
	assert.Equal(t, ncclraw.NcclUint32, nccl.DataType[uint32]())
	assert.Equal(t, ncclraw.NcclInt64, nccl.DataType[int64]())
	assert.Equal(t, ncclraw.NcclUint64, nccl.DataType[uint64]())
	assert.Equal(t, ncclraw.NcclFloat16, nccl.DataType[cuda.Float16]())
	assert.Equal(t, ncclraw.NcclBfloat16, nccl.DataType[cuda.BFloat16]())
	assert.Equal(t, ncclraw.NcclFloat32, nccl.DataType[float32]())
	assert.Equal(t, ncclraw.NcclFloat64, nccl.DataType[float64]())
}

// TestCollectiveArguments: a wrong element type, sizes that do not match, a bad
// reduction, root or peer, nil or closed memory, a nil, closed or foreign stream and
// a closed communicator are errors before any NCCL call.
func TestCollectiveArguments(t *testing.T) {
	f, c, s := fakeComm(t)
	a, err := cuda.AllocFor[float32](s, 6)
	require.NoError(t, err)
	defer a.Close()
	short, err := cuda.AllocFor[float32](s, 5)
	require.NoError(t, err)
	defer short.Close()
	f64, err := cuda.AllocFor[float64](s, 6)
	require.NoError(t, err)
	defer f64.Close()
	odd, err := c.Context().Alloc(s, 7) // untyped, 7 bytes: not whole float32s
	require.NoError(t, err)
	defer odd.Close()
	closed, err := cuda.AllocFor[float32](s, 6)
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	other, err := cuda.NewContext(0, 0)
	require.NoError(t, err)
	defer other.Close()
	os, err := other.NewStream()
	require.NoError(t, err)
	defer os.Close()
	closedStream, err := c.Context().NewStream()
	require.NoError(t, err)
	require.NoError(t, closedStream.Close())

	invalid := map[string]error{
		"type":           nccl.AllReduce[float32](c, s, f64, a, nccl.Sum),
		"recv type":      nccl.AllReduce[float32](c, s, a, f64, nccl.Sum),
		"size":           nccl.AllReduce[float32](c, s, a, short, nccl.Sum),
		"odd":            nccl.AllReduce[float32](c, s, odd, odd, nccl.Sum),
		"nil send":       nccl.AllReduce[float32](c, s, nil, a, nccl.Sum),
		"op":             nccl.AllReduce[float32](c, s, a, a, ncclraw.NcclRedOp(99)),
		"negative op":    nccl.AllReduce[float32](c, s, a, a, ncclraw.NcclRedOp(-1)),
		"root":           nccl.Broadcast[float32](c, s, a, a, 1),
		"negative root":  nccl.Reduce[float32](c, s, a, a, nccl.Sum, -1),
		"root size":      nccl.Broadcast[float32](c, s, short, a, 0),
		"reduce size":    nccl.Reduce[float32](c, s, a, short, nccl.Sum, 0),
		"gather size":    nccl.AllGather[float32](c, s, a, short),
		"scatter size":   nccl.ReduceScatter[float32](c, s, short, a, nccl.Sum),
		"peer":           nccl.Send[float32](c, s, a, 1),
		"recv peer":      nccl.Recv[float32](c, s, a, -1),
		"nil stream":     nccl.AllReduce[float32](c, nil, a, a, nccl.Sum),
		"nil comm":       nccl.AllReduce[float32](nil, s, a, a, nccl.Sum),
		"nil comm scatt": nccl.ReduceScatter[float32](nil, s, a, a, nccl.Sum),
		"nil comm send":  nccl.Send[float32](nil, s, a, 0),
	}
	for name, err := range invalid {
		assert.ErrorIs(t, err, cuda.ErrInvalidArgument, "%s: %v", name, err)
	}
	assert.ErrorIs(t, nccl.AllReduce[float32](c, s, closed, a, nccl.Sum), cuda.ErrClosed)
	assert.ErrorIs(t, nccl.AllReduce[float32](c, closedStream, a, a, nccl.Sum), cuda.ErrClosed)
	assert.ErrorIs(t, nccl.AllReduce[float32](c, os, a, a, nccl.Sum), cuda.ErrWrongContext, "a stream of another context than the communicator's")
	assert.Contains(t, nccl.AllReduce[float32](c, s, f64, a, nccl.Sum).Error(), "all-reduce", "the error names the operation")

	calls, _, _ := f.Snapshot()
	assert.Empty(t, calls, "no NCCL call")

	// Broadcast's send and Reduce's recv are only needed on the root: with one rank,
	// rank 0 is the root, so a nil one is an error.
	assert.ErrorIs(t, nccl.Broadcast[float32](c, s, nil, a, 0), cuda.ErrInvalidArgument)
	assert.ErrorIs(t, nccl.Reduce[float32](c, s, a, nil, nccl.Sum, 0), cuda.ErrInvalidArgument)

	require.NoError(t, c.Close())
	assert.ErrorIs(t, nccl.AllReduce[float32](c, s, a, a, nccl.Sum), cuda.ErrClosed)
}

// TestCollectiveFailure: NCCL's error is returned, wrapped with the operation; an
// asynchronous error found while polling aborts the communicator.
func TestCollectiveFailure(t *testing.T) {
	f, c, s := fakeComm(t)
	live := c.Handle() // Handle is 0 once c is closed
	a, err := cuda.AllocFor[int32](s, 4)
	require.NoError(t, err)
	defer a.Close()
	f.Lock()
	f.FailCall = ncclraw.ErrInvalidUsage
	f.Unlock()
	err = nccl.AllReduce[int32](c, s, a, a, nccl.Sum)
	assert.ErrorIs(t, err, ncclraw.ErrInvalidUsage)
	assert.Contains(t, err.Error(), "all-reduce")
	assert.NoError(t, c.Err(), "a failed call does not break the communicator")

	f.Lock()
	f.FailCall = nil
	f.CallPolls = 2
	f.State = ncclraw.NcclSystemError
	f.Unlock()
	err = nccl.AllReduce[int32](c, s, a, a, nccl.Sum)
	var ae *nccl.AsyncError
	require.ErrorAs(t, err, &ae)
	assert.ErrorIs(t, err, ncclraw.ErrSystemError)
	assert.ErrorIs(t, err, nccl.ErrAborted)
	assert.Equal(t, 0, ae.Rank)
	_, aborted, _ := f.Snapshot()
	assert.Equal(t, []ncclraw.NcclComm{live}, aborted)
	err = nccl.AllReduce[int32](c, s, a, a, nccl.Sum)
	assert.ErrorIs(t, err, nccl.ErrAborted)
	assert.ErrorIs(t, err, cuda.ErrClosed)
}

// TestCloseAbort: Close and Abort release once, by ncclCommDestroy and ncclCommAbort;
// a second release, or one of a nil Comm, is the error every gocuda Close returns.
func TestCloseAbort(t *testing.T) {
	f, c, _ := fakeComm(t)
	h := c.Handle()
	require.NoError(t, c.Close())
	for _, err := range []error{c.Close(), c.Abort(), (*nccl.Comm)(nil).Close(), (*nccl.Comm)(nil).Abort()} {
		assert.ErrorIs(t, err, cuda.ErrClosed)
		assert.ErrorIs(t, err, resource.ErrReleased)
	}
	assert.ErrorIs(t, c.Err(), cuda.ErrClosed)
	assert.NotErrorIs(t, c.Err(), nccl.ErrAborted)
	_, aborted, destroyed := f.Snapshot()
	assert.Equal(t, []ncclraw.NcclComm{h}, destroyed)
	assert.Empty(t, aborted)

	comms, err := nccl.NewComms(t.Context(), 0)
	require.NoError(t, err)
	c = comms[0]
	h = c.Handle()
	require.NoError(t, c.Abort())
	assert.NoError(t, c.Abort(), "aborting again is fine")
	assert.ErrorIs(t, c.Close(), cuda.ErrClosed)
	assert.ErrorIs(t, c.Err(), nccl.ErrAborted)
	_, aborted, destroyed = f.Snapshot()
	assert.Equal(t, []ncclraw.NcclComm{h}, aborted)
	assert.Len(t, destroyed, 1, "not destroyed after the abort")
	assert.Equal(t, -1, (*nccl.Comm)(nil).Rank())
	assert.Zero(t, (*nccl.Comm)(nil).Handle())
}

// TestCloseFinalizes: Close waits for the communicator's pending work
// (ncclCommFinalize, polled) before ncclCommDestroy; an Abort meanwhile ends the wait
// and aborts the communicator instead.
func TestCloseFinalizes(t *testing.T) {
	f, c, _ := fakeComm(t)
	live := c.Handle() // Handle is 0 once c is closed
	f.Lock()
	f.FinalizePolls = 4
	f.Unlock()
	require.NoError(t, c.Close())
	_, aborted, destroyed := f.Snapshot()
	assert.Equal(t, []ncclraw.NcclComm{live}, destroyed)
	assert.Empty(t, aborted)
	assert.Equal(t, 1, f.Finalized)

	comms, err := nccl.NewComms(t.Context(), 0)
	require.NoError(t, err)
	c = comms[0]
	live = c.Handle()
	f.Lock()
	f.Forever = true // the pending work never finishes: a lost peer
	f.Unlock()
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-closed:
		t.Fatalf("Close returned while the work was pending: %v", err)
	default:
	}
	require.NoError(t, c.Abort())
	select {
	case err := <-closed:
		assert.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Close still waits after Abort")
	}
	_, aborted, destroyed = f.Snapshot()
	assert.Equal(t, []ncclraw.NcclComm{live}, aborted)
	assert.Len(t, destroyed, 1)
	assert.ErrorIs(t, c.Close(), cuda.ErrClosed)
}

// TestAbortEndsPolls: a collective that NCCL keeps in progress (a peer that never
// comes) waits until another goroutine aborts the communicator, then fails with
// ErrAborted; Abort waits for it to let go of the communicator before
// ncclCommAbort frees it (the fake reports a use after the release).
func TestAbortEndsPolls(t *testing.T) {
	f, c, s := fakeComm(t)
	live := c.Handle() // Handle is 0 once c is closed
	a, err := cuda.AllocFor[float32](s, 4)
	require.NoError(t, err)
	defer a.Close()
	f.Lock()
	f.Forever = true
	f.Unlock()
	done := make(chan error, 1)
	go func() { done <- nccl.AllReduce[float32](c, s, a, a, nccl.Sum) }()
	select {
	case err := <-done:
		t.Fatalf("the collective returned while NCCL was in progress: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	require.NoError(t, c.Abort())
	select {
	case err := <-done:
		assert.ErrorIs(t, err, nccl.ErrAborted)
	case <-time.After(5 * time.Second):
		t.Fatal("the collective still waits after Abort")
	}
	assert.False(t, f.Live(live))
}

// TestWaitFake: Wait returns once the stream's work is done and the communicator is
// healthy; an asynchronous error is returned as *AsyncError and aborts the
// communicator.
func TestWaitFake(t *testing.T) {
	f, c, s := fakeComm(t)
	live := c.Handle() // Handle is 0 once c is closed
	a, err := cuda.AllocFor[float32](s, 4)
	require.NoError(t, err)
	defer a.Close()
	require.NoError(t, nccl.AllReduce[float32](c, s, a, a, nccl.Sum))
	require.NoError(t, c.Wait(t.Context(), s))
	assert.ErrorIs(t, c.Wait(t.Context(), nil), cuda.ErrInvalidArgument)

	f.Lock()
	f.State = ncclraw.NcclRemoteError
	f.Unlock()
	err = c.Wait(t.Context(), s)
	var ae *nccl.AsyncError
	require.ErrorAs(t, err, &ae)
	assert.ErrorIs(t, err, ncclraw.ErrRemoteError)
	assert.ErrorIs(t, err, nccl.ErrAborted)
	assert.False(t, f.Live(live))
	assert.ErrorIs(t, c.Wait(t.Context(), s), nccl.ErrAborted)
}

// TestGroupFake: the collectives f calls are queued when f returns, all between one
// ncclGroupStart and ncclGroupEnd, in call order; nothing is queued when f fails;
// groups nest; closed memory fails the group before NCCL is called.
func TestGroupFake(t *testing.T) {
	f, c, s := fakeComm(t)
	f.CallPolls = 2
	a, err := cuda.AllocFor[float32](s, 8)
	require.NoError(t, err)
	defer a.Close()
	b, err := cuda.AllocFor[float32](s, 8)
	require.NoError(t, err)
	defer b.Close()
	s2, err := c.Context().NewStream()
	require.NoError(t, err)
	defer s2.Close()
	ends := f.GroupEnds // NewComms's

	err = nccl.Group(func() error {
		require.NoError(t, nccl.Send[float32](c, s, a, 0))
		require.NoError(t, nccl.Recv[float32](c, s2, b, 0))
		calls, _, _ := f.Snapshot()
		assert.Empty(t, calls, "queued when the group ends")
		assert.Equal(t, 1, nccl.GroupsActive())
		return nccl.Group(func() error { return nccl.AllReduce[float32](c, s, b, b, nccl.Sum) }) // nested
	})
	require.NoError(t, err)
	assert.Zero(t, nccl.GroupsActive())
	calls, _, _ := f.Snapshot()
	require.Len(t, calls, 3)
	for i, op := range []string{"send", "recv", "allreduce"} {
		assert.Equal(t, op, calls[i].Op)
		assert.True(t, calls[i].InGroup)
	}
	assert.Equal(t, s2.Handle(), calls[1].Stream)
	assert.Equal(t, s.Handle(), calls[2].Stream)
	assert.Equal(t, ends+1, f.GroupEnds)

	fail := errors.New("no")
	err = nccl.Group(func() error {
		require.NoError(t, nccl.AllReduce[float32](c, s, a, a, nccl.Sum))
		return fail
	})
	assert.ErrorIs(t, err, fail)
	assert.Panics(t, func() {
		_ = nccl.Group(func() error {
			_ = nccl.AllReduce[float32](c, s, a, a, nccl.Sum)
			panic("boom")
		})
	})
	assert.Zero(t, nccl.GroupsActive())

	tmp, err := cuda.AllocFor[float32](s, 8)
	require.NoError(t, err)
	err = nccl.Group(func() error {
		require.NoError(t, nccl.AllReduce[float32](c, s, tmp, tmp, nccl.Sum))
		return tmp.Close() // closed before the group is queued
	})
	assert.ErrorIs(t, err, cuda.ErrClosed)
	calls, _, _ = f.Snapshot()
	assert.Len(t, calls, 3, "nothing more reached NCCL")
	assert.Equal(t, ends+1, f.GroupEnds)

	// Outside the group, on another goroutine, while a group is open here: not grouped.
	err = nccl.Group(func() error {
		var wg sync.WaitGroup
		wg.Go(func() { assert.NoError(t, nccl.AllReduce[float32](c, s2, b, b, nccl.Sum)) })
		wg.Wait()
		calls, _, _ := f.Snapshot()
		assert.Len(t, calls, 4, "another goroutine's collective is queued at once")
		return nil
	})
	require.NoError(t, err)
}

// TestGroupTwoDevices: the collectives of the communicators of two devices (a fake
// with two devices, in a subprocess) issued from one goroutine in one group.
func TestGroupTwoDevices(t *testing.T) {
	if cudatest.Active() {
		cudatest.Subprocess(t, map[string]string{"FAKECUDA_DEVICES": "2"})
		return
	}
	cudatest.Require(t)
	if n, err := cuda.DeviceCount(); err != nil || n < 2 || !cudatest.FakeLoaded() {
		t.Skip("the fake with two devices (the GPU version is TestGPUTwoDevices)")
	}
	f := nccl.InstallFakeNCCL(t)
	comms, err := nccl.NewComms(t.Context(), 1, 0) // rank 0 on device 1
	require.NoError(t, err)
	require.Len(t, f.Inits, 2)
	assert.Equal(t, cuda.Device(1), comms[0].Device())
	assert.Equal(t, 1, f.Inits[1].Rank)
	assert.Equal(t, f.Inits[0].ID, f.Inits[1].ID)
	streams := make([]*cuda.Stream, 2)
	bufs := make([]*cuda.DeviceBuffer, 2)
	for i, c := range comms {
		streams[i], err = c.Context().NewStream()
		require.NoError(t, err)
		defer streams[i].Close()
		bufs[i], err = cuda.AllocFor[float64](streams[i], 16)
		require.NoError(t, err)
		defer bufs[i].Close()
	}
	// Memory of device 0 with rank 0's stream (device 1): wrong context.
	assert.ErrorIs(t, nccl.AllReduce[float64](comms[0], streams[0], bufs[1], bufs[1], nccl.Sum), cuda.ErrWrongContext)
	err = nccl.Group(func() error {
		for i, c := range comms {
			if err := nccl.AllReduce[float64](c, streams[i], bufs[i], bufs[i], nccl.Sum); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, err)
	calls, _, _ := f.Snapshot()
	require.Len(t, calls, 2)
	for i := range 2 {
		assert.Equal(t, comms[i].Handle(), calls[i].Comm)
		assert.Equal(t, streams[i].Handle(), calls[i].Stream)
	}
	for _, c := range comms {
		require.NoError(t, c.Close())
	}
}

// TestConcurrentUseAndClose: goroutines issuing collectives on one communicator
// while another closes it: the fake sees no two calls at once and no call after the
// release; every collective either runs or fails with ErrClosed.
func TestConcurrentUseAndClose(t *testing.T) {
	f, c, s := fakeComm(t)
	f.CallPolls = 1
	ctx := c.Context()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			st, err := ctx.NewStream()
			if !assert.NoError(t, err) {
				return
			}
			defer st.Close()
			b, err := cuda.AllocFor[uint8](st, 64)
			if !assert.NoError(t, err) {
				return
			}
			defer b.Close()
			for range 50 {
				err := nccl.AllReduce[uint8](c, st, b, b, nccl.Max)
				if err != nil {
					assert.ErrorIs(t, err, cuda.ErrClosed)
					return
				}
				_ = c.Err()
			}
		})
	}
	time.Sleep(5 * time.Millisecond)
	require.NoError(t, c.Close())
	wg.Wait()
	_, _, destroyed := f.Snapshot()
	assert.Len(t, destroyed, 1)
	_ = s
}

// TestDroppedCommReleasedByReclaim: a communicator dropped without Close is
// destroyed by resource.Reclaim (its release may wait for the GPU: the blocking
// lane), not by the collector alone.
func TestDroppedCommReleasedByReclaim(t *testing.T) {
	cudatest.Require(t)
	f := nccl.InstallFakeNCCL(t)
	comms, err := nccl.NewComms(t.Context(), 0)
	require.NoError(t, err)
	h := comms[0].Handle()
	comms = nil
	for range 3 {
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
	}
	resource.Drain()
	assert.True(t, f.Live(h), "held for Reclaim")
	_, err = resource.Reclaim()
	require.NoError(t, err)
	assert.False(t, f.Live(h))
	_, aborted, destroyed := f.Snapshot()
	assert.Equal(t, []ncclraw.NcclComm{h}, destroyed)
	assert.Empty(t, aborted)
	_ = comms
}
