package nccl

import (
	"context"
	"encoding/binary"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocuda/gocuda/nccl/ncclraw"
)

// WatchingRendezvous is a Rendezvous that can go on watching the ranks once they
// have joined, so that the communicator Join makes learns when a rank is gone (its
// process died, its host or network failed) instead of waiting for it for ever:
// TCPRendezvous with a Liveness, etcdrendezvous.Rendezvous with Watch. Join uses
// ExchangeIDWatching where the rendezvous has it.
type WatchingRendezvous interface {
	Rendezvous
	// ExchangeIDWatching is ExchangeID that, once it has succeeded, watches the
	// other ranks and reports to m (Membership.Gone) the ones that leave without
	// a goodbye, until m.Done() is closed; it then stops, saying goodbye to the
	// others if m.Leaving(). It returns the bound of the watch: how long after a
	// rank is gone the report may come, at worst; 0 if it does not watch (then it
	// leaves m alone). After a failed exchange, nothing goes on.
	ExchangeIDWatching(ctx context.Context, rank, nranks int, newID func() (ncclraw.NcclUniqueId, error), m *Membership) (ncclraw.NcclUniqueId, time.Duration, error)
}

// Membership is one rank's knowledge of which ranks of its communicator are gone,
// fed by a WatchingRendezvous (Gone) and read by the communicators Join and Shrink
// make, whose waits end with a *RankGoneError once a rank is reported. Ranks are
// the rendezvous's: 0 to NRanks()-1. It is safe for concurrent use.
//
// Join makes one per rank and hands it to the rendezvous; the communicators hold
// it, and when the last of them is released the membership is done (Done): the
// rendezvous then stops watching, and says goodbye to the other ranks (which do
// not take this rank for gone) if the release was a Close (Leaving), not an Abort
// or a communicator dropped without either. NewMembership makes one for a program
// or a test that drives a WatchingRendezvous itself; Close ends it.
type Membership struct {
	rank, nranks int

	ngone  atomic.Int32 // the ranks reported gone: the communicators' fast path when 0
	frozen atomic.Bool  // tests: the watch sends nothing more (a host that hangs)

	mu      sync.Mutex
	gone    []bool
	changed chan struct{} // closed at the next report, then replaced
	refs    int
	done    chan struct{}
	leaving bool
}

// NewMembership returns the membership of rank of nranks ranks, none gone, held
// once (Close releases it).
func NewMembership(rank, nranks int) *Membership {
	return &Membership{rank: rank, nranks: nranks, gone: make([]bool, max(nranks, 0)),
		changed: make(chan struct{}), refs: 1, done: make(chan struct{})}
}

// Rank returns the rank the membership belongs to.
func (m *Membership) Rank() int { return m.rank }

// NRanks returns the number of ranks.
func (m *Membership) NRanks() int { return m.nranks }

// Gone reports ranks that are gone: they left without a goodbye, or the watch lost
// them. Ranks out of range, and ranks already reported, are ignored. The rank's
// own rank means the watch lost this rank: the others take it for gone.
func (m *Membership) Gone(ranks ...int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	news := false
	for _, r := range ranks {
		if r >= 0 && r < m.nranks && !m.gone[r] {
			m.gone[r] = true
			m.ngone.Add(1)
			news = true
		}
	}
	if news {
		close(m.changed)
		m.changed = make(chan struct{})
	}
}

// Ranks returns the ranks reported gone so far, ascending.
func (m *Membership) Ranks() []int {
	if m.ngone.Load() == 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int
	for r, g := range m.gone {
		if g {
			out = append(out, r)
		}
	}
	return out
}

// Changed returns a channel closed at the next report of a rank gone.
func (m *Membership) Changed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

// Done returns a channel closed once the membership has been released by all its
// holders: the watch is to stop.
func (m *Membership) Done() <-chan struct{} { return m.done }

