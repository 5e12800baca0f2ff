package cuda

// Hooks for the peer tests (package cuda_test).

// DefaultStreamWaitsForTest returns the hand-off waits queued on c's default
// stream, which stands for a copy between contexts in the uses of the buffer of c
// (it waits for the copy).
func DefaultStreamWaitsForTest(c *Context) int64 {
	ms, err := c.memory()
	if err != nil {
		panic(err)
	}
	return ms.defStream.waits.Load()
}

// PeerPairsForTest returns the pairs of contexts whose peer access
// EnablePeerAccess has enabled and remembers.
func PeerPairsForTest() int {
	peers.mu.Lock()
	defer peers.mu.Unlock()
	return len(peers.on)
}
