package cuda

import (
	"time"
	"unsafe"
)

// Hooks for the staged-copy tests and benchmarks (package cuda_test).

// Staging is the staged-copy tuning (staged.go's knobs).
type Staging struct {
	Threshold, Chunk, MinPiece, Pieces, Depth, Keep, Workers, WorkerMin int
}

// StagingForTest returns the current tuning.
func StagingForTest() Staging {
	return Staging{stageThreshold, stageChunk, stageMinPiece, stagePieces, stageDepth, stageKeep, stageWorkers, stageWorkerMin}
}

// SetStagingForTest sets the tuning and returns the previous one. Set it while no
// copy runs.
func SetStagingForTest(st Staging) Staging {
	old := StagingForTest()
	stageThreshold, stageChunk, stageMinPiece, stagePieces = st.Threshold, st.Chunk, st.MinPiece, st.Pieces
	stageDepth, stageKeep, stageWorkers, stageWorkerMin = st.Depth, st.Keep, st.Workers, st.WorkerMin
	return old
}

// StagedCopiesForTest returns how many copies went through the staging ring.
func StagedCopiesForTest() int64 { return stagedCopies.Load() }

// StagePieceForTest returns the piece size of a staged copy of n bytes.
func StagePieceForTest(n int) int { return stagePiece(n) }

// StageCachedForTest returns the number of idle staging buffers of c.
func StageCachedForTest(c *Context) int {
	v, ok := stageCaches.Load(c.ctxState)
	if !ok {
		return 0
	}
	sc := v.(*stageCache)
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return len(sc.free)
}

// DropStagesForTest empties the staging caches, as resource.Reclaim does.
func DropStagesForTest() { dropStages() }

// CopyWait is the synchronous copies' wait tuning and API choice.
type CopyWait struct {
	Spin  bool          // poll and yield for the copy's expected duration before blocking
	Rate  float64       // bytes per second the expected duration assumes
	Max   time.Duration // the longest such spin
	Typed bool          // Copy between pinned and device memory calls cuMemcpyHtoD/DtoHAsync
}

// SetCopyWaitForTest sets the tuning and returns the previous one.
func SetCopyWaitForTest(w CopyWait) CopyWait {
	old := CopyWait{copyWaitSpin, copyWaitRate, copyWaitMax, copyTyped}
	copyWaitSpin, copyWaitRate, copyWaitMax, copyTyped = w.Spin, w.Rate, w.Max, w.Typed
	return old
}

// PageLockedForTest reports whether the copies take the n bytes at p for page-locked
// memory of the package (hostRanges).
func PageLockedForTest(p unsafe.Pointer, n int) bool { return inHostRanges(uintptr(p), n) }

// FlagWaits are the counters of synchronous copies that waited on a flag word
// (copyflag.go).
type FlagWaits struct{ Waited, Blocked, Polled int64 }

// FlagWaitsForTest returns the counters.
func FlagWaitsForTest() FlagWaits {
	return FlagWaits{flagWaits.Load(), flagBlocked.Load(), flagPolled.Load()}
}

// SetFlagLongHookForTest sets the function a flag wait runs as it gives up
// polling, and returns the previous one.
func SetFlagLongHookForTest(f func()) func() {
	old := flagLongHook
	flagLongHook = f
	return old
}

// FlagSlotsForTest returns the idle slots of ctx's flag page (-1: none made).
func FlagSlotsForTest(ctx *Context) int {
	ms, err := ctx.memory()
	if err != nil {
		return -1
	}
	p := ms.flags.Load()
	if p == nil {
		return -1
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.free)
	if p.last.Load() != 0 {
		n++
	}
	return n
}

// FlagSlots is the number of words of a context's flag page.
const FlagSlots = flagSlots

// SetBounceMaxForTest sets the largest pageable device-to-host copy that bounces
// (bounce.go) and returns the previous value.
func SetBounceMaxForTest(n int) int {
	old := bounceMax
	bounceMax = n
	return old
}

// BouncedCopiesForTest returns the number of copies that bounced.
func BouncedCopiesForTest() int64 { return bouncedCopies.Load() }

// BounceKeptForTest reports whether ctx keeps an idle bounce buffer.
func BounceKeptForTest(ctx *Context) bool {
	ms := ctx.ctxState.mem.Load()
	return ms != nil && ms.bounce.Load() != nil
}
