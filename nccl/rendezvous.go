package nccl

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/nccl/ncclraw"
)

// The rendezvous: before the ranks of a communicator can make it (ncclCommInitRank),
// rank 0's unique id (ncclGetUniqueId: the address of NCCL's own bootstrap) must reach
// every other rank. NCCL leaves that to the program (MPI, a file, …); TCPRendezvous does
// it over one TCP address, ConnRendezvous over connections the program already has.
//
// The exchange is a small framed protocol, so that a wrong peer (another program on the
// port, a rank of another job, garbage) is an error rather than a hang or a misread id:
//
//	frame   = magic "GCNC" | version uint16 | kind uint8 | 0 uint8 | length uint32 | payload
//	hello   (rank r → rank 0, kind 1): nranks uint32 | rank uint32
//	id      (rank 0 → rank r, kind 2): nranks uint32 | the 128 bytes of the id
//	reject  (rank 0 → rank r, kind 3): code uint8 | count uint32 | count × rank uint32 | the reason, UTF-8
//	        (code 1: rank 0 timed out waiting for the ranks listed; code 2: rejected;
//	        code 3: rank 0's context was cancelled while it waited for the ranks listed;
//	        code 4: the rank did not prove the job's secret)
//
// Integers are big-endian; a payload is at most maxPayload bytes. Every rank other than 0
// sends its hello; rank 0 answers once all nranks-1 ranks have said hello, so that every
// rank leaves the rendezvous knowing the others have joined.
//
// With a job secret (the rendezvous's Secret), each side proves it holds the secret
// before anything is decided, and the id travels sealed:
//
//	auth hello (rank → rank 0, kind 5): nranks uint32 | rank uint32 | the rank's nonce (32 bytes)
//	challenge  (rank 0 → rank, kind 4): rank 0's nonce (32) | HMAC(secret, "root", rank's nonce, rank 0's nonce, nranks, rank)
//	proof      (rank → rank 0, kind 6): HMAC(secret, "rank", rank 0's nonce, rank's nonce, nranks, rank)
//	sealed id  (rank 0 → rank, kind 7): AES-256-GCM of the id under HMAC(secret, "id", both nonces),
//	           with nranks | rank as additional data
//
// HMAC is HMAC-SHA256. Rank 0 makes a fresh nonce per connection, so a recorded proof
// is worth nothing on another; a connection that fails to prove the secret (a plain
// hello, a wrong proof) is refused and logged, and the rendezvous goes on waiting for
// the real rank; a rank checks rank 0's proof before it answers, so it gives nothing
// to an impostor.
//
// With a liveness (TCPRendezvous.Liveness, in milliseconds, the same on every rank),
// the hello (plain or authenticated) carries it after the rank, and the connection
// stays open once the id is through: the membership watch (watch.go).
//
//	hello with a liveness: nranks uint32 | rank uint32 | liveness uint32
//	beat    (both ways, kind 8): empty, every liveness/4
//	gone    (rank 0 → rank, kind 9): count uint32 | count × rank uint32, the ranks rank 0 lost
//	bye     (both ways, kind 10): empty, the side leaves cleanly (its communicators closed)
//
// A side that hears nothing for a liveness, or whose connection ends without a bye,
// takes the other for gone. The watch's frames are not sealed: with a secret, the
// connection was proved when the rank joined.

// Rendezvous hands rank 0's unique id to the other ranks of a communicator (Join).
type Rendezvous interface {
	// ExchangeID returns the id of the communicator of nranks ranks that rank joins:
	// on rank 0 the one newID makes, which it hands to the other ranks; on the other
	// ranks the one received from rank 0 (newID is not called there). It returns once
	// every rank has joined, or with an error when ctx ends first.
	ExchangeID(ctx context.Context, rank, nranks int, newID func() (ncclraw.NcclUniqueId, error)) (ncclraw.NcclUniqueId, error)
}

// Errors of the rendezvous.
var (
	// ErrProtocol is matched by the error of a rendezvous that read something other
	// than its protocol: a bad magic number, version or frame, a short read, or a
	// peer that closed the connection before the exchange was done.
	ErrProtocol = errors.New("nccl: rendezvous protocol error")
	// ErrRejected is matched by the error of a rank that rank 0 turned away, and of
	// rank 0 when a rank's hello contradicts the others (another number of ranks, a
	// rank out of range or joining twice).
	ErrRejected = errors.New("nccl: rendezvous rejected")
)

// TimeoutError is the error of a rendezvous that did not complete before its context
// ended (its deadline, or the rendezvous's own timeout): it names the ranks that rank
// waited for. It matches context.DeadlineExceeded (or context.Canceled) with errors.Is.
type TimeoutError struct {
	Rank, NRanks int
	// Missing are the ranks that never said hello, on rank 0; on the other ranks,
	// [0]: rank 0 could not be reached, or did not answer (it answers once every
	// rank has joined).
	Missing []int
	Err     error // the context's error
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("nccl: rendezvous: rank %d of %d gave up waiting for rank(s) %v: %v", e.Rank, e.NRanks, e.Missing, e.Err)
}

// Unwrap returns the context's error.
func (e *TimeoutError) Unwrap() error { return e.Err }

