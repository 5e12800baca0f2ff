package nccl

import (
	"fmt"
	"runtime"
	"slices"
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
//
// It knows which communicators are ranks of one communicator (those made with one
// id, or by one shrink of one communicator's ranks): once a rank is killed (Kill,
// or an abort with AbortLeaves), the collectives of the other ranks wait for it for
// ever (ncclInProgress), as NCCL's do, or fail asynchronously with DeadPeer; a
// shrink (ncclCommShrink) makes a new communicator of the ranks not excluded,
// renumbered, which waits for ever if a rank it keeps is dead, or if its parent
// has work waiting for a dead rank and the shrink is not NCCL_SHRINK_ABORT. It
// fails the test when a shrunk communicator is polled while it initializes and
// its parent is released.
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
	FailShrink    error          // what ncclCommShrink returns
	DeadPeer      ncclraw.Result // a dead rank's peers' state: ncclSuccess (default) means they hang
	AbortLeaves   bool           // an abort kills the rank (its peers wait for it)
	// Recorded:
	Calls     []FakeCall
	Inits     []FakeInit
	Shrinks   []FakeShrink
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
	members map[ncclraw.NcclComm]*fakeMember
	groups  map[string]*fakeGroup
}

// fakeGroup is a communicator: its ranks' fake communicators.
type fakeGroup struct {
	size int
	dead map[int]bool
}

// fakeMember is one rank of a fakeGroup.
type fakeMember struct {
	g      *fakeGroup
	rank   int
	parent ncclraw.NcclComm // the communicator it was shrunk from, if any
	hung   bool             // it has work that waits for a dead rank
}

// deadPeers reports whether a rank of m's communicator other than m is dead.
func (m *fakeMember) deadPeers() bool {
	for r := range m.g.dead {
		if r != m.rank {
			return true
		}
	}
	return false
}

// FakeShrink is an ncclCommShrink the fake received.
type FakeShrink struct {
	Parent, New ncclraw.NcclComm
	Exclude     []int
	Flags       int32
	Blocking    int32
	Rank, Size  int // the new communicator's
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
	f := &FakeNCCL{t: t, polls: map[ncclraw.NcclComm]int{}, live: map[ncclraw.NcclComm]bool{}, busy: map[ncclraw.NcclComm]bool{}, next: 0x1000,
		members: map[ncclraw.NcclComm]*fakeMember{}, groups: map[string]*fakeGroup{}}
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
		key := "id " + string(id.Internal[:])
		g := f.groups[key]
		if g == nil {
			g = &fakeGroup{size: int(n), dead: map[int]bool{}}
			f.groups[key] = g
		}
		f.members[*h] = &fakeMember{g: g, rank: int(rank)}
		return ncclraw.ErrInProgress // non-blocking: the init goes on
	}
	raw.getAsyncError = func(h ncclraw.NcclComm, st *ncclraw.Result) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.check("ncclCommGetAsyncError", h)
		m := f.members[h]
		if m != nil && m.parent != 0 && f.polls[h] > 0 && !f.live[m.parent] {
			f.t.Errorf("fake nccl: communicator %#x, shrunk from %#x, initializes after its parent's release", h, m.parent)
		}
		switch {
		case f.Forever:
			*st = ncclraw.NcclInProgress
		case m != nil && m.deadPeers() && f.DeadPeer != ncclraw.NcclSuccess:
			*st = f.DeadPeer
		case m != nil && m.hung:
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
			if m := f.members[h]; m != nil && name == "ncclCommAbort" && f.AbortLeaves {
				m.g.dead[m.rank] = true
			}
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
			f.hang(c.Comm)
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
		if f.hang(c.Comm) || f.CallPolls > 0 || f.Forever {
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
	raw.shrink = func(h ncclraw.NcclComm, exclude []int32, nh *ncclraw.NcclComm, cfg *ncclraw.NcclConfig, flags int32) error {
		f.mu.Lock()
		f.check("ncclCommShrink", h)
		if f.busy[h] {
			f.t.Errorf("fake nccl: two calls at once on communicator %#x", h)
		}
		f.busy[h] = true
		f.mu.Unlock()
		runtime.Gosched() // widen the window for a release during the shrink
		f.mu.Lock()
		defer f.mu.Unlock()
		f.busy[h] = false
		f.check("ncclCommShrink", h)
		if f.FailShrink != nil {
			return f.FailShrink
		}
		m := f.members[h]
		if m == nil {
			f.t.Errorf("fake nccl: ncclCommShrink of communicator %#x, which no init made", h)
			return ncclraw.ErrInvalidArgument
		}
		excl := make([]int, len(exclude))
		for i, r := range exclude {
			excl[i] = int(r)
		}
		key := fmt.Sprintf("shrink %p %v", m.g, excl)
		g := f.groups[key]
		if g == nil {
			g = &fakeGroup{size: m.g.size - len(excl), dead: map[int]bool{}}
			for r := range m.g.dead {
				if !slices.Contains(excl, r) {
					g.dead[RankAfter(r, excl)] = true
				}
			}
			f.groups[key] = g
		}
		f.next += 0x10
		*nh = f.next
		f.live[*nh] = true
		f.polls[*nh] = f.InitPolls
		child := &fakeMember{g: g, rank: RankAfter(m.rank, excl), parent: h}
		if flags&ncclraw.NCCL_SHRINK_ABORT != 0 {
			m.hung = false // its pending work is ended first
		}
		child.hung = m.hung || child.deadPeers() // waits for the parent's work, or for a dead rank
		f.members[*nh] = child
		f.Shrinks = append(f.Shrinks, FakeShrink{Parent: h, New: *nh, Exclude: excl, Flags: flags, Blocking: cfg.Blocking, Rank: child.rank, Size: g.size})
		return ncclraw.ErrInProgress
	}
	return f
}

// hang marks h's work as waiting for ever where a rank of its communicator is dead,
// and reports whether it does (f.mu held).
func (f *FakeNCCL) hang(h ncclraw.NcclComm) bool {
	if m := f.members[h]; m != nil && m.deadPeers() {
		m.hung = true
	}
	return f.members[h] != nil && f.members[h].hung
}

// Kill makes h's rank dead: the other ranks of its communicator wait for it for
// ever from their next collective on (or fail with DeadPeer). h stays live, for the
// test's own release.
func (f *FakeNCCL) Kill(h ncclraw.NcclComm) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if m := f.members[h]; m != nil {
		m.g.dead[m.rank] = true
	}
}

// ShrinksSnapshot returns a copy of the recorded shrinks.
func (f *FakeNCCL) ShrinksSnapshot() []FakeShrink {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.Shrinks)
}

// CallsOn returns the recorded collectives on h.
func (f *FakeNCCL) CallsOn(h ncclraw.NcclComm) []FakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []FakeCall
	for _, c := range f.Calls {
		if c.Comm == h {
			out = append(out, c)
		}
	}
	return out
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

// Die makes c's rank die as its process would: its watch ends without a goodbye
// (the others take it for gone). c is left to the test's Abort.
func Die(c *Comm) {
	if c.w != nil {
		c.w.m.end()
	}
}

// Freeze makes c's watch send nothing more, its connections left open: a host
// that hangs.
func Freeze(c *Comm) {
	if c.w != nil {
		c.w.m.frozen.Store(true)
	}
}

// FreezeMembership is Freeze for a membership of the test's own.
func FreezeMembership(m *Membership) { m.frozen.Store(true) }

// Watched reports whether c is watched (Join through a watching rendezvous).
func Watched(c *Comm) bool { return c.w != nil }

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