// Leaving reports, once Done is closed, whether the rank leaves cleanly (its
// communicators were closed), so that the watch says goodbye to the others.
func (m *Membership) Leaving() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leaving
}

// Close releases the hold NewMembership gave: leaving says whether the rank leaves
// cleanly. Closing again does nothing.
func (m *Membership) Close(leaving bool) { m.release(leaving) }

// acquire adds a holder (a communicator).
func (m *Membership) acquire() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refs++
}

// release drops a holder; the last one ends the membership, leaving or not.
func (m *Membership) release(leaving bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.refs <= 0 {
		return
	}
	m.refs--
	if m.refs == 0 {
		m.leaving = leaving
		close(m.done)
	}
}

// end ends the membership at once, whoever holds it, without a goodbye (tests: a
// process that dies).
func (m *Membership) end() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.refs > 0 {
		m.refs = 0
		close(m.done)
	}
}

// The watch of TCPRendezvous: rank 0 (the hub) keeps the connection of every
// other rank; each side sends a beat every liveness/4 and reads with a deadline of
// a liveness, so that a side that hears nothing for a liveness, or sees the
// connection end without a bye, takes the other for gone. The hub reports a rank
// it lost to its membership and to every other rank (a gone frame); a rank that
// loses rank 0 reports rank 0. A membership that is done ends the watch, with a
// bye when leaving.

// connDeadlines is what the watch needs of a connection (net.Conn has it).
type connDeadlines interface {
	SetReadDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
}

func beatInterval(liveness time.Duration) time.Duration { return max(liveness/4, time.Millisecond) }

// byeLimit bounds the write of a goodbye.
const byeLimit = time.Second

// sendFrame writes a frame within limit where c has deadlines.
func sendFrame(c io.ReadWriteCloser, kind byte, payload []byte, limit time.Duration) error {
	if d, ok := c.(connDeadlines); ok {
		_ = d.SetWriteDeadline(time.Now().Add(limit))
	}
	return writeFrame(c, kind, payload)
}

// recvFrame reads a frame, waiting at most liveness where c has deadlines.
func recvFrame(c io.ReadWriteCloser, liveness time.Duration) (byte, []byte, error) {
	if d, ok := c.(connDeadlines); ok {
		_ = d.SetReadDeadline(time.Now().Add(liveness))
	}
	return readFrame(c)
}

func gonePayload(ranks []int) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(ranks)))
	for _, r := range ranks {
		b = binary.BigEndian.AppendUint32(b, uint32(r))
	}
	return b
}

func parseGone(p []byte) ([]int, bool) {
	if len(p) < 4 {
		return nil, false
	}
	n := binary.BigEndian.Uint32(p)
	if uint64(n)*4 != uint64(len(p)-4) {
		return nil, false
	}
	out := make([]int, n)
	for i := range out {
		out[i] = int(binary.BigEndian.Uint32(p[4+4*i:]))
	}
	return out, true
}

// hub is rank 0's side of the watch.
type hub struct {
	m        *Membership
	liveness time.Duration

	mu      sync.Mutex
	peers   map[int]*peer
	started bool
	over    bool // done, or abandoned
}

// peer is the hub's connection to one rank.
type peer struct {
	rank int
	c    io.ReadWriteCloser
	out  chan []byte // gone frames to send
	stop chan struct{}
	bye  atomic.Bool // the writer says goodbye before it closes
	once sync.Once
}

func newHub(m *Membership, liveness time.Duration) *hub {
	return &hub{m: m, liveness: liveness, peers: map[int]*peer{}}
}

// add takes a rank's connection once the rank has the id; its goroutines start
// with start (the rendezvous succeeded).
func (h *hub) add(rank int, c io.ReadWriteCloser) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.over {
		c.Close()
		return
	}
	h.peers[rank] = &peer{rank: rank, c: c, out: make(chan []byte, h.m.nranks), stop: make(chan struct{})}
}