// Timeout reports whether the rendezvous ran out of time (rather than being cancelled).
func (e *TimeoutError) Timeout() bool { return errors.Is(e.Err, context.DeadlineExceeded) }

// DefaultRendezvousTimeout bounds a rendezvous whose context has no deadline.
const DefaultRendezvousTimeout = 2 * time.Minute

const (
	frameMagic   = "GCNC"
	frameVersion = 1
	headerLen    = 12
	maxPayload   = 1024

	kindHello     = 1
	kindID        = 2
	kindReject    = 3
	kindChallenge = 4
	kindAuthHello = 5
	kindProof     = 6
	kindSealedID  = 7
	kindBeat      = 8
	kindGone      = 9
	kindBye       = 10

	nonceLen = 32
)

// ErrAuthentication is matched by the error of a rank whose rendezvous failed to
// prove the job's secret, on either side: rank 0 refused its proof, or rank 0 gave
// none (or a wrong one).
var ErrAuthentication = errors.New("nccl: rendezvous authentication failed")

// writeFrame writes one frame.
func writeFrame(w io.Writer, kind byte, payload []byte) error {
	b := make([]byte, headerLen+len(payload))
	copy(b, frameMagic)
	binary.BigEndian.PutUint16(b[4:], frameVersion)
	b[6] = kind
	binary.BigEndian.PutUint32(b[8:], uint32(len(payload)))
	copy(b[headerLen:], payload)
	if _, err := w.Write(b); err != nil {
		return peerGone("writing a frame", err)
	}
	return nil
}

// readFrame reads one frame, checking its header before it reads the payload.
func readFrame(r io.Reader) (kind byte, payload []byte, err error) {
	var h [headerLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, peerGone("reading the frame header", err)
	}
	if string(h[:4]) != frameMagic {
		return 0, nil, fmt.Errorf("%w: bad magic %q", ErrProtocol, h[:4])
	}
	if v := binary.BigEndian.Uint16(h[4:]); v != frameVersion {
		return 0, nil, fmt.Errorf("%w: protocol version %d, this side speaks %d", ErrProtocol, v, frameVersion)
	}
	kind = h[6]
	n := binary.BigEndian.Uint32(h[8:])
	if h[7] != 0 || n > maxPayload {
		return 0, nil, fmt.Errorf("%w: bad frame header (kind %d, %d payload bytes)", ErrProtocol, kind, n)
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, nil, peerGone("reading the frame payload", err)
	}
	return kind, payload, nil
}

// peerGone wraps a connection's read or write error: a deadline that passed is left
// as it is, for the caller to report as a *TimeoutError; anything else (an end of
// stream, a reset, a broken pipe) means the peer left mid-exchange, a protocol
// error.
func peerGone(what string, err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: connection lost %s: %w", ErrProtocol, what, err)
}

func helloPayload(rank, nranks int) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint32(b, uint32(nranks))
	binary.BigEndian.PutUint32(b[4:], uint32(rank))
	return b
}

// helloIDs is what a hello says of the rank: helloPayload, and the liveness in
// milliseconds when the rank watches (liveness > 0).
func helloIDs(rank, nranks int, liveness time.Duration) []byte {
	b := helloPayload(rank, nranks)
	if liveness > 0 {
		b = binary.BigEndian.AppendUint32(b, livenessMillis(liveness))
	}
	return b
}

// livenessMillis is a liveness as the hello carries it: whole milliseconds, at
// least 1.
func livenessMillis(d time.Duration) uint32 {
	return uint32(min(max(d.Milliseconds(), 1), 1<<31))
}

// parseIDs reads what helloIDs wrote: (rank, nranks, liveness in ms; 0: none).
func parseIDs(p []byte) (rank, nranks int, liveness uint32, ok bool) {
	if len(p) != 8 && len(p) != 12 {
		return 0, 0, 0, false
	}
	if len(p) == 12 {
		liveness = binary.BigEndian.Uint32(p[8:])
	}
	return int(binary.BigEndian.Uint32(p[4:])), int(binary.BigEndian.Uint32(p)), liveness, true
}

func idPayload(nranks int, id ncclraw.NcclUniqueId) []byte {
	b := make([]byte, 4+len(id.Internal))
	binary.BigEndian.PutUint32(b, uint32(nranks))
	copy(b[4:], id.Internal[:])
	return b
}

// readHello reads a rank's hello: (rank, nranks, liveness in ms).
func readHello(r io.Reader) (rank, nranks int, liveness uint32, err error) {
	kind, p, err := readFrame(r)
	if err != nil {
		return 0, 0, 0, err
	}
	if kind == kindAuthHello {
		return 0, 0, 0, fmt.Errorf("%w: the rank has a job secret, rank 0 has none", ErrAuthentication)
	}
	rank, nranks, liveness, ok := parseIDs(p)
	if kind != kindHello || !ok {
		return 0, 0, 0, fmt.Errorf("%w: expected a hello, got a frame of kind %d with %d bytes", ErrProtocol, kind, len(p))
	}
	return rank, nranks, liveness, nil
}

