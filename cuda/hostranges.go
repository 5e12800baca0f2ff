package cuda

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
)

// hostRanges are the address ranges of the host-accessible memory this package
// allocated or registered (pinned, unified and wrapped blocks). The driver copies
// such memory by DMA, after the copy call returns; any other host memory a Go slice
// spans is pageable, which the driver reads (to the device) or writes (from it)
// before the call returns. A slice copy waits for the copy only in the first case
// (copyDirect). Lookups are lock-free (a sorted copy-on-write list): they are on
// every copy; blocks come and go rarely (they are cached).
//
// Memory page-locked outside this package (by the raw layer or another library) is
// not known here: a slice of it is copied as pageable memory is, without waiting.
// Ranges of a context destroyed with blocks still cached stay listed: a Go slice
// that later lands there is waited for, needlessly but correctly.
var hostRanges struct {
	mu   sync.Mutex
	list atomic.Pointer[[]hostRange] // sorted by start, not overlapping
}

// hostRange is the memory [start, end).
type hostRange struct{ start, end uintptr }

// addHostRange records n bytes at p as host-accessible memory of the package.
func addHostRange(p uintptr, n int) {
	if n <= 0 {
		return
	}
	hostRanges.mu.Lock()
	defer hostRanges.mu.Unlock()
	var old []hostRange
	if l := hostRanges.list.Load(); l != nil {
		old = *l
	}
	i, _ := slices.BinarySearchFunc(old, p, func(r hostRange, p uintptr) int { return cmp.Compare(r.start, p) })
	l := slices.Insert(slices.Clip(old), i, hostRange{p, p + uintptr(n)})
	hostRanges.list.Store(&l)
}

// removeHostRange forgets the range that starts at p.
func removeHostRange(p uintptr) {
	hostRanges.mu.Lock()
	defer hostRanges.mu.Unlock()
	l := hostRanges.list.Load()
	if l == nil {
		return
	}
	i, ok := slices.BinarySearchFunc(*l, p, func(r hostRange, p uintptr) int { return cmp.Compare(r.start, p) })
	if !ok {
		return
	}
	n := slices.Delete(slices.Clone(*l), i, i+1)
	hostRanges.list.Store(&n)
}

// inHostRanges reports whether [p, p+n) overlaps memory of hostRanges.
func inHostRanges(p uintptr, n int) bool {
	l := hostRanges.list.Load()
	if l == nil || n <= 0 {
		return false
	}
	// The first range that ends after p overlaps if it starts before p+n.
	i, _ := slices.BinarySearchFunc(*l, p, func(r hostRange, p uintptr) int {
		if r.end <= p {
			return -1
		}
		return 1
	})
	return i < len(*l) && (*l)[i].start < p+uintptr(n)
}
