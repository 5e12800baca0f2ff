package nccl

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/internal/errs"
	"github.com/gocuda/gocuda/nccl/ncclraw"
	"github.com/gocuda/gocuda/resource"
)

// Communicators are made non-blocking (ncclConfig_t.blocking = 0): no NCCL call
// blocks its thread, calls that cannot finish at once answer ncclInProgress, and this
// package polls ncclCommGetAsyncError until the communicator is ready. Every wait is
// therefore ours, and can end: with a context (NewComms, Join, Wait), or with Abort
// from another goroutine. Polling starts at once and backs off to pollMax.

// ErrAborted is matched by the error of an operation on a communicator that was
// aborted (Abort, a cancelled context, an asynchronous error), together with
// cuda.ErrClosed.
var ErrAborted = errors.New("nccl: communicator aborted")

// Comm is an NCCL communicator: one rank of a group of GPUs that run collectives
// together. NewComms makes the communicators of several GPUs of this process at once;
// Join makes one rank of a communicator whose ranks are in several processes.
//
// A Comm belongs to its device's primary context (cuda.Device.Context): collectives
// take streams and memory of that context. It is safe for concurrent use: NCCL
// communicators are not, so calls on one Comm are serialized.
//
// Close releases it (ncclCommFinalize, which waits for its queued work, then
// ncclCommDestroy); Abort releases it at once (ncclCommAbort), ending its pending
// work, and is the way out when a peer may have failed. Either one
// releases it; calling again returns an error matching cuda.ErrClosed and
// resource.ErrReleased. Both wait for the calls in progress, which are short (the
// communicator is non-blocking), except that Abort also ends the waits of the calls
// that poll. A Comm dropped without either is destroyed by resource.Reclaim (its
// release may wait for the GPU: headers/nccl.toml's resource row, measured by
// tools/blockprobe), never on the finalizer goroutine.
type Comm struct {
	*comm
}

type comm struct {
	h          ncclraw.NcclComm
	rank, size int
	dev        cuda.Device
	ctx        *cuda.Context
	order      uint64 // the lock order of communicators in a group

	mu      sync.Mutex   // serializes the calls on h
	life    sync.RWMutex // read-held by calls, write-held by the release
	state   atomic.Int32
	aborted atomic.Bool // the release was an abort
	reg     *resource.Registration
	w       *commWatch // the membership watch (Join through a WatchingRendezvous); nil: none
}

// States of a communicator.
const (
	stOpen     = iota
	stClosing  // Close waits for the calls in progress
	stAborting // Abort: the polling calls stop, then ncclCommAbort
	stClosed
	stAborted
)

var commOrder atomic.Uint64