// readID reads rank 0's answer: the id, or its reason for rejecting this rank.
func readID(r io.Reader, nranks int) (ncclraw.NcclUniqueId, error) {
	var id ncclraw.NcclUniqueId
	kind, p, err := readFrame(r)
	if err != nil {
		return id, err
	}
	switch {
	case kind == kindReject:
		return id, readReject(p, nranks)
	case kind != kindID || len(p) != 4+len(id.Internal):
		return id, fmt.Errorf("%w: expected the id, got a frame of kind %d with %d bytes", ErrProtocol, kind, len(p))
	}
	if n := int(binary.BigEndian.Uint32(p)); n != nranks {
		return id, fmt.Errorf("%w: rank 0 makes a communicator of %d ranks, this rank expects %d", ErrRejected, n, nranks)
	}
	copy(id.Internal[:], p[4:])
	return id, nil
}

// rejectPayload encodes why rank 0 gave up.
func rejectPayload(err error) []byte {
	code, missing := byte(2), []int(nil)
	var te *TimeoutError
	if errors.Is(err, ErrAuthentication) {
		code = 4
	} else if errors.As(err, &te) {
		code, missing = 1, te.Missing
		if !te.Timeout() {
			code = 3 // cancelled, not out of time: the other ranks report it as such
		}
	}
	b := []byte{code}
	b = binary.BigEndian.AppendUint32(b, uint32(len(missing)))
	for _, r := range missing {
		b = binary.BigEndian.AppendUint32(b, uint32(r))
	}
	msg := err.Error()
	if room := maxPayload - len(b); len(msg) > room {
		msg = msg[:room]
	}
	return append(b, msg...)
}

// readReject decodes a reject: a *TimeoutError if rank 0 timed out waiting for
// other ranks (matching context.DeadlineExceeded) or gave up on them when its
// context was cancelled (matching context.Canceled), else an error matching
// ErrRejected.
func readReject(p []byte, nranks int) error {
	if len(p) < 5 {
		return fmt.Errorf("%w: short reject frame (%d bytes)", ErrProtocol, len(p))
	}
	code, n := p[0], binary.BigEndian.Uint32(p[1:])
	if uint64(n) > uint64(len(p)-5)/4 {
		return fmt.Errorf("%w: bad reject frame", ErrProtocol)
	}
	missing := make([]int, n)
	for i := range missing {
		missing[i] = int(binary.BigEndian.Uint32(p[5+4*i:]))
	}
	msg := strconv.Quote(string(p[5+4*n:]))
	switch code {
	case 1:
		return &TimeoutError{NRanks: nranks, Missing: missing,
			Err: fmt.Errorf("rank 0 timed out (%s): %w", msg, context.DeadlineExceeded)}
	case 3:
		return &TimeoutError{NRanks: nranks, Missing: missing,
			Err: fmt.Errorf("rank 0 was cancelled (%s): %w", msg, context.Canceled)}
	case 4:
		return fmt.Errorf("%w: refused by rank 0: %s", ErrAuthentication, msg)
	}
	return fmt.Errorf("%w by rank 0: %s", ErrRejected, msg)
}

// deadliner is what net.Conn has to bound a blocked read or write.
type deadliner interface{ SetDeadline(time.Time) error }

// withDeadline runs f, which reads or writes rw, until ctx ends: through rw's
// SetDeadline where it has one (a net.Conn), else by returning while f goes on
// blocked in the background until rw is closed (an io.ReadWriter cannot be
// interrupted otherwise). interrupted reports whether ctx ended first.
func withDeadline(ctx context.Context, rw io.ReadWriter, f func() error) (err error, interrupted bool) {
	if d, ok := rw.(deadliner); ok {
		dl, _ := ctx.Deadline()
		_ = d.SetDeadline(dl)
		stop := context.AfterFunc(ctx, func() { _ = d.SetDeadline(time.Unix(1, 0)) })
		err = f()
		if err != nil && !dl.IsZero() && errors.Is(err, os.ErrDeadlineExceeded) {
			// The connection's deadline is ctx's: ctx's own timer fires at most a
			// moment later. Waiting for it makes the caller see ctx ended.
			<-ctx.Done()
		}
		if !stop() || ctx.Err() != nil {
			return err, err != nil
		}
		_ = d.SetDeadline(time.Time{})
		return err, false
	}
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err, false
	case <-ctx.Done():
		return ctx.Err(), true
	}
}

// boundedContext gives ctx a deadline of timeout (DefaultRendezvousTimeout if 0)
// when it has none.
func boundedContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	if timeout <= 0 {
		timeout = DefaultRendezvousTimeout
	}
	return context.WithTimeout(ctx, timeout)
}

func checkRanks(rank, nranks int) error {
	if nranks < 1 || rank < 0 || rank >= nranks || nranks > 1<<30 {
		return fmt.Errorf("nccl: rendezvous: %w: rank %d of %d", cuda.ErrInvalidArgument, rank, nranks)
	}
	return nil
}

// joined tracks rank 0's view of a rendezvous: which ranks said hello.
type joined struct {
	mu       sync.Mutex
	nranks   int
	liveness uint32 // rank 0's, in ms (0: no watch)
	in       []bool
	count    int
	fatal    error // a contradicting hello
	all      chan struct{}
}

