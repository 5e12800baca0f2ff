package resource

import "fmt"

// Stats is a snapshot of the package's counters, as returned by Status.
// Counters are read one by one, so while releases are in flight a snapshot
// may be off by the releases moving between two counters.
//
// Every registration ends up in exactly one of: still live (its object is
// reachable), pending, released through a lane, released explicitly,
// cancelled or dropped.
type Stats struct {
	// Registered counts ResourceFinalizer calls.
	Registered uint64
	// PendingNonBlocking and PendingBlocking count releases queued in
	// each lane and not yet run (including explicit releases deferred by a
	// graph capture, which wait in the non-blocking lane).
	PendingNonBlocking, PendingBlocking int64
	// ReleasedNonBlocking and ReleasedBlocking count releases run from
	// each lane because their object became unreachable (the finalizer
	// path), including those that failed.
	ReleasedNonBlocking, ReleasedBlocking uint64
	// Explicit counts releases run through Registration.Release.
	Explicit uint64
	// Cancelled counts successful Registration.Cancel calls.
	Cancelled uint64
	// Failed counts releases (any path) whose function panicked or
	// returned an error, or whose context hook failed.
	Failed uint64
	// Dropped counts releases not run because their context had been
	// destroyed.
	Dropped uint64
	// Captures is the number of graph captures in progress.
	Captures int
}

// Live returns the number of registrations whose object is still
// reachable (neither queued, released, cancelled nor dropped).
func (s Stats) Live() int64 {
	return int64(s.Registered) - s.PendingNonBlocking - s.PendingBlocking -
		int64(s.ReleasedNonBlocking+s.ReleasedBlocking+s.Explicit+s.Cancelled+s.Dropped)
}

// String formats the snapshot on one line.
func (s Stats) String() string {
	return fmt.Sprintf("registered=%d live=%d pending=%d/%d released=%d/%d explicit=%d cancelled=%d failed=%d dropped=%d captures=%d (lanes: non-blocking/blocking)",
		s.Registered, s.Live(), s.PendingNonBlocking, s.PendingBlocking,
		s.ReleasedNonBlocking, s.ReleasedBlocking, s.Explicit, s.Cancelled,
		s.Failed, s.Dropped, s.Captures)
}

// status returns a snapshot of the counters.
func (q *queue) status() Stats {
	q.mu.Lock()
	captures := q.captures
	q.mu.Unlock()
	// Registered is read last so that Live never counts a release of a
	// registration made after the snapshot started.
	s := Stats{
		PendingNonBlocking:  q.lanes[laneNonBlocking].pending.Load(),
		PendingBlocking:     q.lanes[laneBlocking].pending.Load(),
		ReleasedNonBlocking: q.lanes[laneNonBlocking].released.Load(),
		ReleasedBlocking:    q.lanes[laneBlocking].released.Load(),
		Explicit:            q.explicit.Load(),
		Cancelled:           q.cancelled.Load(),
		Failed:              q.failed.Load(),
		Dropped:             q.dropped.Load(),
		Captures:            captures,
	}
	s.Registered = q.registered.Load()
	return s
}
