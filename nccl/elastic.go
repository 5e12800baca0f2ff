package nccl

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/nccl/ncclraw"
)

// ErrRankGone is matched by the error of a communicator one of whose ranks is gone
// (*RankGoneError).
var ErrRankGone = errors.New("nccl: a rank of the communicator is gone")

// RankGoneError is the error of a watched communicator (Join through a
// WatchingRendezvous, and what Shrink makes of it) once the watch reported ranks
// gone: Comm.Wait, Comm.Err, the collectives (before NCCL is called) and the calls
// that poll return it. The communicator is not aborted: it is kept, failed, for
// Shrink (which shrinks it with NCCL_SHRINK_ABORT, ending its pending work) or for
// the caller's Abort or Close (which then aborts it, without waiting for its
// pending work). It matches ErrRankGone, and Result where NCCL reported an
// asynchronous error meanwhile.
type RankGoneError struct {
	Rank, Size int // the communicator's rank and number of ranks
	// Ranks are the ranks gone, in the communicator's numbering, ascending. They
	// include Rank where the watch lost this rank itself (the others take it for
	// gone): it cannot take part in a Shrink, and should Abort.
	Ranks []int
	// Result is the asynchronous error NCCL reported meanwhile (likely the loss's
	// consequence), ncclSuccess if none.
	Result ncclraw.Result
}

func (e *RankGoneError) Error() string {
	s := fmt.Sprintf("nccl: rank %d of %d: rank(s) %v gone", e.Rank, e.Size, e.Ranks)
	if e.Result != ncclraw.NcclSuccess {
		s += fmt.Sprintf(" (NCCL: %v)", e.Result)
	}
	return s
}

// Unwrap returns ErrRankGone, and Result if it is an error.
func (e *RankGoneError) Unwrap() []error {
	if e.Result != ncclraw.NcclSuccess {
		return []error{ErrRankGone, e.Result}
	}
	return []error{ErrRankGone}
}

// commWatch is a communicator's hold on its rank's Membership.
type commWatch struct {
	m *Membership
	// members[i] is the rendezvous's rank of the communicator's rank i (Shrink
	// renumbers); nil: the same.
	members []int
	bound   time.Duration // how late a report may come (WatchingRendezvous)
	once    sync.Once
}

// release drops the hold once: leaving for a Close.
func (w *commWatch) release(leaving bool) {
	if w != nil {
		w.once.Do(func() { w.m.release(leaving) })
	}
}

// gone returns the communicator's ranks reported gone, nil if none (or unwatched).
func (w *commWatch) gone() []int {
	if w == nil || w.m.ngone.Load() == 0 {
		return nil
	}
	ranks := w.m.Ranks()
	if w.members == nil {
		return ranks
	}
	var out []int
	for i, r := range w.members {
		if slices.Contains(ranks, r) {
			out = append(out, i)
		}
	}
	return out
}

// shrunk is the watch of the communicator that excludes the ranks excl (sorted) of
// w's: the same membership, held once more.
func (w *commWatch) shrunk(excl []int, size int) *commWatch {
	if w == nil {
		return nil
	}
	var members []int
	for i := range size {
		if _, found := slices.BinarySearch(excl, i); !found {
			r := i
			if w.members != nil {
				r = w.members[i]
			}
			members = append(members, r)
		}
	}
	w.m.acquire()
	return &commWatch{m: w.m, members: members, bound: w.bound}
}

// watch gives c its membership hold w (before c is shared), released with c, or
// without a goodbye once c is garbage (the rank left without closing it).
func (c *Comm) watch(w *commWatch) {
	if w == nil {
		return
	}
	c.w = w
	runtime.AddCleanup(c, func(w *commWatch) { w.release(false) }, w)
}

// goneErr returns the *RankGoneError of a communicator with ranks gone (result:
// NCCL's asynchronous state), nil if none.
func (in *comm) goneErr(result ncclraw.Result) error {
	gone := in.w.gone()
	if gone == nil {
		return nil
	}
	if result == ncclraw.NcclInProgress {
		result = ncclraw.NcclSuccess
	}
	return &RankGoneError{Rank: in.rank, Size: in.size, Ranks: gone, Result: result}
}

