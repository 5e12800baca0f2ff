package cuda

import (
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gocuda/gocuda/cuda/cudaraw"
)

// The stream checker: a race detector for streams, as -race is for goroutines.
//
// The package orders every use of memory it queues (hand-off), but an address taken
// with Ptr escapes it: work queued with that address is ordered with nothing unless
// it goes through Enqueue with the memory among its uses. With the checker on
// (environment variable GOCUDA_STREAMCHECK=1 at start, or EnableStreamCheck) every
// use of memory on a stream is recorded with its call site — the package's own
// operations (copies, memsets, launches, graph launches, peer copies, and every
// library call, which all record their uses through the planner: opPlan.record), and
// the raw addresses that reach the GPU: a launch's CUdeviceptr arguments (Launch,
// LaunchWith, LaunchBatch.Submit), and those of kernel nodes built by hand
// (Graph.AddKernel, Exec.SetKernelArgs) or captured, checked when the graph is
// launched. Each stream keeps a vector clock, advanced by every use and merged where
// one stream is made to wait for another: the package's hand-off, Stream.WaitEvent
// after Event.Record, a peer copy's wait. A use conflicts with an earlier use on
// another stream when either writes (raw uses count as writes: the checker cannot
// tell what a kernel does with an address); it races when no wait orders the two and
// the earlier work is not known complete (its stream idle). Each race is reported,
// with both call sites, to the handler (SetStreamCheckHandler; by default an error
// log). The checker costs a call-stack walk and a lock per use; off (the default),
// one atomic load at each hook.

// StreamRace is a report of the stream checker: two uses of one memory, on two
// streams, that nothing orders, at least one of them a write.
type StreamRace struct {
	Addr    cudaraw.CUdeviceptr // the racing use's address (a raw use's, else the earlier one's, else the memory's)
	Taken   string              // where Ptr last returned the memory's address (file:line), or ""
	Earlier string              // the earlier use, on another stream (file:line, and what it was)
	Used    string              // the racing use (file:line, and what it was)
}

// Error describes the race.
func (r StreamRace) Error() string {
	taken := ""
	if r.Taken != "" {
		taken = fmt.Sprintf(" (address taken by Ptr at %s)", r.Taken)
	}
	return fmt.Sprintf("cuda: stream check: memory at %#x used at %s and, on another stream, at %s, "+
		"with no wait ordering the two (no hand-off, Enqueue of the memory or event wait)%s", uint64(r.Addr), r.Earlier, r.Used, taken)
}

var streamCheck struct {
	on      atomic.Bool
	mu      sync.Mutex
	mems    map[*memBase]*shadow          // allocations used since the checker is on
	clocks  map[*stream]*ckClock          // the streams' vector clocks
	events  map[*event]map[*stream]uint64 // the clock each event was last recorded at
	handler func(StreamRace)
	reports atomic.Int64
}

// ckClock is a stream's vector clock: n counts its uses, after the uses of other
// streams that it was made to wait for, up to the count there.
type ckClock struct {
	n     uint64
	after map[*stream]uint64
}

// shadow is what the checker knows of an allocation: the last read and the last
// write on each stream, and where Ptr last returned its address (taken: a raw use
// may name it).
type shadow struct {
	m     *memBase
	uses  []ckUse
	taken string
}

// ckUse is one use of memory on a stream.
type ckUse struct {
	s     *stream
	gen   uint64 // s's generation
	n     uint64 // s's clock at the use
	write bool
	addr  cudaraw.CUdeviceptr // a raw use's address, else 0
	site  string
}

// rawUse is a raw address in a kernel node or batch, checked when it is launched.
type rawUse struct {
	addr cudaraw.CUdeviceptr
	site string              // where it was added
	node cudaraw.CUgraphNode // the kernel node it is an argument of, if any
}

func init() {
	if v := os.Getenv("GOCUDA_STREAMCHECK"); v != "" && v != "0" {
		EnableStreamCheck()
	}
}

// EnableStreamCheck turns the stream checker on for the rest of the process (see
// StreamRace).
func EnableStreamCheck() { streamCheck.on.Store(true) }

// SetStreamCheckHandler replaces the function that receives the stream checker's
// reports (nil: the default, which logs them through log/slog at level Error) and
// returns the previous one.
func SetStreamCheckHandler(h func(StreamRace)) (previous func(StreamRace)) {
	streamCheck.mu.Lock()
	defer streamCheck.mu.Unlock()
	previous = streamCheck.handler
	streamCheck.handler = h
	return previous
}