// raw is the NCCL functions the idiomatic layer calls: the raw layer's, replaced by
// tests that run without NCCL (export_test.go).
var raw = struct {
	getUniqueID   func(*ncclraw.NcclUniqueId) error
	initRank      func(*ncclraw.NcclComm, int32, ncclraw.NcclUniqueId, int32, *ncclraw.NcclConfig) error
	getAsyncError func(ncclraw.NcclComm, *ncclraw.Result) error
	getLastError  func(ncclraw.NcclComm) (string, error)
	abort         func(ncclraw.NcclComm) error
	finalize      func(ncclraw.NcclComm) error
	destroy       func(ncclraw.NcclComm) error
	groupStart    func() error
	groupEnd      func() error
	allReduce     func(unsafe.Pointer, unsafe.Pointer, uint64, ncclraw.NcclDataType, ncclraw.NcclRedOp, ncclraw.NcclComm, cudaraw.CUstream) error
	broadcast     func(unsafe.Pointer, unsafe.Pointer, uint64, ncclraw.NcclDataType, int32, ncclraw.NcclComm, cudaraw.CUstream) error
	reduce        func(unsafe.Pointer, unsafe.Pointer, uint64, ncclraw.NcclDataType, ncclraw.NcclRedOp, int32, ncclraw.NcclComm, cudaraw.CUstream) error
	allGather     func(unsafe.Pointer, unsafe.Pointer, uint64, ncclraw.NcclDataType, ncclraw.NcclComm, cudaraw.CUstream) error
	reduceScatter func(unsafe.Pointer, unsafe.Pointer, uint64, ncclraw.NcclDataType, ncclraw.NcclRedOp, ncclraw.NcclComm, cudaraw.CUstream) error
	send          func(unsafe.Pointer, uint64, ncclraw.NcclDataType, int32, ncclraw.NcclComm, cudaraw.CUstream) error
	recv          func(unsafe.Pointer, uint64, ncclraw.NcclDataType, int32, ncclraw.NcclComm, cudaraw.CUstream) error
	shrink        func(ncclraw.NcclComm, []int32, *ncclraw.NcclComm, *ncclraw.NcclConfig, int32) error
}{
	ncclraw.GetUniqueId, ncclraw.CommInitRankConfig, ncclraw.CommGetAsyncError, ncclraw.GetLastError, ncclraw.CommAbort, ncclraw.CommFinalize, ncclraw.CommDestroy, ncclraw.GroupStart, ncclraw.GroupEnd,
	ncclraw.AllReduce, ncclraw.Broadcast, ncclraw.Reduce, ncclraw.AllGather, ncclraw.ReduceScatter, ncclraw.Send, ncclraw.Recv,
	commShrink,
}

// commShrink is ncclCommShrink with the excluded ranks as a slice.
func commShrink(h ncclraw.NcclComm, exclude []int32, newComm *ncclraw.NcclComm, cfg *ncclraw.NcclConfig, flags int32) error {
	var p *int32
	if len(exclude) > 0 {
		p = &exclude[0]
	}
	return ncclraw.CommShrink(h, p, int32(len(exclude)), newComm, cfg, flags)
}

// config is the configuration of every communicator: NCCL_CONFIG_INITIALIZER with
// blocking = 0.
func config() ncclraw.NcclConfig {
	const undef = ncclraw.NCCL_CONFIG_UNDEF_INT
	return ncclraw.NcclConfig{
		Size: uint64(unsafe.Sizeof(ncclraw.NcclConfig{})), Magic: 0xcafebeef, Version: ncclraw.NCCL_VERSION_CODE,
		Blocking: 0, CgaClusterSize: undef, MinCTAs: undef, MaxCTAs: undef, SplitShare: undef,
		TrafficClass: undef, CollnetEnable: undef, CTAPolicy: undef, ShrinkShare: undef, NvlsCTAs: undef,
		NChannelsPerNetPeer: undef, NvlinkCentricSched: undef,
	}
}

// newUniqueID is the newID of a Rendezvous: ncclGetUniqueId.
func newUniqueID() (ncclraw.NcclUniqueId, error) {
	var id ncclraw.NcclUniqueId
	if err := raw.getUniqueID(&id); err != nil {
		return id, fmt.Errorf("nccl: ncclGetUniqueId: %w", err)
	}
	return id, nil
}

