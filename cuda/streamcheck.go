package cuda

import (
	"fmt"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
)

// The stream checker: a race detector for streams.
//
// The package orders every use of memory it queues (hand-off), but an address taken
// with Ptr escapes it: work queued with that address on another stream is ordered
// with nothing unless it goes through Enqueue with the memory among its uses. With
// the checker on (environment variable GOCUDA_STREAMCHECK=1 at start, or
// EnableStreamCheck), Ptr remembers, with its call site, the addresses it returns
// while GPU work on the memory is outstanding; a launch that passes such an address
// (as a CUdeviceptr argument) on a stream that neither had that work nor was ordered
// by an Enqueue of the memory is reported, with both call sites, to the handler (SetStreamCheckHandler; by default an error log). The
// checker costs a lookup per CUdeviceptr launch argument and a query per Ptr call;
// it is off by default.

// StreamRace is a report of the stream checker.
type StreamRace struct {
	Addr  cudaraw.CUdeviceptr // the address passed to the launch
	Taken string              // where Ptr returned it (file:line), with GPU work outstanding
	Used  string              // where it was launched on another stream that nothing ordered
}

// Error describes the race.
func (r StreamRace) Error() string {
	return fmt.Sprintf("cuda: stream check: address %#x, taken by Ptr at %s while GPU work on it was outstanding, "+
		"was used on another stream at %s that no Enqueue of the memory ordered (the work is not ordered)", uint64(r.Addr), r.Taken, r.Used)
}

var streamCheck struct {
	on      atomic.Bool
	mu      sync.Mutex
	taken   map[*memBase]*takenPtr
	handler func(StreamRace)
	reports atomic.Int64
}

// takenPtr is an address that Ptr returned with work outstanding.
type takenPtr struct {
	streams []*stream // the streams with the outstanding work, and those announced since
	site    string
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

// ptrTaken is Ptr's check: it remembers m's address if GPU work on m is outstanding.
func ptrTaken(m *memBase) {
	if m == nil || m.ctx == nil || m.hold.closed() {
		return
	}
	var d deps
	m.snapshotUses(&d)
	var busy []*stream
	for i := range d.n {
		if s := d.at(i).s; !streamIdle(s) {
			busy = append(busy, s)
		}
	}
	if len(busy) == 0 {
		return
	}
	site := callSite(3)
	streamCheck.mu.Lock()
	if streamCheck.taken == nil {
		streamCheck.taken = make(map[*memBase]*takenPtr)
	}
	streamCheck.taken[m.owner()] = &takenPtr{streams: busy, site: site}
	streamCheck.mu.Unlock()
}

// streamIdle reports whether s has no work outstanding (a closed stream's final
// event has passed).
func streamIdle(s *stream) bool {
	s.mu.RLock()
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

// checkUsed records that m's work on t was queued by the package or ordered by
// Enqueue: a launch of a taken address on t is ordered.
func checkUsed(m *memBase, t *stream) {
	if !streamCheck.on.Load() {
		return
	}
	streamCheck.mu.Lock()
	if tp := streamCheck.taken[m]; tp != nil {
		tp.streams = append(tp.streams, t)
	}
	streamCheck.mu.Unlock()
}

// checkForget forgets m (freed).
func checkForget(m *memBase) {
	if !streamCheck.on.Load() {
		return
	}
	streamCheck.mu.Lock()
	delete(streamCheck.taken, m)
	streamCheck.mu.Unlock()
}

// checkLaunch checks the CUdeviceptr arguments of a launch on t.
func checkLaunch(args []any, t *stream) {
	for i := range args {
		p, ok := args[i].(cudaraw.CUdeviceptr)
		if !ok {
			continue
		}
		streamCheck.mu.Lock()
		var race *StreamRace
		for m, tp := range streamCheck.taken {
			if p < m.ptr || p >= m.ptr+cudaraw.CUdeviceptr(m.size) {
				continue
			}
			ordered := false
			for _, s := range tp.streams {
				ordered = ordered || s == t
			}
			if !ordered {
				race = &StreamRace{Addr: p, Taken: tp.site, Used: callSite(3)}
			}
			break
		}
		h := streamCheck.handler
		streamCheck.mu.Unlock()
		if race == nil {
			continue
		}
		streamCheck.reports.Add(1)
		if h == nil {
			slog.Error(race.Error())
		} else {
			h(*race)
		}
	}
}

// callSite returns the file:line of the first caller outside this package, skip
// frames up.
func callSite(skip int) string {
	pcs := make([]uintptr, 16)
	n := runtime.Callers(skip, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, "github.com/gocuda/gocuda/cuda.") || strings.HasSuffix(f.File, "_test.go") {
			return fmt.Sprintf("%s:%d", f.File, f.Line)
		}
		if !more {
			return "unknown"
		}
	}
}
