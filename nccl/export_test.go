package nccl

import (
	"runtime"
	"sync"
	"testing"
	"unsafe"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/nccl/ncclraw"
)

// FakeNCCL stands in for libnccl in the tests that run without it (CI): the
// idiomatic layer calls it instead of the raw layer. Its communicators are numbers;
// it records every call, answers ncclInProgress as many times as the test says
// before ncclSuccess (or the state the test sets), and fails the test on a use of a
// communicator after its release, a second release, or two calls on one
// communicator at once (NCCL communicators are not thread-safe).
type FakeNCCL struct {
	t  testing.TB
	mu sync.Mutex
	// Set by the test (under Lock, or before the calls):
	InitPolls     int            // ncclInProgress answers after an init
	CallPolls     int            // after a collective or a group
	FinalizePolls int            // after a finalize
	Forever       bool           // ncclInProgress for ever (after inits and calls)
	FailCall      error          // what collectives return
	State         ncclraw.Result // the state once the polls are done (ncclSuccess by default)
	// Recorded:
	Calls     []FakeCall
	Inits     []FakeInit
	Aborted   []ncclraw.NcclComm
	Destroyed []ncclraw.NcclComm
	GroupEnds int
	Finalized int

	next    ncclraw.NcclComm
	polls   map[ncclraw.NcclComm]int
	live    map[ncclraw.NcclComm]bool
	busy    map[ncclraw.NcclComm]bool
	inGroup int
	pending []FakeCall // calls of the open group
	ids     int
}

// FakeCall is a collective the fake received.
type FakeCall struct {
	Op         string
	Send, Recv uintptr
	Count      uint64
	Type       ncclraw.NcclDataType
	RedOp      ncclraw.NcclRedOp
	Root       int // root or peer
	Comm       ncclraw.NcclComm
	Stream     cudaraw.CUstream
	InGroup    bool
}

// FakeInit is a communicator init the fake received.
type FakeInit struct {
	Comm          ncclraw.NcclComm
	NRanks, Rank  int
	ID            ncclraw.NcclUniqueId
	Blocking      int32
	Size, Version uint32
	Magic         uint32
}