// settle gives the watch of a communicator that NCCL reports broken (err, an
// *AsyncError) its bound to name a rank gone: NCCL often sees a peer's loss as
// soon as the watch does. It returns the *RankGoneError then (the communicator is
// kept for Shrink), else err (the communicator is then aborted), at the latest
// after the bound, at once if done is closed or Abort is called. The call must be
// held.
func (in *comm) settle(done <-chan struct{}, err error) error {
	var ae *AsyncError
	w := in.w
	if w == nil || w.bound <= 0 || !errors.As(err, &ae) {
		return err
	}
	limit := time.NewTimer(w.bound)
	defer limit.Stop()
	tick := time.NewTicker(pollMax)
	defer tick.Stop()
	for {
		changed := w.m.Changed()
		if gerr := in.goneErr(ae.Result); gerr != nil {
			return gerr
		}
		select {
		case <-changed:
		case <-tick.C:
			if in.state.Load() == stAborting {
				return err
			}
		case <-limit.C:
			return err
		case <-done:
			return err
		}
	}
}

// RankAfter returns the rank that rank has once the ranks exclude leave a
// communicator (Shrink, Rebuild): the ranks that remain keep their order and are
// renumbered from 0, so rank r becomes r less the number of excluded ranks below
// it. It returns -1 if rank is excluded.
func RankAfter(rank int, exclude []int) int {
	n := 0
	for _, x := range exclude {
		if x == rank {
			return -1
		}
		if x < rank {
			n++
		}
	}
	return rank - n
}

// checkExclude checks the ranks a rank of a communicator of size ranks excludes:
// each once, in range, not rank itself, and (unless empty is allowed) at least
// one; it returns them sorted.
func checkExclude(op string, rank, size int, exclude []int, empty bool) ([]int, error) {
	excl := slices.Sorted(slices.Values(exclude))
	switch {
	case len(excl) == 0 && !empty:
		return nil, fmt.Errorf("nccl: %s: %w: no ranks to exclude", op, cuda.ErrInvalidArgument)
	case len(excl) > 0 && (excl[0] < 0 || excl[len(excl)-1] >= size):
		return nil, fmt.Errorf("nccl: %s: %w: ranks %v out of range 0..%d", op, cuda.ErrInvalidArgument, exclude, size-1)
	case len(slices.Compact(slices.Clone(excl))) != len(excl):
		return nil, fmt.Errorf("nccl: %s: %w: ranks %v: a rank twice", op, cuda.ErrInvalidArgument, exclude)
	case slices.Contains(excl, rank):
		return nil, fmt.Errorf("nccl: %s: %w: rank %d excludes itself (%v); the ranks excluded do not take part", op, cuda.ErrInvalidArgument, rank, exclude)
	}
	return excl, nil
}

