package cuda

import (
	"runtime/pprof"
	"sync/atomic"
)

// MemoryProfileName is the name of the runtime/pprof profile of live GPU-visible
// allocations (device, pinned, unified and wrapped buffers) with the stacks that
// allocated them. It is empty until EnableMemoryProfile(true).
//
// Like the goroutine or block profiles it counts objects, not bytes: each sample is
// one live buffer, and the allocating function (Alloc, AllocHost, AllocManaged,
// Wrap…) at the top of the stack tells the kind. To look at it:
//
//	cuda.EnableMemoryProfile(true)
//	...
//	f, _ := os.Create("gpu.pprof")
//	pprof.Lookup(cuda.MemoryProfileName).WriteTo(f, 0)
//
// then `go tool pprof -top gpu.pprof` (or -web, -list Alloc). A program serving
// net/http/pprof exposes it at /debug/pprof/github.com/gocuda/gocuda/cuda.memory,
// so `go tool pprof http://host/debug/pprof/github.com/gocuda/gocuda/cuda.memory`
// works too; WriteTo with debug=1 gives a text listing. MemoryStatus reports the
// bytes.
const MemoryProfileName = "github.com/gocuda/gocuda/cuda.memory"

var memProfile = pprof.NewProfile(MemoryProfileName)

var memProfiling atomic.Bool

// profileKeys are the profile's keys: numbers, so that the profile does not keep
// buffers reachable.
var profileKeys atomic.Uint64

// EnableMemoryProfile turns recording into the memory profile on or off and returns
// the previous setting. While on, every allocation records its stack (about a
// microsecond); while off (the default) it costs one atomic load. Buffers recorded
// while it was on leave the profile when freed, even after it is turned off.
func EnableMemoryProfile(on bool) (previous bool) {
	return memProfiling.Swap(on)
}

// profileAdd records m in the profile when profiling is on. The package's exported
// allocating function is skip frames above profileAdd's caller: the trace starts
// there. (Profile.Add's skip 0 is Add itself, 1 profileAdd; not inlined, so that
// the count holds.)
func profileAdd(m *memBase, skip int) {
	if memProfiling.Load() {
		profileRecord(m, skip+1)
	}
}

//go:noinline
func profileRecord(m *memBase, skip int) {
	m.prof = profileKeys.Add(1)
	memProfile.Add(m.prof, skip+1)
}

// profileRemove removes m from the profile.
func profileRemove(m *memBase) {
	if m.prof != 0 {
		memProfile.Remove(m.prof)
		m.prof = 0
	}
}
