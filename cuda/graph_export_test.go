package cuda

// Hooks for the graph tests (package cuda_test).

// ReleasePostponedForTest reports whether the release of x — a *DeviceBuffer,
// *HostBuffer, *Module or *Event closed while graphs lease it — is waiting for the
// last lease, and how many leases x has.
func ReleasePostponedForTest(x any) (postponed bool, leases int) {
	var ls *leaseState
	switch v := x.(type) {
	case *DeviceBuffer:
		ls = v.m.owner().lease.Load()
	case *HostBuffer:
		ls = v.m.lease.Load()
	case *Module:
		ls = &v.lease
	case *Event:
		ls = &v.lease
	default:
		panic("ReleasePostponedForTest: not a leased kind")
	}
	if ls == nil {
		return false, 0
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.pending != nil, ls.n
}

// HostFuncsForTest returns how many host node functions are registered.
func HostFuncsForTest() int {
	hostFnMu.Lock()
	defer hostFnMu.Unlock()
	return len(hostFns)
}
