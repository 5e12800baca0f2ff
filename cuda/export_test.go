package cuda

// IPCEventCounts returns how many interprocess events the exporter made and how many
// of them are free, for the tests.
func IPCEventCounts(e *IPCExport) (own, free int) {
	e.ev.mu.Lock()
	defer e.ev.mu.Unlock()
	return len(e.ev.own), len(e.ev.free)
}