// Shrink makes the communicator of the ranks that remain when the ranks exclude
// (in this communicator's numbering) leave it, without a new rendezvous:
// ncclCommShrink (NCCL 2.27 and later; with an older library the error is the raw
// layer's *dl.SymbolError, matching dl.ErrSymbolNotFound). Every remaining rank
// calls it, with the same ranks; the excluded ones do not (they Close or Abort
// their communicator). Its rank in the new communicator is RankAfter(c.Rank(),
// exclude), of c.Size()-len(exclude) ranks, on the same device.
//
// A communicator that has failed, with ranks gone (a *RankGoneError), is shrunk
// with NCCL_SHRINK_ABORT, which first ends its pending work; exclude must then hold
// every rank gone so far, and c is aborted once the new communicator is made (it
// is good for nothing else). A healthy communicator is shrunk with
// NCCL_SHRINK_DEFAULT, which needs it to have no work pending with the excluded
// ranks; c stays open, the caller's to use and to Close.
//
// The ranks excluded must be distinct, in range and other than c.Rank(), and at
// least one: otherwise the error matches cuda.ErrInvalidArgument, before any NCCL
// call. Shrink waits for the new communicator as Join does: if ctx ends first,
// NCCL fails, a rank of the new one is reported gone (the error is then c's
// *RankGoneError, naming every rank gone so far: call Shrink again with them), or
// c is aborted meanwhile, the new communicator is aborted and c is left as it was.
// A closed c gives an error matching cuda.ErrClosed. Shrink holds c until it
// returns: Close and Abort from other goroutines wait for it (an Abort ends its
// wait).
//
// The new communicator is watched by c's watch (the membership of c's rank), as
// long as that goes on: with TCPRendezvous, while its rank 0 is alive; Rebuild
// renews it.
func (c *Comm) Shrink(ctx context.Context, exclude []int) (*Comm, error) {
	if c == nil || c.comm == nil {
		return nil, fmt.Errorf("nccl: shrink: %w: nil communicator", cuda.ErrInvalidArgument)
	}
	excl, err := checkExclude("shrink", c.rank, c.size, exclude, false)
	if err != nil {
		return nil, err
	}
	var child *Comm
	flags := int32(ncclraw.NCCL_SHRINK_DEFAULT)
	c.mu.Lock()
	err = c.withCall(func() error {
		gone := c.w.gone()
		for _, g := range gone {
			if g == c.rank {
				return &RankGoneError{Rank: c.rank, Size: c.size, Ranks: gone}
			}
			if _, found := slices.BinarySearch(excl, g); !found {
				return fmt.Errorf("%w: rank %d is gone and not excluded (ranks gone: %v)", cuda.ErrInvalidArgument, g, gone)
			}
		}
		if gone != nil {
			flags = ncclraw.NCCL_SHRINK_ABORT
		}
		list := make([]int32, len(excl))
		for i, r := range excl {
			list[i] = int32(r)
		}
		cfg := config()
		err := c.ctx.Locked(func() error {
			var h ncclraw.NcclComm
			err := raw.shrink(c.h, list, &h, &cfg, flags)
			if h != 0 {
				child = newComm(h, RankAfter(c.rank, excl), c.size-len(excl), c.dev, c.ctx)
				child.watch(c.w.shrunk(excl, c.size))
			}
			if errors.Is(err, ncclraw.ErrInProgress) {
				err = nil
			}
			if err != nil {
				err = fmt.Errorf("ncclCommShrink: %w", err)
			}
			return err
		})
		if err == nil && child == nil {
			err = fmt.Errorf("%w: NCCL made no communicator", ncclraw.ErrInternalError)
		}
		if err == nil {
			// The parent is held until the new communicator is ready: NCCL builds it
			// from the parent's.
			err = child.withCall(func() error { return child.pollWith(ctx, c.comm) })
		}
		return err
	})
	c.mu.Unlock()
	if err != nil {
		if child != nil {
			_ = child.Abort()
			var rg *RankGoneError
			if errors.As(err, &rg) {
				if gerr := c.goneErr(ncclraw.NcclSuccess); gerr != nil {
					err = gerr // in c's numbering, for the next try
				}
			}
		}
		return nil, fmt.Errorf("nccl: shrink: rank %d of %d, excluding %v: %w", c.rank, c.size, excl, err)
	}
	if flags == ncclraw.NCCL_SHRINK_ABORT {
		_ = c.shut(true)
	}
	return child, nil
}

// Rebuild makes the communicator of the ranks that remain when the ranks exclude
// leave c, through a new rendezvous rv: Join(ctx, rv, RankAfter(c.Rank(), exclude),
// c.Size()-len(exclude), c.Device()). Every remaining rank calls it, with the same
// ranks and a rendezvous of the same new job (a TCPRendezvous at the address of the
// new rank 0, which is the lowest rank not excluded; an etcd rendezvous under a new
// job name). exclude may be empty (a communicator aborted by an asynchronous
// error, rebuilt with the same ranks); otherwise it is checked as Shrink checks
// it, before anything is done.
//
// It works where Shrink cannot: with an NCCL older than 2.27, on a communicator
// already aborted or closed (an *AsyncError, a wait whose context ended), and to
// renew the watch where it ended (the TCP rendezvous's rank 0 is gone). Shrink is
// the recommended way otherwise: it needs no rendezvous, and NCCL reuses what it
// knows of the ranks. c, if still open, is aborted first when it has failed (its
// pending work would otherwise wait for the lost ranks), and stays the caller's
// when it is healthy.
func (c *Comm) Rebuild(ctx context.Context, rv Rendezvous, exclude []int) (*Comm, error) {
	if c == nil || c.comm == nil {
		return nil, fmt.Errorf("nccl: rebuild: %w: nil communicator", cuda.ErrInvalidArgument)
	}
	excl, err := checkExclude("rebuild", c.rank, c.size, exclude, true)
	if err != nil {
		return nil, err
	}
	if c.w.gone() != nil {
		_ = c.Abort()
	}
	return Join(ctx, rv, RankAfter(c.rank, excl), c.size-len(excl), c.dev)
}