func newJoined(nranks int, liveness uint32) *joined {
	j := &joined{nranks: nranks, liveness: liveness, in: make([]bool, nranks), all: make(chan struct{})}
	j.in[0] = true
	j.count = 1
	if nranks == 1 {
		close(j.all)
	}
	return j
}

// add records a hello, or returns why it is refused (and makes that fatal).
func (j *joined) add(rank, nranks int, liveness uint32) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	var err error
	switch {
	case nranks != j.nranks:
		err = fmt.Errorf("%w: rank %d says the communicator has %d ranks, rank 0 says %d", ErrRejected, rank, nranks, j.nranks)
	case liveness != j.liveness:
		err = fmt.Errorf("%w: rank %d watches the ranks with a liveness of %d ms, rank 0 with %d ms (0: no watch); every rank's TCPRendezvous.Liveness must be the same",
			ErrRejected, rank, liveness, j.liveness)
	case rank <= 0 || rank >= j.nranks:
		err = fmt.Errorf("%w: rank %d out of range 1..%d", ErrRejected, rank, j.nranks-1)
	case j.in[rank]:
		err = fmt.Errorf("%w: rank %d joined twice", ErrRejected, rank)
	}
	if err != nil {
		if j.fatal == nil {
			j.fatal = err
		}
		return err
	}
	j.in[rank] = true
	j.count++
	if j.count == j.nranks {
		close(j.all)
	}
	return nil
}

func (j *joined) missing() []int {
	j.mu.Lock()
	defer j.mu.Unlock()
	var m []int
	for r, in := range j.in {
		if !in {
			m = append(m, r)
		}
	}
	return m
}

func (j *joined) err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.fatal
}

// rootState is rank 0's side of one rendezvous: which connections wait for the
// answer, and the answer once decided.
type rootState struct {
	j       *joined
	secret  []byte // the job's secret; nil: none
	hub     *hub   // the membership watch's, which keeps the connections; nil: none
	mu      sync.Mutex
	decided bool
	result  answer
	waiting []chan answer
	written chan struct{} // one per answer written (or not) to a rank that joined
}

// answer is what rank 0 tells the connected ranks: the id, or why it gave up.
type answer struct {
	id  ncclraw.NcclUniqueId
	err error
}

// wait returns the answer for a rank that has joined: at once if decided, else once
// decide runs.
func (st *rootState) wait() answer {
	st.mu.Lock()
	if st.decided {
		a := st.result
		st.mu.Unlock()
		return a
	}
	ch := make(chan answer, 1)
	st.waiting = append(st.waiting, ch)
	st.mu.Unlock()
	return <-ch // rootExchange always decides
}

// decide sets the answer and hands it to the waiting ranks; it returns how many.
func (st *rootState) decide(a answer) int {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.decided, st.result = true, a
	for _, ch := range st.waiting {
		ch <- a
	}
	return len(st.waiting)
}

func (st *rootState) isDecided() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.decided
}

// serve is rank 0's side for one connection: it reads the hello and, once every
// rank has joined (or the rendezvous failed), answers with the id or a reject. It
// returns the rank that joined on it (0 if none) and the error of the exchange;
// with a hub, a connection that got the id is the hub's (kept true), not to close.
func (st *rootState) serve(ctx context.Context, rw io.ReadWriteCloser) (rank int, err error, kept bool) {
	var nranks int
	var liveness uint32
	var keys *sealKeys
	err, _ = withDeadline(ctx, rw, func() (err error) {
		if st.secret == nil {
			rank, nranks, liveness, err = readHello(rw)
			return err
		}
		rank, nranks, liveness, keys, err = authenticate(rw, st.secret)
		return err
	})
	if err != nil {
		if errors.Is(err, ErrAuthentication) {
			slog.Warn("nccl: rendezvous: rank 0 refused a connection", "remote", remoteOf(rw), "error", err)
			_, _ = withDeadline(ctx, rw, func() error { return writeFrame(rw, kindReject, rejectPayload(err)) })
		}
		return 0, err, false
	}
	if err := st.j.add(rank, nranks, liveness); err != nil {
		_, _ = withDeadline(ctx, rw, func() error { return writeFrame(rw, kindReject, rejectPayload(err)) })
		return 0, err, false
	}
	defer func() { st.written <- struct{}{} }()
	a := st.wait()
	// The answer goes out even if ctx has ended (that is often the news), for a while.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), answerGrace)
	defer cancel()
	err, _ = withDeadline(wctx, rw, func() error {
		switch {
		case a.err != nil:
			return writeFrame(rw, kindReject, rejectPayload(a.err))
		case keys != nil:
			return writeFrame(rw, kindSealedID, keys.seal(a.id, nranks, rank))
		}
		return writeFrame(rw, kindID, idPayload(st.j.nranks, a.id))
	})
	if err == nil && a.err == nil && st.hub != nil {
		st.hub.add(rank, rw) // before the write is counted: the hub has every rank when rootExchange returns
		return rank, nil, true
	}
	return rank, err, false
}