// NewComms makes one communicator per device, of a group of len(devices) ranks in
// this process: rank i on devices[i], each in its device's primary context. The
// ranks are made together (ncclCommInitRankConfig in a group, which is what
// ncclCommInitAll does, made non-blocking); if ctx ends first, or NCCL fails, they
// are aborted and the error returned (wrapping ctx.Err() when it ended). Devices must
// be distinct: NCCL runs one rank per GPU.
//
// Collectives on several of them from one goroutine must be grouped (Group): each
// rank's collective waits on the GPU for the others', which the goroutine would only
// queue after it.
func NewComms(ctx context.Context, devices ...cuda.Device) ([]*Comm, error) {
	if len(devices) == 0 {
		return nil, fmt.Errorf("nccl: new communicators: %w: no devices", cuda.ErrInvalidArgument)
	}
	for i, d := range devices {
		if d < 0 || slices.Contains(devices[:i], d) {
			return nil, fmt.Errorf("nccl: new communicators: %w: devices %v (each once, none negative)", cuda.ErrInvalidArgument, devices)
		}
	}
	ctxs := make([]*cuda.Context, len(devices))
	for i, d := range devices {
		var err error
		if ctxs[i], err = d.Context(); err != nil {
			return nil, fmt.Errorf("nccl: new communicators: device %d: %w", d, err)
		}
	}
	id, err := newUniqueID()
	if err != nil {
		return nil, err
	}
	n := len(devices)
	comms := make([]*Comm, n)
	cfg := config()
	// NCCL's group is per thread: start, init and end on this one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	err = ctxs[0].Locked(func() error {
		if err := raw.groupStart(); err != nil {
			return err
		}
		var first error
		for i := range devices {
			// ncclCommInitRank takes the device of the current context.
			err := ctxs[i].Locked(func() error {
				var h ncclraw.NcclComm
				err := raw.initRank(&h, int32(n), id, int32(i), &cfg)
				if h != 0 {
					comms[i] = newComm(h, i, n, devices[i], ctxs[i])
				}
				return err
			})
			if err != nil && !errors.Is(err, ncclraw.ErrInProgress) && first == nil {
				first = fmt.Errorf("rank %d (device %d): %w", i, devices[i], err)
			}
		}
		if err := raw.groupEnd(); err != nil && !errors.Is(err, ncclraw.ErrInProgress) && first == nil {
			first = err
		}
		return first
	})
	if err == nil {
		for _, c := range comms {
			if c == nil {
				err = fmt.Errorf("%w: NCCL made no communicator", ncclraw.ErrInternalError)
				break
			}
			if err = c.ready(ctx, "init"); err != nil {
				err = fmt.Errorf("rank %d (device %d): %w", c.rank, c.dev, err)
				break
			}
		}
	}
	if err != nil {
		for _, c := range comms {
			if c != nil {
				_ = c.Abort()
			}
		}
		return nil, fmt.Errorf("nccl: new communicators: %w", err)
	}
	return comms, nil
}

// Join makes rank of a communicator of nranks ranks, on device dev (in its primary
// context), typically one per process: it gets the communicator's id through rv (rank
// 0 makes it with ncclGetUniqueId) and makes the rank (ncclCommInitRankConfig,
// non-blocking), which returns once every rank has joined. If ctx ends first, or NCCL
// fails, the rank is aborted and the error returned (wrapping ctx.Err() when it
// ended); give ctx a deadline, so that a rank that fails between the rendezvous and
// the end of the init cannot keep the others waiting.
//
// Through a WatchingRendezvous that watches (TCPRendezvous with a Liveness,
// etcdrendezvous.Rendezvous with Watch), the communicator is watched: once the
// watch reports a rank gone, the init, Wait, Err, the collectives and the other
// calls that poll fail with a *RankGoneError within the watch's bound, instead of
// waiting for the lost rank, and the communicator is kept for Shrink. The watch
// ends when the rank's last communicator of the job is released.
func Join(ctx context.Context, rv Rendezvous, rank, nranks int, dev cuda.Device) (*Comm, error) {
	if rv == nil || dev < 0 {
		return nil, fmt.Errorf("nccl: join: %w: nil rendezvous or device %d", cuda.ErrInvalidArgument, dev)
	}
	if err := checkRanks(rank, nranks); err != nil {
		return nil, fmt.Errorf("nccl: join: %w", err)
	}
	cctx, err := dev.Context()
	if err != nil {
		return nil, fmt.Errorf("nccl: join: device %d: %w", dev, err)
	}
	var id ncclraw.NcclUniqueId
	var w *commWatch
	if wr, ok := rv.(WatchingRendezvous); ok {
		m := NewMembership(rank, nranks)
		var bound time.Duration
		id, bound, err = wr.ExchangeIDWatching(ctx, rank, nranks, newUniqueID, m)
		if err != nil || bound <= 0 {
			m.release(false)
		} else {
			w = &commWatch{m: m, bound: bound}
		}
	} else {
		id, err = rv.ExchangeID(ctx, rank, nranks, newUniqueID)
	}
	if err != nil {
		return nil, err
	}
	var c *Comm
	cfg := config()
	err = cctx.Locked(func() error {
		var h ncclraw.NcclComm
		err := raw.initRank(&h, int32(nranks), id, int32(rank), &cfg)
		if h != 0 {
			c = newComm(h, rank, nranks, dev, cctx)
			c.watch(w)
			w = nil
		}
		if errors.Is(err, ncclraw.ErrInProgress) {
			err = nil
		}
		return err
	})
	if err == nil && c == nil {
		err = fmt.Errorf("%w: NCCL made no communicator", ncclraw.ErrInternalError)
	}
	if err == nil {
		err = c.ready(ctx, "init")
	}
	if err != nil {
		if c != nil {
			_ = c.Abort()
		}
		w.release(false) // no communicator took it
		return nil, fmt.Errorf("nccl: join: rank %d of %d (device %d): %w", rank, nranks, dev, err)
	}
	return c, nil
}

