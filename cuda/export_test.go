package cuda

// IPCEventCounts returns how many interprocess events the exporter made and how many
// of them are free, for the tests.
func IPCEventCounts(e *IPCExport) (own, free int) {
	e.ev.mu.Lock()
	defer e.ev.mu.Unlock()
	return len(e.ev.own), len(e.ev.free)
}

// ReclaimForTest gives back what c's pools and caches hold unused, as an
// out-of-memory retry does, for the tests that measure the device's free memory.
func ReclaimForTest(c *Context) error {
	ms, err := c.memory()
	if err != nil {
		return err
	}
	ms.reclaimForOOM()
	return nil
}