// rootExchange is rank 0's side over the connections conns yields (until stop is
// called): it serves each, and once every rank has joined sends each the id; if a
// rank contradicts the others, or ctx ends first, it sends the ranks that joined the
// reason instead. A connection that does not speak the protocol is dropped.
//
// With a hub, the connections of the ranks that got the id are handed to it.
func rootExchange(ctx context.Context, nranks int, id ncclraw.NcclUniqueId, secret []byte, h *hub, conns func(func(io.ReadWriteCloser) bool), stop func() error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var liveness uint32
	if h != nil {
		liveness = livenessMillis(h.liveness)
	}
	st := &rootState{j: newJoined(nranks, liveness), secret: secret, hub: h, written: make(chan struct{}, nranks)}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error // of the ranks that joined
	)
	failed := make(chan struct{})
	var failOnce sync.Once
	wg.Go(func() {
		conns(func(c io.ReadWriteCloser) bool {
			if st.isDecided() {
				c.Close()
				return true // drain: the listener is closing
			}
			wg.Go(func() {
				r, err, kept := st.serve(ctx, c)
				if !kept {
					c.Close()
				}
				if err != nil && r > 0 {
					mu.Lock()
					errs = append(errs, fmt.Errorf("rank %d: %w", r, err))
					mu.Unlock()
				}
				if st.j.err() != nil {
					failOnce.Do(func() { close(failed) })
				}
			})
			return true
		})
	})
	var result answer
	select {
	case <-st.j.all:
		result.id = id
	case <-failed:
		result.err = st.j.err()
	case <-ctx.Done():
		result.err = &TimeoutError{Rank: 0, NRanks: nranks, Missing: st.j.missing(), Err: ctx.Err()}
	}
	_ = stop() // no more connections
	for range st.decide(result) {
		<-st.written // each write is bounded by ctx
	}
	cancel() // connections that never said hello
	wg.Wait()
	if result.err != nil {
		return result.err
	}
	if len(errs) > 0 {
		return fmt.Errorf("nccl: rendezvous: rank 0 could not send the id: %w", errors.Join(errs...))
	}
	return nil
}

// client is the side of a rank other than 0 on one connection: hello, then the id.
func client(ctx context.Context, rw io.ReadWriter, rank, nranks int, secret []byte, liveness time.Duration) (ncclraw.NcclUniqueId, error, bool) {
	var id ncclraw.NcclUniqueId
	// Rank 0 tells the ranks that joined which ranks are missing when its deadline
	// passes, likely ours too: wait answerGrace past ours for its word.
	rctx, cancel := graceContext(ctx, answerGrace)
	defer cancel()
	err, interrupted := withDeadline(rctx, rw, func() (err error) {
		if secret != nil {
			id, err = authenticatedHello(rw, rank, nranks, liveness, secret)
			return err
		}
		if err = writeFrame(rw, kindHello, helloIDs(rank, nranks, liveness)); err != nil {
			return err
		}
		id, err = readID(rw, nranks)
		return err
	})
	var te *TimeoutError
	if errors.As(err, &te) {
		te.Rank = rank
	}
	return id, err, interrupted
}

// TCPRendezvous exchanges the id over TCP: rank 0 listens on Addr (or on Listener),
// the other ranks dial Addr, retrying every RetryInterval while rank 0 is not
// listening yet, send their rank and receive the id once every rank has joined. The
// whole exchange ends with ctx, or after Timeout when ctx has no deadline: then rank
// 0 returns a *TimeoutError naming the ranks that never connected, and tells the
// ranks that did, which return the same (they wait up to half a second past their
// own deadline for that word); a rank that never reached rank 0, or heard nothing,
// returns one naming rank 0. A connection that does not speak the protocol is dropped
// (rank 0 goes on waiting for the real ranks); a rank that contradicts the others
// (another number of ranks, a rank joining twice) fails the rendezvous on rank 0 and
// on that rank with ErrRejected, and the ranks already connected are told so.
//
// A communicator of one rank needs no exchange: rank 0 then neither listens nor waits.
//
// With Liveness, the rendezvous also watches the ranks once they have joined, for
// the communicator Join makes (WatchingRendezvous): see Liveness.
type TCPRendezvous struct {
	// Addr is rank 0's address, "host:port": rank 0 listens on it, the others dial it.
	Addr string
	// Listener, if set, is what rank 0 accepts on instead of listening on Addr
	// (tests use one on port 0). The rendezvous closes it when done.
	Listener net.Listener
	// RetryInterval is the pause between the dials of a rank while rank 0 is not
	// reachable yet; 0 means 50 ms.
	RetryInterval time.Duration
	// Timeout bounds the rendezvous when ctx has no deadline; 0 means
	// DefaultRendezvousTimeout.
	Timeout time.Duration
	// Secret is the job's secret (JobSecretFromEnv), which every rank must hold:
	// with it, a connection that cannot prove it is refused and logged while the
	// real ranks join, and the id travels sealed. Without it, anyone who reaches
	// Addr can take a rank's place.
	Secret []byte
	// Liveness, if positive, keeps each rank connected to rank 0 once the rendezvous
	// is done, for as long as the rank's communicators from Join (and those Shrink
	// makes of them) are open, so that they learn when a rank is gone: its
	// connection ends without a goodbye (its process exited, it aborted its
	// communicator), at once, or nothing comes from it for Liveness (a host that
	// died, a network cut). Rank 0 relays the news to the other ranks. The ranks
	// send each other a beat every Liveness/4, so that a live rank is never taken
	// for gone unless it is starved for Liveness. Every rank must have the same
	// Liveness (rank 0 rejects a rank that has another, with ErrRejected). Rank 0
	// is the hub: once it is gone, the others learn it and nothing more; once it has
	// closed its communicators, the watch ends. 0 means no watch. ExchangeID alone
	// never watches; Join does.
	Liveness time.Duration
}

