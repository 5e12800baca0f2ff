package cuda

// Hooks for the external memory tests (package cuda_test).

// OOMReclaimsForTest returns how many times an allocation reclaimed after running
// out of memory.
func OOMReclaimsForTest() int64 { return oomReclaims.Load() }

// PressureCollectionsForTest returns how many pressure collections ran.
func PressureCollectionsForTest() int64 { return pressure.collections.Load() }

// WrapReclaimsForTest returns how many background reclaims wrapped memory started.
func WrapReclaimsForTest() int64 { return wraps.reclaims.Load() }

// SetNoHostPoolsForTest makes contexts set up afterwards use the fallback
// allocators.
func SetNoHostPoolsForTest(on bool) { testNoHostPools = on }

// TrimPoolsForTest returns the context's unused pool memory to the driver.
func TrimPoolsForTest(c *Context) {
	if ms, err := memFor(c); err == nil {
		ms.trim()
	}
}

// FlushCachesForTest gives the context's cached device blocks back to the pool, as
// an allocation that ran out of memory does.
func FlushCachesForTest(c *Context) {
	if ms, err := memFor(c); err == nil {
		ms.flushDeviceCaches()
	}
}