// newComm owns h, made on this thread with ctx current: its release (Close, or
// resource.Reclaim) runs with ctx current.
func newComm(h ncclraw.NcclComm, rank, size int, dev cuda.Device, ctx *cuda.Context) *Comm {
	in := &comm{h: h, rank: rank, size: size, dev: dev, ctx: ctx, order: commOrder.Add(1)}
	in.reg = resource.ResourceFinalizer(func(c *comm) error { return c.destroy(finalizeLimit) }, in,
		true, // ncclCommDestroy may wait for the GPU (headers/nccl.toml): held for Reclaim
		resource.Kind("ncclCommDestroy"))
	return &Comm{in}
}

// finalizeLimit bounds the wait of a release (Close, or resource.Reclaim for a dropped
// communicator) for the pending work, which a lost peer would make endless: then the
// communicator is aborted.
const finalizeLimit = 30 * time.Second

// destroy releases the communicator the way NCCL prescribes for non-blocking ones:
// ncclCommFinalize (which flushes its pending work, ncclInProgress meanwhile), polled
// until done, then ncclCommDestroy (local). It aborts the communicator instead if
// the finalize fails, if Abort is called meanwhile (Close), after limit, or once a
// rank is gone (its pending work would wait for it for ever).
func (in *comm) destroy(limit time.Duration) error {
	if in.w.gone() != nil {
		in.aborted.Store(true)
		return wrapRelease("ncclCommAbort", raw.abort(in.h))
	}
	deadline := time.Now().Add(limit)
	err := raw.finalize(in.h)
	if errors.Is(err, ncclraw.ErrInProgress) {
		err = nil
	}
	for b := (backoff{max: pollMax}); err == nil; b.wait() {
		var st ncclraw.Result
		if err = raw.getAsyncError(in.h, &st); err != nil {
			break
		}
		if st == ncclraw.NcclSuccess {
			return wrapRelease("ncclCommDestroy", raw.destroy(in.h))
		}
		if st != ncclraw.NcclInProgress {
			err = st
			break
		}
		if in.state.Load() == stAborting || in.w.gone() != nil { // Abort during Close, or a rank gone
			in.aborted.Store(true)
			return wrapRelease("ncclCommAbort", raw.abort(in.h))
		}
		if time.Now().After(deadline) {
			in.aborted.Store(true)
			if err := raw.abort(in.h); err != nil {
				return wrapRelease("ncclCommAbort", err)
			}
			return fmt.Errorf("nccl: the pending work did not finish in %v: %w", limit, ErrAborted)
		}
	}
	// The finalize failed: the communicator is broken, and ncclCommAbort frees it.
	in.aborted.Store(true)
	if aerr := raw.abort(in.h); aerr != nil {
		return fmt.Errorf("nccl: ncclCommFinalize: %w; ncclCommAbort: %w", err, aerr)
	}
	return fmt.Errorf("nccl: ncclCommFinalize: %w (communicator aborted)", err)
}