// ExchangeID implements Rendezvous.
func (t *TCPRendezvous) ExchangeID(ctx context.Context, rank, nranks int, newID func() (ncclraw.NcclUniqueId, error)) (ncclraw.NcclUniqueId, error) {
	return t.exchange(ctx, rank, nranks, newID, nil)
}

// ExchangeIDWatching implements WatchingRendezvous: with Liveness, it is
// ExchangeID followed by the watch of the ranks, which reports to m; without, it
// is ExchangeID and returns a bound of 0.
func (t *TCPRendezvous) ExchangeIDWatching(ctx context.Context, rank, nranks int, newID func() (ncclraw.NcclUniqueId, error), m *Membership) (ncclraw.NcclUniqueId, time.Duration, error) {
	if t.Liveness <= 0 || m == nil {
		id, err := t.exchange(ctx, rank, nranks, newID, nil)
		return id, 0, err
	}
	if m.Rank() != rank || m.NRanks() != nranks {
		return ncclraw.NcclUniqueId{}, 0, fmt.Errorf("nccl: rendezvous: %w: a membership of rank %d of %d for rank %d of %d",
			cuda.ErrInvalidArgument, m.Rank(), m.NRanks(), rank, nranks)
	}
	id, err := t.exchange(ctx, rank, nranks, newID, m)
	if err != nil {
		return id, 0, err
	}
	return id, t.Liveness, nil
}

func (t *TCPRendezvous) exchange(ctx context.Context, rank, nranks int, newID func() (ncclraw.NcclUniqueId, error), m *Membership) (ncclraw.NcclUniqueId, error) {
	var id ncclraw.NcclUniqueId
	if err := checkRanks(rank, nranks); err != nil {
		return id, err
	}
	ctx, cancel := boundedContext(ctx, t.Timeout)
	defer cancel()
	if rank == 0 {
		return t.root(ctx, nranks, newID, m)
	}
	return t.dial(ctx, rank, nranks, m)
}

// liveness is the watch's liveness with m, 0 without.
func (t *TCPRendezvous) liveness(m *Membership) time.Duration {
	if m == nil {
		return 0
	}
	return t.Liveness
}

func (t *TCPRendezvous) root(ctx context.Context, nranks int, newID func() (ncclraw.NcclUniqueId, error), m *Membership) (ncclraw.NcclUniqueId, error) {
	var zero ncclraw.NcclUniqueId
	ln := t.Listener
	if nranks == 1 {
		if ln != nil {
			ln.Close()
		}
		return newID() // nobody to watch
	}
	if ln == nil {
		var lc net.ListenConfig
		var err error
		if ln, err = lc.Listen(ctx, "tcp", t.Addr); err != nil {
			return zero, fmt.Errorf("nccl: rendezvous: rank 0: %w", err)
		}
	}
	id, err := newID()
	if err != nil {
		ln.Close()
		return zero, err
	}
	conns := make(chan net.Conn)
	go func() { // accept until the listener closes
		for {
			c, err := ln.Accept()
			if err != nil {
				close(conns)
				return
			}
			select {
			case conns <- c:
			case <-ctx.Done():
				c.Close()
			}
		}
	}()
	var h *hub
	if m != nil {
		h = newHub(m, t.Liveness)
	}
	err = rootExchange(ctx, nranks, id, t.Secret, h, func(yield func(io.ReadWriteCloser) bool) {
		for c := range conns {
			if !yield(c) {
				return
			}
		}
	}, ln.Close)
	if err != nil {
		if h != nil {
			h.abandon()
		}
		return zero, err
	}
	if h != nil {
		h.start()
	}
	return id, nil
}

func (t *TCPRendezvous) dial(ctx context.Context, rank, nranks int, m *Membership) (ncclraw.NcclUniqueId, error) {
	var zero ncclraw.NcclUniqueId
	retry := t.RetryInterval
	if retry <= 0 {
		retry = 50 * time.Millisecond
	}
	var d net.Dialer
	var last error
	for {
		c, err := d.DialContext(ctx, "tcp", t.Addr)
		if err == nil {
			id, err, interrupted := client(ctx, c, rank, nranks, t.Secret, t.liveness(m))
			if err == nil && !interrupted && m != nil {
				watchRoot(c, m, t.Liveness)
			} else {
				c.Close()
			}
			if interrupted && ctx.Err() != nil {
				return zero, &TimeoutError{Rank: rank, NRanks: nranks, Missing: []int{0}, Err: ctx.Err()}
			}
			if err != nil {
				return zero, fmt.Errorf("nccl: rendezvous: rank %d of %d with rank 0 at %s: %w", rank, nranks, t.Addr, err)
			}
			return id, nil
		}
		last = err
		select {
		case <-ctx.Done():
			return zero, &TimeoutError{Rank: rank, NRanks: nranks, Missing: []int{0},
				Err: fmt.Errorf("%w (last dial of %s: %v)", ctx.Err(), t.Addr, last)}
		case <-time.After(retry):
		}
	}
}