// ckShadow returns m's shadow (m an allocation), making it; the caller holds
// streamCheck.mu.
func ckShadow(m *memBase) *shadow {
	if streamCheck.mems == nil {
		streamCheck.mems = make(map[*memBase]*shadow)
	}
	sh := streamCheck.mems[m]
	if sh == nil {
		sh = &shadow{m: m}
		streamCheck.mems[m] = sh
	}
	return sh
}

// ckClockOf returns s's clock; the caller holds streamCheck.mu.
func ckClockOf(s *stream) *ckClock {
	if streamCheck.clocks == nil {
		streamCheck.clocks = make(map[*stream]*ckClock)
	}
	c := streamCheck.clocks[s]
	if c == nil {
		c = &ckClock{after: map[*stream]uint64{}}
		streamCheck.clocks[s] = c
	}
	return c
}

// ptrTaken is Ptr's check: m's address escapes, and later raw uses of it are
// checked against m's uses. Uses queued before the checker saw m are taken from the
// hand-off's record.
func ptrTaken(m *memBase) {
	if m == nil || m.ctx == nil || m.hold.closed() {
		return
	}
	o := m.owner()
	site := callSite()
	var d deps
	o.snapshotUses(&d)
	streamCheck.mu.Lock()
	sh := ckShadow(o)
	sh.taken = site
	for i := range d.n {
		u := d.at(i)
		known := false
		for _, x := range sh.uses {
			known = known || x.s == u.s
		}
		if !known {
			sh.uses = append(sh.uses, ckUse{s: u.s, gen: u.gen, n: ckClockOf(u.s).n, write: u.write, site: "work queued before the checker saw it"})
		}
	}
	streamCheck.mu.Unlock()
}

// checkUsed checks and records the package's use of the allocation m on t (an
// operation of the planner, queued), named by what.
func checkUsed(m *memBase, t *stream, write bool) {
	if t.capture.Load() != nil {
		return // captured, not run: Exec.Launch uses the memory
	}
	checkUse(m, 0, t, write, callSite())
}

// checkUse checks a use of m (raw at addr, or the package's with addr 0) on t
// against m's earlier uses on other streams, records it and reports the races.
func checkUse(m *memBase, addr cudaraw.CUdeviceptr, t *stream, write bool, site string) {
	var races []StreamRace
	streamCheck.mu.Lock()
	sh := ckShadow(m)
	c := ckClockOf(t)
	c.n++
	now := ckUse{s: t, gen: t.gen.Load(), n: c.n, write: write, addr: addr, site: site}
	keep := sh.uses[:0]
	for _, e := range sh.uses {
		switch {
		case e.s == t:
			if e.write && !write {
				keep = append(keep, e) // t's write stays for the reads of other streams
			}
			continue
		case !write && !e.write, c.after[e.s] >= e.n:
		case ckDone(e):
			continue
		default:
			a := addr
			if a == 0 {
				a = e.addr
			}
			if a == 0 {
				a = m.ptr
			}
			races = append(races, StreamRace{Addr: a, Taken: sh.taken, Earlier: e.site, Used: site})
		}
		if !write {
			keep = append(keep, e) // a write replaces the uses it conflicts with
		}
	}
	sh.uses = append(keep, now)
	h := streamCheck.handler
	streamCheck.mu.Unlock()
	for _, r := range races {
		streamCheck.reports.Add(1)
		if h == nil {
			slog.Error(r.Error())
		} else {
			h(r)
		}
	}
}

// ckDone reports whether e's work is known complete: its stream's generation was
// found done, or the stream is idle now. A stream another call holds locked is not
// queried (the checker may run under a stream's lock): not known complete.
func ckDone(e ckUse) bool {
	s := e.s
	if e.gen <= s.doneGen.Load() {
		return true
	}
	if !s.mu.TryRLock() {
		return false
	}
	defer s.mu.RUnlock()
	if s.closed.Load() {
		if s.final == nil {
			return true
		}
		done, _ := ready(cudaraw.EventQueryIn(s.cs.h, s.final.h))
		return done
	}
	done, _ := ready(cudaraw.StreamQueryIn(s.cs.h, s.h))
	return done
}

// checkOrdered records that work queued on t from now on waits for the work queued
// on s so far (a hand-off's event wait, a peer copy's).
func checkOrdered(s, t *stream) {
	if s == t {
		return
	}
	streamCheck.mu.Lock()
	ckMerge(ckClockOf(t), ckSnapshot(s))
	streamCheck.mu.Unlock()
}