func wrapRelease(op string, err error) error {
	if err != nil {
		return fmt.Errorf("nccl: %s: %w", op, err)
	}
	return nil
}

// ready waits until the communicator has finished what it is doing (init), polling,
// and aborts it if ctx ends or it fails.
func (c *Comm) ready(ctx context.Context, op string) error {
	err := c.withCall(func() error { return c.poll(ctx) })
	return c.abortOn(op, err)
}

// abortOn aborts the communicator when err says it is broken (an asynchronous error
// or ctx ended while it polled), and returns err.
func (c *Comm) abortOn(op string, err error) error {
	var ae *AsyncError
	var ce *contextError
	if errors.As(err, &ae) || errors.As(err, &ce) {
		if aerr := c.shut(true); aerr != nil && !errors.Is(aerr, cuda.ErrClosed) {
			return fmt.Errorf("%w; aborting: %w", err, aerr)
		}
	}
	return err
}

// AsyncError is an error the communicator reported asynchronously (ncclCommGetAsyncError):
// a peer failed or left, a network or system error, … The communicator is broken and
// has been aborted. It matches its Result with errors.Is (ErrRemoteError, …) and
// ErrAborted. On a watched communicator, the calls that wait (Wait, the collectives,
// the init) first give the watch its bound to name a rank gone: if it does, the
// error is a *RankGoneError instead and the communicator is kept (Err does not wait).
type AsyncError struct {
	Rank, Size int
	Result     ncclraw.Result
	Detail     string // ncclGetLastError's text, if any
}

func (e *AsyncError) Error() string {
	s := fmt.Sprintf("nccl: rank %d of %d: asynchronous error: %v", e.Rank, e.Size, e.Result)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s + " (communicator aborted)"
}

// Unwrap returns the Result and ErrAborted.
func (e *AsyncError) Unwrap() []error { return []error{e.Result, ErrAborted} }

// contextError is the error of a wait that its context ended: it wraps ctx.Err()
// and ErrAborted (the communicator is aborted).
type contextError struct{ err error }

func (e *contextError) Error() string {
	return fmt.Sprintf("%v (communicator aborted)", e.err)
}
func (e *contextError) Unwrap() []error { return []error{e.err, ErrAborted} }

// Polling backs off from pollMin to pollMax.
const (
	pollMin = 2 * time.Microsecond
	pollMax = time.Millisecond
)

// backoff paces a polling loop: a yield before the second poll, then sleeps that
// double from pollMin up to max.
type backoff struct{ d, max time.Duration }

// wait waits before the next poll.
func (b *backoff) wait() {
	if b.d == 0 {
		runtime.Gosched()
		b.d = pollMin
		return
	}
	time.Sleep(b.d)
	b.d = min(2*b.d, b.max)
}

// poll waits, with the call held (withCall), until the communicator's state is no
// longer ncclInProgress: nil when it is ncclSuccess, an *AsyncError for a failure,
// a *RankGoneError once the watch reports a rank gone, a *contextError if ctx (nil:
// none) ends first, ErrAborted if Abort is called.
func (in *comm) poll(ctx context.Context) error { return in.pollWith(ctx, nil) }

// pollWith is poll that also ends with ErrAborted when parent (if not nil) is
// aborted.
func (in *comm) pollWith(ctx context.Context, parent *comm) error {
	var done <-chan struct{}
	if ctx != nil {
		done = ctx.Done()
	}
	for b := (backoff{max: pollMax}); ; b.wait() {
		st, err := in.asyncState()
		if err != nil {
			return in.settle(done, err)
		}
		if st != ncclraw.NcclInProgress {
			return nil
		}
		if in.state.Load() == stAborting || (parent != nil && parent.state.Load() == stAborting) {
			return fmt.Errorf("%w (%w)", ErrAborted, cuda.ErrClosed)
		}
		select {
		case <-done:
			return &contextError{ctx.Err()}
		default:
		}
	}
}