// answerGrace is how long a rank waits past its deadline for rank 0's answer.
const answerGrace = 500 * time.Millisecond

// graceContext is ctx with its deadline (if any) grace later; cancelling ctx still
// cancels it.
func graceContext(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	g, cancel := context.WithDeadline(context.WithoutCancel(ctx), dl.Add(grace))
	stop := context.AfterFunc(ctx, func() {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			cancel()
		}
	})
	return g, func() { stop(); cancel() }
}

// ConnRendezvous exchanges the id over connections the program already has (pipes,
// a connection of its own protocol, a net.Conn): on rank 0, Conns holds one per other
// rank, in any order; on the other ranks, one to rank 0. The exchange is
// TCPRendezvous's protocol. It ends with ctx (or after Timeout when ctx has no
// deadline): connections that have SetDeadline (net.Conn) are interrupted through it;
// a read of another io.ReadWriter cannot be interrupted, so it goes on, in a goroutine,
// until the connection is closed — close the connections after a failed rendezvous.
// The rendezvous does not close them.
type ConnRendezvous struct {
	Conns []io.ReadWriter
	// Timeout bounds the rendezvous when ctx has no deadline; 0 means
	// DefaultRendezvousTimeout.
	Timeout time.Duration
	// Secret is the job's secret, as TCPRendezvous's.
	Secret []byte
}

// ExchangeID implements Rendezvous.
func (c *ConnRendezvous) ExchangeID(ctx context.Context, rank, nranks int, newID func() (ncclraw.NcclUniqueId, error)) (ncclraw.NcclUniqueId, error) {
	var zero ncclraw.NcclUniqueId
	if err := checkRanks(rank, nranks); err != nil {
		return zero, err
	}
	ctx, cancel := boundedContext(ctx, c.Timeout)
	defer cancel()
	if rank != 0 {
		if len(c.Conns) != 1 || c.Conns[0] == nil {
			return zero, fmt.Errorf("nccl: rendezvous: %w: rank %d needs one connection, to rank 0 (has %d)", cuda.ErrInvalidArgument, rank, len(c.Conns))
		}
		id, err, interrupted := client(ctx, c.Conns[0], rank, nranks, c.Secret, 0)
		if interrupted && ctx.Err() != nil {
			return zero, &TimeoutError{Rank: rank, NRanks: nranks, Missing: []int{0}, Err: ctx.Err()}
		}
		if err != nil {
			return zero, fmt.Errorf("nccl: rendezvous: rank %d of %d: %w", rank, nranks, err)
		}
		return id, nil
	}
	if len(c.Conns) != nranks-1 || slices.Contains(c.Conns, nil) {
		return zero, fmt.Errorf("nccl: rendezvous: %w: rank 0 of %d needs %d connections (has %d)", cuda.ErrInvalidArgument, nranks, nranks-1, len(c.Conns))
	}
	id, err := newID()
	if err != nil {
		return zero, err
	}
	if nranks == 1 {
		return id, nil
	}
	err = rootExchange(ctx, nranks, id, c.Secret, nil, func(yield func(io.ReadWriteCloser) bool) {
		for _, rw := range c.Conns {
			if !yield(closerOf(rw)) {
				return
			}
		}
	}, func() error { return nil })
	if err != nil {
		return zero, err
	}
	return id, nil
}

// nopCloser: the program's connections stay open; deadlineCloser keeps SetDeadline.
type nopCloser struct{ io.ReadWriter }

func (nopCloser) Close() error { return nil }

type deadlineCloser struct {
	nopCloser
	deadliner
}

func closerOf(rw io.ReadWriter) io.ReadWriteCloser {
	if d, ok := rw.(deadliner); ok {
		return deadlineCloser{nopCloser{rw}, d}
	}
	return nopCloser{rw}
}

// sealKeys seals and opens the id of one authenticated connection.
type sealKeys struct{ aead cipher.AEAD }

func newSealKeys(secret, rootNonce, rankNonce []byte) *sealKeys {
	block, err := aes.NewCipher(mac(secret, "id", rootNonce, rankNonce))
	if err != nil {
		panic(err) // a 32-byte key is always valid
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return &sealKeys{aead}
}

// seal encrypts the id for rank of nranks; the key is used for this one message,
// so the nonce may be fixed.
func (k *sealKeys) seal(id ncclraw.NcclUniqueId, nranks, rank int) []byte {
	return k.aead.Seal(nil, make([]byte, k.aead.NonceSize()), id.Internal[:], helloPayload(rank, nranks))
}

func (k *sealKeys) open(p []byte, nranks, rank int) (ncclraw.NcclUniqueId, error) {
	var id ncclraw.NcclUniqueId
	plain, err := k.aead.Open(nil, make([]byte, k.aead.NonceSize()), p, helloPayload(rank, nranks))
	if err != nil || len(plain) != len(id.Internal) {
		return id, fmt.Errorf("%w: the id from rank 0 does not open with the job's secret", ErrAuthentication)
	}
	copy(id.Internal[:], plain)
	return id, nil
}

// mac is HMAC-SHA256 under secret of a label and fixed-length parts.
func mac(secret []byte, label string, parts ...[]byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("gocuda-nccl " + label + "\x00"))
	for _, p := range parts {
		h.Write(p)
	}
	return h.Sum(nil)
}