// abandon closes the connections of a rendezvous that failed.
func (h *hub) abandon() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.over = true
	for _, p := range h.peers {
		p.c.Close()
	}
	h.peers = nil
}

// start runs the watch: a reader and a writer per rank, and the end of the
// membership.
func (h *hub) start() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.started = true
	for _, p := range h.peers {
		go h.read(p)
		go h.write(p)
	}
	go func() {
		<-h.m.Done()
		leaving := h.m.Leaving()
		h.mu.Lock()
		defer h.mu.Unlock()
		h.over = true
		for _, p := range h.peers {
			p.end(leaving)
		}
		h.peers = nil
	}()
}

// end stops p's writer, which closes the connection (after a bye if bye).
func (p *peer) end(bye bool) {
	p.once.Do(func() {
		p.bye.Store(bye)
		close(p.stop)
	})
}

func (h *hub) write(p *peer) {
	tick := time.NewTicker(beatInterval(h.liveness))
	defer tick.Stop()
	defer p.c.Close()
	for {
		select {
		case <-p.stop:
			if p.bye.Load() {
				_ = sendFrame(p.c, kindBye, nil, byeLimit)
			}
			return
		case f := <-p.out:
			if h.m.frozen.Load() {
				continue
			}
			if sendFrame(p.c, kindGone, f, h.liveness) != nil {
				h.lost(p, true)
				return
			}
		case <-tick.C:
			if h.m.frozen.Load() {
				continue
			}
			if sendFrame(p.c, kindBeat, nil, h.liveness) != nil {
				h.lost(p, true)
				return
			}
		}
	}
}

func (h *hub) read(p *peer) {
	for {
		kind, _, err := recvFrame(p.c, h.liveness)
		switch {
		case err != nil:
			h.lost(p, true)
			return
		case kind == kindBeat:
		case kind == kindBye:
			h.lost(p, false) // it left cleanly
			return
		default:
			h.lost(p, true) // not the watch's protocol
			return
		}
	}
}

// lost drops p's rank from the watch; gone, it is reported here and to the others.
func (h *hub) lost(p *peer, gone bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.over || h.peers[p.rank] != p {
		return // the watch is over, or the rank already dropped
	}
	delete(h.peers, p.rank)
	p.end(false)
	if !gone {
		return
	}
	h.m.Gone(p.rank)
	f := gonePayload([]int{p.rank})
	for _, o := range h.peers {
		select {
		case o.out <- f:
		default: // full: that rank's writer is stuck, and its rank about to be lost
		}
	}
}

// watchRoot is a rank's side of the watch, on its connection to rank 0.
func watchRoot(c io.ReadWriteCloser, m *Membership, liveness time.Duration) {
	stop := make(chan struct{}) // the reader is done: the watch is over
	go func() {
		defer close(stop)
		for {
			kind, p, err := recvFrame(c, liveness)
			switch {
			case err != nil:
				select {
				case <-m.Done(): // closed by the writer
				default:
					m.Gone(0)
				}
				return
			case kind == kindBeat:
			case kind == kindGone:
				ranks, ok := parseGone(p)
				if !ok {
					m.Gone(0) // garbage from rank 0: the watch is lost
					return
				}
				m.Gone(slices.DeleteFunc(ranks, func(r int) bool { return r == m.rank })...)
			case kind == kindBye:
				return // rank 0 left cleanly: the watch ends
			default:
				m.Gone(0)
				return
			}
		}
	}()
	go func() {
		tick := time.NewTicker(beatInterval(liveness))
		defer tick.Stop()
		defer c.Close()
		for {
			select {
			case <-m.Done():
				if m.Leaving() {
					_ = sendFrame(c, kindBye, nil, byeLimit)
				}
				return
			case <-stop:
				return
			case <-tick.C:
				if m.frozen.Load() {
					continue
				}
				if sendFrame(c, kindBeat, nil, liveness) != nil {
					return // the reader sees the connection end, or the silence
				}
			}
		}
	}()
}