// asyncState returns the communicator's state (ncclSuccess or ncclInProgress), or
// a *RankGoneError once the watch reported a rank gone, or its asynchronous error
// as an *AsyncError. The call must be held.
func (in *comm) asyncState() (ncclraw.Result, error) {
	var st ncclraw.Result
	if err := raw.getAsyncError(in.h, &st); err != nil {
		return 0, fmt.Errorf("ncclCommGetAsyncError: %w", err)
	}
	if err := in.goneErr(st); err != nil {
		return st, err
	}
	if st == ncclraw.NcclSuccess || st == ncclraw.NcclInProgress {
		return st, nil
	}
	detail, _ := raw.getLastError(in.h)
	return st, &AsyncError{Rank: in.rank, Size: in.size, Result: st, Detail: detail}
}

// withCall runs f with the communicator held against its release, or returns the
// error of a closed one.
func (c *Comm) withCall(f func() error) error {
	if c == nil || c.comm == nil {
		return fmt.Errorf("nccl: nil communicator: %w", cuda.ErrInvalidArgument)
	}
	in := c.comm
	in.life.RLock()
	defer in.life.RUnlock()
	if err := in.closedErr(); err != nil {
		return err
	}
	return f()
}

// closedErr returns the error of a use of a communicator being (or) released.
func (in *comm) closedErr() error {
	switch in.state.Load() {
	case stOpen:
		return nil
	case stAborting, stAborted:
		return fmt.Errorf("nccl: communicator: %w (%w)", ErrAborted, cuda.ErrClosed)
	default:
		return fmt.Errorf("nccl: communicator: %w", cuda.ErrClosed)
	}
}

// Rank returns the communicator's rank, 0 to Size()-1 (-1 for a nil Comm).
func (c *Comm) Rank() int {
	if c == nil || c.comm == nil {
		return -1
	}
	return c.rank
}

// Size returns the number of ranks of the communicator (0 for a nil Comm).
func (c *Comm) Size() int {
	if c == nil || c.comm == nil {
		return 0
	}
	return c.size
}

// Device returns the GPU of the communicator's rank.
func (c *Comm) Device() cuda.Device {
	if c == nil || c.comm == nil {
		return -1
	}
	return c.dev
}

// Context returns the context the communicator works in: its device's primary context.
func (c *Comm) Context() *cuda.Context {
	if c == nil || c.comm == nil {
		return nil
	}
	return c.ctx
}

// Handle returns the raw communicator, for the raw layer's functions that have no
// method here (ncclCommSplit, ncclCommRegister, …), or 0 for a nil Comm or one
// closed or being closed (as os.File.Fd, no live handle after Close). The Comm still
// owns it: do not destroy it, keep the Comm reachable (runtime.KeepAlive) until
// the last raw call has returned, as with os.File.Fd, and do not call NCCL on it
// while a method runs on another goroutine (communicators are not thread-safe).
func (c *Comm) Handle() ncclraw.NcclComm {
	if c == nil || c.comm == nil || c.closedErr() != nil {
		return 0
	}
	return c.h
}

// Err returns the communicator's asynchronous error (ncclCommGetAsyncError) as an
// *AsyncError, having aborted the communicator, or the *RankGoneError of a watched
// one that lost ranks (kept for Shrink), or nil while it is healthy. It does not
// wait.
func (c *Comm) Err() error {
	err := c.withCall(func() error { _, err := c.asyncState(); return err })
	return c.abortOn("err", err)
}