func nonce() []byte {
	b := make([]byte, nonceLen)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return b
}

// authenticate is rank 0's side of an authenticated hello: it returns the rank,
// number of ranks and liveness the peer proved, and the keys that seal its id. A
// peer that does not prove the secret gets an error matching ErrAuthentication.
func authenticate(rw io.ReadWriter, secret []byte) (rank, nranks int, liveness uint32, keys *sealKeys, err error) {
	kind, p, err := readFrame(rw)
	if err != nil {
		return 0, 0, 0, nil, err
	}
	if kind == kindHello {
		return 0, 0, 0, nil, fmt.Errorf("%w: a hello without the job's secret", ErrAuthentication)
	}
	var ok bool
	if kind == kindAuthHello && len(p) > nonceLen {
		rank, nranks, liveness, ok = parseIDs(p[:len(p)-nonceLen])
	}
	if !ok {
		return 0, 0, 0, nil, fmt.Errorf("%w: expected a hello, got a frame of kind %d with %d bytes", ErrProtocol, kind, len(p))
	}
	ids, rankNonce := p[:len(p)-nonceLen], p[len(p)-nonceLen:]
	rootNonce := nonce()
	if err := writeFrame(rw, kindChallenge, append(rootNonce, mac(secret, "root", rankNonce, rootNonce, ids)...)); err != nil {
		return 0, 0, 0, nil, err
	}
	kind, proof, err := readFrame(rw)
	if err != nil {
		return 0, 0, 0, nil, err
	}
	if kind != kindProof || !hmac.Equal(proof, mac(secret, "rank", rootNonce, rankNonce, ids)) {
		return 0, 0, 0, nil, fmt.Errorf("%w: the rank's proof of the job's secret is wrong", ErrAuthentication)
	}
	return rank, nranks, liveness, newSealKeys(secret, rootNonce, rankNonce), nil
}

// authenticatedHello is a rank's side of an authenticated hello: it checks rank
// 0's proof before it gives its own, and opens the sealed id.
func authenticatedHello(rw io.ReadWriter, rank, nranks int, liveness time.Duration, secret []byte) (ncclraw.NcclUniqueId, error) {
	var id ncclraw.NcclUniqueId
	ids, rankNonce := helloIDs(rank, nranks, liveness), nonce()
	if err := writeFrame(rw, kindAuthHello, append(slices.Clone(ids), rankNonce...)); err != nil {
		return id, err
	}
	kind, p, err := readFrame(rw)
	switch {
	case err != nil:
		return id, err
	case kind == kindReject:
		return id, readReject(p, nranks)
	case kind != kindChallenge || len(p) != nonceLen+sha256.Size:
		return id, fmt.Errorf("%w: rank 0 answered without the job's secret (a frame of kind %d)", ErrAuthentication, kind)
	}
	rootNonce := p[:nonceLen]
	if !hmac.Equal(p[nonceLen:], mac(secret, "root", rankNonce, rootNonce, ids)) {
		return id, fmt.Errorf("%w: rank 0's proof of the job's secret is wrong", ErrAuthentication)
	}
	if err := writeFrame(rw, kindProof, mac(secret, "rank", rootNonce, rankNonce, ids)); err != nil {
		return id, err
	}
	kind, p, err = readFrame(rw)
	switch {
	case err != nil:
		return id, err
	case kind == kindReject:
		return id, readReject(p, nranks)
	case kind != kindSealedID:
		return id, fmt.Errorf("%w: expected the sealed id, got a frame of kind %d", ErrProtocol, kind)
	}
	return newSealKeys(secret, rootNonce, rankNonce).open(p, nranks, rank)
}

// remoteOf names the peer of rw for a log line.
func remoteOf(rw io.ReadWriter) string {
	if c, ok := rw.(interface{ RemoteAddr() net.Addr }); ok {
		return c.RemoteAddr().String()
	}
	return "a connection of the program's"
}

// MinSecretLen is the least length of a job secret that JobSecretFromEnv accepts.
const MinSecretLen = 16

// JobSecretFromEnv returns the job's secret for the rendezvous (TCPRendezvous.Secret):
// GOCUDA_JOB_SECRET, or the contents of the file GOCUDA_JOB_SECRET_FILE names (a
// launcher's secret mount, say; a trailing newline is dropped), or nil when neither
// is set. A secret shorter than MinSecretLen bytes is an error, as is an unreadable
// file.
func JobSecretFromEnv() ([]byte, error) {
	var secret []byte
	if v, ok := os.LookupEnv("GOCUDA_JOB_SECRET"); ok {
		secret = []byte(v)
	} else if f, ok := os.LookupEnv("GOCUDA_JOB_SECRET_FILE"); ok {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("nccl: the job's secret: %w", err)
		}
		secret = []byte(strings.TrimRight(string(b), "\r\n"))
	} else {
		return nil, nil
	}
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("nccl: %w: the job's secret has %d bytes, at least %d are needed", cuda.ErrInvalidArgument, len(secret), MinSecretLen)
	}
	return secret, nil
}
