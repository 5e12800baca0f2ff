package resource

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
)

// maxLeakDepth is the number of frames recorded per creation stack.
const maxLeakDepth = 32

// callSite is a creation stack recorded in leak-tracking mode.
type callSite struct {
	pcs [maxLeakDepth]uintptr
}

type leakKey struct {
	kind string
	pcs  [maxLeakDepth]uintptr
}

//go:noinline
func captureSite(skip int) *callSite {
	s := new(callSite)
	runtime.Callers(skip, s.pcs[:])
	return s
}

// Leak is one creation site of objects that were released by the
// finalizer path instead of an explicit Release.
type Leak struct {
	// Kind is the resource kind (Kind option or Go type name).
	Kind string
	// Site is the innermost frame of the creation stack (the caller of
	// ResourceFinalizer, moved outward by CallerSkip), "function file:line".
	Site string
	// Stack is the creation stack, one "function file:line" frame a line.
	Stack string
	// Count is the number of objects created here and leaked.
	Count uint64
}

// String formats the leak as "N × kind created at site".
func (l Leak) String() string {
	return fmt.Sprintf("%d × %s created at %s", l.Count, l.Kind, l.Site)
}

// EnableLeakTracking turns leak-tracking mode on or off and returns the
// previous setting. It is also turned on at start-up by the environment
// variable GOCUDA_LEAKS=1. When on, every registration records its creation
// stack, and every object released through the finalizer path (it was
// never explicitly released) is counted against that stack; see Leaks.
// Only registrations made while it is on are tracked. When off it costs
// one atomic load per registration.
func EnableLeakTracking(on bool) (previous bool) { return std.leakOn.Swap(on) }

// Leaks returns the creation sites of leaked objects with their counts,
// most leaks first, then ordered by site, kind and stack: deterministic.
// Objects count when their release runs (or is dropped), so call Reclaim
// first to count everything unreachable.
func Leaks() []Leak { return std.leakReport() }

func (q *queue) countLeak(r *Registration) {
	k := leakKey{kind: r.kindName(), pcs: r.site.pcs}
	q.leakMu.Lock()
	q.leaks[k]++
	q.leakMu.Unlock()
}

func (q *queue) leakReport() []Leak {
	q.leakMu.Lock()
	keys := make([]leakKey, 0, len(q.leaks))
	counts := make([]uint64, 0, len(q.leaks))
	for k, n := range q.leaks {
		keys = append(keys, k)
		counts = append(counts, n)
	}
	q.leakMu.Unlock()
	out := make([]Leak, len(keys))
	for i, k := range keys {
		out[i] = symbolize(k)
		out[i].Count = counts[i]
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		if a.Site != b.Site {
			return a.Site < b.Site
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Stack < b.Stack
	})
	return out
}

func symbolize(k leakKey) Leak {
	n := 0
	for n < len(k.pcs) && k.pcs[n] != 0 {
		n++
	}
	l := Leak{Kind: k.kind}
	var b strings.Builder
	frames := runtime.CallersFrames(k.pcs[:n])
	for {
		f, more := frames.Next()
		if f.Function != "" && f.Function != "runtime.goexit" {
			line := fmt.Sprintf("%s %s:%d", f.Function, f.File, f.Line)
			if l.Site == "" {
				l.Site = line
			}
			b.WriteString(line)
			b.WriteByte('\n')
		}
		if !more {
			break
		}
	}
	l.Stack = b.String()
	return l
}
