package cuda

// Hooks for the external memory tests (package cuda_test).

// OOMReclaimsForTest returns how many times an allocation reclaimed after running
// out of memory.
func OOMReclaimsForTest() int64 { return oomReclaims.Load() }

// PressureCollectionsForTest returns how many pressure collections ran.
func PressureCollectionsForTest() int64 { return pressure.collections.Load() }

// WrapReclaimsForTest returns how many background reclaims wrapped memory started.
func WrapReclaimsForTest() int64 { return wrapReclaims.Load() }

// SetNoHostPoolsForTest makes contexts set up afterwards use the fallback
// allocators.
func SetNoHostPoolsForTest(on bool) { testNoHostPools = on }

// TrimPoolsForTest returns the context's unused pool memory to the driver.
func TrimPoolsForTest(c *Context) {
	if ms, err := c.memory(); err == nil {
		ms.trim()
	}
}

// FlushCachesForTest gives the context's cached device blocks back to the pool, as
// an allocation that ran out of memory does.
func FlushCachesForTest(c *Context) {
	if ms, err := c.memory(); err == nil {
		ms.flushDeviceCaches()
	}
}

// ContextsForTest returns the number of contexts of NewContext not yet destroyed.
func ContextsForTest() int {
	n := 0
	contexts.Range(func(_, v any) bool {
		if !v.(*ctxState).primary {
			n++
		}
		return true
	})
	return n
}

// PrimariesForTest returns the number of devices the package keeps a primary
// context entry for.
func PrimariesForTest() int {
	n := 0
	primaries.Range(func(_, _ any) bool { n++; return true })
	return n
}

// HoldWaitsForTest returns how many closes waited for calls holding their object
// (or context).
func HoldWaitsForTest() int64 { return holdWaits.Load() }

// HandOffsForTest returns the number of hand-off waits queued so far on the given
// streams.
func HandOffsForTest(streams ...*Stream) int64 {
	var n int64
	for _, s := range streams {
		n += s.waits.Load()
	}
	return n
}

// DisposalWaitsForTest returns the hand-off waits queued on c's disposal stream (the
// joins of frees).
func DisposalWaitsForTest(c *Context) int64 {
	d, err := c.disposalStream()
	if err != nil {
		panic(err)
	}
	return d.waits.Load()
}

// PoolStatsForTest returns the state of c's stream pool for opts.
func PoolStatsForTest(c *Context, opts ...StreamOption) (idle, lent int, created, destroyed, peak int64) {
	cfg := configOf(opts)
	p, err := c.streamPool(cfg)
	if err != nil {
		panic(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle), p.lent, p.created.Load(), p.destroyed.Load(), p.peak.Load()
}

// UsesForTest returns the number of streams with uses of b recorded.
func UsesForTest(b *DeviceBuffer) int {
	a := &b.m.owner().acc
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.uses)
}

// StreamCheckForTest turns the stream checker on or off.
func StreamCheckForTest(on bool) { streamCheck.on.Store(on) }
