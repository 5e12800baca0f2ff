package resource

// Drain runs the non-blocking releases queued so far, on the calling
// goroutine. The cuda package calls it at every allocation and
// synchronization, so such releases run promptly; when nothing is queued
// it costs a single atomic load. It does nothing while the capture gate is
// closed (see the package documentation, Graph capture).
func Drain() {
	if std.lanes[laneNonBlocking].head.Load() != nil {
		std.drainLane(laneNonBlocking)
	}
}

// Reclaim releases everything that can be released now, in this call: it
// empties the library packages' caches of idle handles (cuBLAS, cuSPARSE and
// cuDNN handles, cuRAND generators, cuFFT plans), runs a garbage collection, waits until the runtime has run the
// finalizers that collection queued (so every object that had become
// unreachable is queued), then runs both lanes, blocking releases
// included, and waits for releases that other goroutines had already
// taken from the lanes. If that released something it collects again (up
// to a few rounds), for objects that were reachable only from objects just
// released. The allocator calls it on out-of-memory before retrying.
//
// It returns the number of release functions run. No lock is held while
// collecting garbage or running releases. While the capture gate is closed
// it releases nothing and returns ErrCaptureInProgress; while it runs
// releases, the gate cannot close (starting a capture fails with
// ErrReclaimInProgress).
//
// Called from inside a release function, Reclaim does not wait for the
// releases that other goroutines are running.
func Reclaim() (released int, err error) { return std.reclaim() }

// Status returns a snapshot of the package's counters, for tests,
// diagnostics and device reports.
func Status() Stats { return std.status() }