// InstallFakeNCCL makes the idiomatic layer call a new FakeNCCL until the test ends.
func InstallFakeNCCL(t testing.TB) *FakeNCCL {
	f := &FakeNCCL{t: t, polls: map[ncclraw.NcclComm]int{}, live: map[ncclraw.NcclComm]bool{}, busy: map[ncclraw.NcclComm]bool{}, next: 0x1000}
	saved := raw
	t.Cleanup(func() { raw = saved })
	raw.getUniqueID = func(id *ncclraw.NcclUniqueId) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.ids++
		for i := range id.Internal {
			id.Internal[i] = byte(f.ids*31 + i)
		}
		return nil
	}
	raw.initRank = func(h *ncclraw.NcclComm, n int32, id ncclraw.NcclUniqueId, rank int32, cfg *ncclraw.NcclConfig) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.next += 0x10
		*h = f.next
		f.live[*h] = true
		f.polls[*h] = f.InitPolls
		f.Inits = append(f.Inits, FakeInit{*h, int(n), int(rank), id, cfg.Blocking, uint32(cfg.Size), cfg.Version, cfg.Magic})
		return ncclraw.ErrInProgress // non-blocking: the init goes on
	}
	raw.getAsyncError = func(h ncclraw.NcclComm, st *ncclraw.Result) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.check("ncclCommGetAsyncError", h)
		switch {
		case f.Forever:
			*st = ncclraw.NcclInProgress
		case f.polls[h] > 0:
			f.polls[h]--
			*st = ncclraw.NcclInProgress
		default:
			*st = f.State
		}
		return nil
	}
	raw.getLastError = func(ncclraw.NcclComm) (string, error) { return "fake: the peer went away", nil }
	release := func(name string, list *[]ncclraw.NcclComm) func(ncclraw.NcclComm) error {
		return func(h ncclraw.NcclComm) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.check(name, h)
			if f.busy[h] {
				f.t.Errorf("fake nccl: %s of communicator %#x during a call on it", name, h)
			}
			delete(f.live, h)
			*list = append(*list, h)
			return nil
		}
	}
	raw.abort = release("ncclCommAbort", &f.Aborted)
	raw.destroy = release("ncclCommDestroy", &f.Destroyed)
	raw.finalize = func(h ncclraw.NcclComm) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.check("ncclCommFinalize", h)
		f.Finalized++
		f.polls[h] = f.FinalizePolls
		return ncclraw.ErrInProgress
	}
	raw.groupStart = func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.inGroup++
		return nil
	}
	raw.groupEnd = func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.inGroup == 0 {
			f.t.Errorf("fake nccl: ncclGroupEnd without ncclGroupStart")
			return ncclraw.ErrInvalidUsage
		}
		f.inGroup--
		f.GroupEnds++
		if f.inGroup > 0 {
			return nil
		}
		for _, c := range f.pending {
			f.polls[c.Comm] = f.CallPolls
		}
		f.Calls = append(f.Calls, f.pending...)
		f.pending = nil
		if f.CallPolls > 0 || f.Forever {
			return ncclraw.ErrInProgress
		}
		return nil
	}
	rec := func(c FakeCall) error {
		f.mu.Lock()
		if f.busy[c.Comm] {
			f.t.Errorf("fake nccl: two calls at once on communicator %#x", c.Comm)
		}
		f.busy[c.Comm] = true
		f.mu.Unlock()
		runtime.Gosched() // widen the window for overlapping calls
		f.mu.Lock()
		defer f.mu.Unlock()
		f.busy[c.Comm] = false
		f.check(c.Op, c.Comm)
		if f.FailCall != nil {
			return f.FailCall
		}
		if f.inGroup > 0 {
			c.InGroup = true
			f.pending = append(f.pending, c)
			return nil
		}
		f.Calls = append(f.Calls, c)
		f.polls[c.Comm] = f.CallPolls
		if f.CallPolls > 0 || f.Forever {
			return ncclraw.ErrInProgress
		}
		return nil
	}
	u := func(p unsafe.Pointer) uintptr { return uintptr(p) }
	raw.allReduce = func(s, r unsafe.Pointer, n uint64, dt ncclraw.NcclDataType, op ncclraw.NcclRedOp, h ncclraw.NcclComm, st cudaraw.CUstream) error {
		return rec(FakeCall{Op: "allreduce", Send: u(s), Recv: u(r), Count: n, Type: dt, RedOp: op, Comm: h, Stream: st})
	}
	raw.broadcast = func(s, r unsafe.Pointer, n uint64, dt ncclraw.NcclDataType, root int32, h ncclraw.NcclComm, st cudaraw.CUstream) error {
		return rec(FakeCall{Op: "broadcast", Send: u(s), Recv: u(r), Count: n, Type: dt, Root: int(root), Comm: h, Stream: st})
	}
	raw.reduce = func(s, r unsafe.Pointer, n uint64, dt ncclraw.NcclDataType, op ncclraw.NcclRedOp, root int32, h ncclraw.NcclComm, st cudaraw.CUstream) error {
		return rec(FakeCall{Op: "reduce", Send: u(s), Recv: u(r), Count: n, Type: dt, RedOp: op, Root: int(root), Comm: h, Stream: st})
	}
	raw.allGather = func(s, r unsafe.Pointer, n uint64, dt ncclraw.NcclDataType, h ncclraw.NcclComm, st cudaraw.CUstream) error {
		return rec(FakeCall{Op: "allgather", Send: u(s), Recv: u(r), Count: n, Type: dt, Comm: h, Stream: st})
	}
	raw.reduceScatter = func(s, r unsafe.Pointer, n uint64, dt ncclraw.NcclDataType, op ncclraw.NcclRedOp, h ncclraw.NcclComm, st cudaraw.CUstream) error {
		return rec(FakeCall{Op: "reducescatter", Send: u(s), Recv: u(r), Count: n, Type: dt, RedOp: op, Comm: h, Stream: st})
	}
	raw.send = func(s unsafe.Pointer, n uint64, dt ncclraw.NcclDataType, peer int32, h ncclraw.NcclComm, st cudaraw.CUstream) error {
		return rec(FakeCall{Op: "send", Send: u(s), Count: n, Type: dt, Root: int(peer), Comm: h, Stream: st})
	}
	raw.recv = func(r unsafe.Pointer, n uint64, dt ncclraw.NcclDataType, peer int32, h ncclraw.NcclComm, st cudaraw.CUstream) error {
		return rec(FakeCall{Op: "recv", Recv: u(r), Count: n, Type: dt, Root: int(peer), Comm: h, Stream: st})
	}
	return f
}

// check fails the test if h is not a live communicator (f.mu held).
func (f *FakeNCCL) check(op string, h ncclraw.NcclComm) {
	if !f.live[h] {
		f.t.Errorf("fake nccl: %s on communicator %#x, which is not live (released or never made)", op, h)
	}
}

// Lock and Unlock guard the fake's fields while calls may run.
func (f *FakeNCCL) Lock()   { f.mu.Lock() }
func (f *FakeNCCL) Unlock() { f.mu.Unlock() }

// Snapshot returns copies of the recorded calls and releases.
func (f *FakeNCCL) Snapshot() (calls []FakeCall, aborted, destroyed []ncclraw.NcclComm) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]FakeCall(nil), f.Calls...), append([]ncclraw.NcclComm(nil), f.Aborted...), append([]ncclraw.NcclComm(nil), f.Destroyed...)
}

// Live reports whether h is a live communicator of the fake.
func (f *FakeNCCL) Live(h ncclraw.NcclComm) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.live[h]
}

// FreezeMembership makes the watch reporting to m send nothing more, its
// connections left open: a host that hangs.
func FreezeMembership(m *Membership) { m.frozen.Store(true) }

// GroupsActive returns the number of goroutines inside Group (tests).
func GroupsActive() int { return int(groupsActive.Load()) }

// ConfigForTest returns the configuration communicators are made with.
func ConfigForTest() ncclraw.NcclConfig { return config() }

// RejectRoundTrip encodes err as rank 0's reject and decodes it as another rank does.
func RejectRoundTrip(err error, nranks int) error { return readReject(rejectPayload(err), nranks) }

// LaunchFrom is LaunchFromEnv reading env instead of the process's environment.
func LaunchFrom(env map[string]string) (Launch, error) {
	return launchFrom(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
}

// FirstHost is firstHost, the first host of a Slurm hostlist.
var FirstHost = firstHost
