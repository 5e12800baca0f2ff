package resource

// Drain runs the non-blocking releases queued so far, on the calling
// goroutine. The cuda package calls it at every allocation and
// synchronization, so such releases run promptly; when nothing is queued
// it costs a single atomic load. It does nothing while a graph capture is
// in progress.
func Drain() {
	if std.lanes[laneNonBlocking].head.Load() != nil {
		std.drainLane(laneNonBlocking)
	}
}

// Reclaim releases everything that can be released now, in this call: it
// runs a garbage collection, waits until the runtime has run the
// finalizers that collection queued (so every object that had become
// unreachable is queued), then runs both lanes, blocking releases
// included, and waits for releases that other goroutines had already
// taken from the lanes. If that released something it collects again (up
// to a few rounds), for objects that were reachable only from objects just
// released. The allocator calls it on out-of-memory before retrying.
//
// It returns the number of release functions run. No lock is held while
// collecting garbage or running releases. While a graph capture is in
// progress it releases nothing and returns ErrCaptureInProgress; while it
// runs releases, BeginCapture fails with ErrReclaimInProgress.
//
// Called from inside a release function, Reclaim does not wait for the
// releases that other goroutines are running.
func Reclaim() (released int, err error) { return std.reclaim() }

// BeginCapture closes the capture gate: until the matching EndCapture,
// nothing is released (lanes keep queuing, and Registration.Release
// defers). Captures nest; the gate reopens when the last one ends. The
// cuda package calls it before starting a stream capture.
//
// It first waits for releases already running on other goroutines (a
// routine drain, an explicit Release), which are short, but it does not
// wait for Reclaim: while Reclaim runs releases (which may block for
// hundreds of milliseconds) it fails with ErrReclaimInProgress and the
// gate stays open.
func BeginCapture() error { return std.beginCapture() }

// EndCapture ends a capture started by a successful BeginCapture. When
// the last capture ends, the non-blocking releases queued meanwhile
// (including deferred explicit releases) run on the calling goroutine
// before it returns; blocking ones stay queued for Reclaim. It panics
// without a matching BeginCapture.
func EndCapture() { std.endCapture() }

// Status returns a snapshot of the package's counters, for tests,
// diagnostics and device reports.
func Status() Stats { return std.status() }