// ckSnapshot is s's clock as an event recorded on s now captures it; the caller
// holds streamCheck.mu.
func ckSnapshot(s *stream) map[*stream]uint64 {
	c := ckClockOf(s)
	v := make(map[*stream]uint64, len(c.after)+1)
	for x, n := range c.after {
		v[x] = n
	}
	v[s] = c.n
	return v
}

// ckMerge makes c wait for the uses in v.
func ckMerge(c *ckClock, v map[*stream]uint64) {
	for x, n := range v {
		c.after[x] = max(c.after[x], n)
	}
}

// checkRecord records the clock of s in e (Event.Record).
func checkRecord(e *event, s *stream) {
	streamCheck.mu.Lock()
	if streamCheck.events == nil {
		streamCheck.events = make(map[*event]map[*stream]uint64)
	}
	streamCheck.events[e] = ckSnapshot(s)
	streamCheck.mu.Unlock()
}

// checkWait makes t wait for the clock e was recorded at (Stream.WaitEvent).
func checkWait(t *stream, e *event) {
	streamCheck.mu.Lock()
	if v := streamCheck.events[e]; v != nil {
		ckMerge(ckClockOf(t), v)
	}
	streamCheck.mu.Unlock()
}

// checkForget forgets m (freed).
func checkForget(m *memBase) {
	if !streamCheck.on.Load() {
		return
	}
	streamCheck.mu.Lock()
	delete(streamCheck.mems, m)
	streamCheck.mu.Unlock()
}

// ckLookup returns the allocation whose address Ptr returned and that holds p.
func ckLookup(p cudaraw.CUdeviceptr) *memBase {
	streamCheck.mu.Lock()
	defer streamCheck.mu.Unlock()
	for m, sh := range streamCheck.mems {
		if sh.taken != "" && p >= m.ptr && p < m.ptr+cudaraw.CUdeviceptr(m.size) {
			return m
		}
	}
	return nil
}

// checkLaunch checks the CUdeviceptr arguments of a launch queued on t, what
// naming it ("a launch of f").
func checkLaunch(args []any, t *stream, what string) {
	checkQueued(rawArgs(nil, args, "", 0), t, callSite()+" ("+what+")")
}

// checkQueued checks raw uses queued on t, at site; on a capturing stream they are
// kept for the graph's launches instead.
func checkQueued(raw []rawUse, t *stream, site string) {
	if t.capture.Load() != nil {
		leaseIfCapturing(t, func(ls *leaseSet) {
			for _, r := range raw {
				r.site = site + ", captured"
				ls.raw = append(ls.raw, r)
			}
		})
		return
	}
	checkRaw(raw, t, site)
}

// rawArgs appends args' CUdeviceptr arguments to raw, each with site and node.
func rawArgs(raw []rawUse, args []any, site string, node cudaraw.CUgraphNode) []rawUse {
	for i := range args {
		if p, ok := args[i].(cudaraw.CUdeviceptr); ok {
			raw = append(raw, rawUse{addr: p, site: site, node: node})
		}
	}
	return raw
}

// rawNodeArgs replaces the raw uses of kernel node n in raw with args' (the node's
// new arguments, set at site).
func rawNodeArgs(raw []rawUse, n cudaraw.CUgraphNode, args []any, site string) []rawUse {
	keep := raw[:0]
	for _, r := range raw {
		if r.node != n {
			keep = append(keep, r)
		}
	}
	return rawArgs(keep, args, site, n)
}

// checkRaw checks raw uses queued on t, at site (those with their own site, a
// node's, name it too).
func checkRaw(raw []rawUse, t *stream, site string) {
	for _, r := range raw {
		m := ckLookup(r.addr)
		if m == nil {
			continue // not memory whose address Ptr returned: not the package's to check
		}
		s := site
		if r.site != "" {
			s += ", added at " + r.site
		}
		checkUse(m, r.addr, t, true, s)
	}
}

// callSite returns the file:line of the first caller outside the module's
// packages (a test file of the module counts as outside).
func callSite() string {
	pcs := make([]uintptr, 32)
	n := runtime.Callers(2, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, "github.com/gocuda/gocuda/") || strings.HasSuffix(f.File, "_test.go") {
			return fmt.Sprintf("%s:%d", f.File, f.Line)
		}
		if !more {
			return "unknown"
		}
	}
}