// Wait waits until the work queued on s (in particular the communicator's
// collectives) has finished, watching the communicator meanwhile: an asynchronous
// error (a peer failed, …) aborts the communicator, so that its kernels end, and is
// returned as an *AsyncError; so does the end of ctx, whose error the returned one
// wraps (with ErrAborted). Use it rather than s.Synchronize where a peer may fail: a
// collective whose peer is gone never finishes by itself. On a watched communicator
// (Join), a rank reported gone ends the wait with a *RankGoneError, within a few
// milliseconds of the report, and leaves the communicator for Shrink; the work on s
// that waits for the lost rank ends when the communicator is shrunk or aborted.
func (c *Comm) Wait(ctx context.Context, s *cuda.Stream) error {
	if err := cuda.CheckEnqueue(s); err != nil {
		return fmt.Errorf("nccl: wait: %w", err)
	}
	for b := (backoff{max: 5 * pollMax}); ; b.wait() {
		done, err := s.Query()
		if err != nil {
			return fmt.Errorf("nccl: wait: %w", err)
		}
		err = c.withCall(func() error {
			if _, err := c.asyncState(); err != nil {
				return c.settle(ctx.Done(), err)
			}
			return nil
		})
		if err != nil {
			return c.abortOn("wait", fmt.Errorf("nccl: wait: %w", err))
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			err := &contextError{ctx.Err()}
			return c.abortOn("wait", fmt.Errorf("nccl: wait: rank %d of %d: %w", c.rank, c.size, err))
		default:
		}
	}
}

// Close releases the communicator once the calls in progress have returned: it
// waits for the communicator's queued work to finish (ncclCommFinalize, polled) and
// destroys it (ncclCommDestroy). An Abort from another goroutine meanwhile ends the
// wait and aborts the communicator instead, as does a wait longer than 30 seconds:
// where a peer may have failed, the queued work may never finish.
// Closing again, closing after Abort, or closing a nil Comm returns an error matching
// cuda.ErrClosed and resource.ErrReleased.
func (c *Comm) Close() error {
	if c == nil || c.comm == nil {
		return errs.Closed("nccl: communicator")
	}
	return c.shut(false)
}

// Abort releases the communicator now (ncclCommAbort), ending its pending work on
// the GPU and the waits of the calls that poll it, which return errors matching
// ErrAborted. Later operations fail with errors matching ErrAborted and
// cuda.ErrClosed. Aborting a communicator already aborted returns nil; aborting a
// closed or nil one returns an error matching cuda.ErrClosed and resource.ErrReleased.
func (c *Comm) Abort() error {
	if c == nil || c.comm == nil {
		return errs.Closed("nccl: communicator")
	}
	return c.shut(true)
}

// shut is Close (abort false) and Abort: it marks the state, waits for the calls in
// progress (the polling ones stop when aborting), and releases the communicator once.
func (in *comm) shut(abort bool) error {
	for {
		st := in.state.Load()
		switch {
		case st == stClosed || (st == stAborted && !abort):
			return errs.Closed("nccl: communicator")
		case st == stAborted:
			return nil
		case !abort && st != stOpen:
			return errs.Closed("nccl: communicator") // being released by another call
		case abort && st != stAborting && !in.state.CompareAndSwap(st, stAborting):
			continue
		case !abort && !in.state.CompareAndSwap(stOpen, stClosing):
			continue
		}
		break
	}
	in.life.Lock()
	defer in.life.Unlock()
	var err error
	switch in.state.Load() {
	case stClosed:
		return errs.Closed("nccl: communicator")
	case stAborted:
		return nil
	case stAborting:
		// ncclCommAbort frees the communicator: the finalizer must not destroy it too.
		in.reg.Cancel()
		err = in.ctx.Locked(func() error { return raw.abort(in.h) })
		in.state.Store(stAborted)
		in.w.release(false)
		if err != nil {
			err = fmt.Errorf("nccl: ncclCommAbort: %w", err)
		}
	default:
		// Close: finalize (waiting for the pending work) and destroy; an Abort
		// meanwhile, or finalizeLimit, turns it into an abort.
		err = in.reg.Release()
		runtime.KeepAlive(in)
		if in.aborted.Load() {
			in.state.Store(stAborted)
		} else {
			in.state.Store(stClosed)
		}
		in.w.release(!in.aborted.Load())
		if errors.Is(err, resource.ErrReleased) {
			return errs.Closed("nccl: communicator")
		}
	}
	return err
}
