package nccl_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/nccl"
	"github.com/gocuda/gocuda/nccl/ncclraw"
)

// The rendezvous needs no GPU and no NCCL: these tests run it for real, over TCP on
// 127.0.0.1 (and over pipes), with goroutines as the ranks and a made-up id.

// fakeID returns an id whose bytes are all distinct from the zero id's, and a newID
// that counts its calls.
func fakeID(seed byte) (ncclraw.NcclUniqueId, func() (ncclraw.NcclUniqueId, error), *atomic.Int32) {
	var id ncclraw.NcclUniqueId
	for i := range id.Internal {
		id.Internal[i] = seed + byte(i)*7 + 1
	}
	var calls atomic.Int32
	return id, func() (ncclraw.NcclUniqueId, error) { calls.Add(1); return id, nil }, &calls
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return ln
}

type rankResult struct {
	id  ncclraw.NcclUniqueId
	err error
	dur time.Duration
}

// runRanks runs ExchangeID for the given ranks of nranks concurrently.
func runRanks(ctx context.Context, nranks int, ranks []int, rv func(rank int) nccl.Rendezvous,
	newID func() (ncclraw.NcclUniqueId, error)) map[int]rankResult {
	var mu sync.Mutex
	out := map[int]rankResult{}
	var wg sync.WaitGroup
	for _, r := range ranks {
		wg.Go(func() {
			start := time.Now()
			id, err := rv(r).ExchangeID(ctx, r, nranks, newID)
			mu.Lock()
			out[r] = rankResult{id, err, time.Since(start)}
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// TestTCPRendezvous: 5 ranks get rank 0's id; newID runs once, on rank 0; the
// listener is closed afterwards.
func TestTCPRendezvous(t *testing.T) {
	id, newID, calls := fakeID(3)
	ln := listen(t)
	addr := ln.Addr().String()
	res := runRanks(t.Context(), 5, []int{3, 1, 0, 4, 2}, func(r int) nccl.Rendezvous {
		if r == 0 {
			return &nccl.TCPRendezvous{Addr: addr, Listener: ln}
		}
		return &nccl.TCPRendezvous{Addr: addr, RetryInterval: 5 * time.Millisecond}
	}, newID)
	for r, got := range res {
		require.NoError(t, got.err, "rank %d", r)
		assert.Equal(t, id, got.id, "rank %d", r)
	}
	assert.Equal(t, int32(1), calls.Load())
	_, err := net.DialTimeout("tcp", addr, time.Second)
	assert.Error(t, err, "the listener is closed after the rendezvous")
}

// TestTCPRendezvousRank0Late: ranks dial before rank 0 listens; they retry until it
// does (rank 0 listening on Addr itself).
func TestTCPRendezvousRank0Late(t *testing.T) {
	ln := listen(t)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // a free port, for rank 0 to listen on later
	id, newID, _ := fakeID(9)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	res := runRanks(ctx, 3, []int{0, 1, 2}, func(r int) nccl.Rendezvous {
		if r == 0 {
			time.Sleep(300 * time.Millisecond)
		}
		return &nccl.TCPRendezvous{Addr: addr, RetryInterval: 10 * time.Millisecond}
	}, newID)
	for r, got := range res {
		require.NoError(t, got.err, "rank %d", r)
		assert.Equal(t, id, got.id)
	}
}

// TestTCPRendezvousMissingRank: rank 2 of 3 never joins: rank 0 returns a timeout
// error naming it when its context's deadline passes, and so does rank 1 (told by
// rank 0), both promptly; the third rank's absence hangs nobody.
func TestTCPRendezvousMissingRank(t *testing.T) {
	ln := listen(t)
	addr := ln.Addr().String()
	_, newID, _ := fakeID(1)
	ctx, cancel := context.WithTimeout(t.Context(), 400*time.Millisecond)
	defer cancel()
	res := runRanks(ctx, 3, []int{0, 1}, func(r int) nccl.Rendezvous {
		if r == 0 {
			return &nccl.TCPRendezvous{Addr: addr, Listener: ln}
		}
		return &nccl.TCPRendezvous{Addr: addr, RetryInterval: 5 * time.Millisecond}
	}, newID)
	for r, got := range res {
		var te *nccl.TimeoutError
		require.ErrorAs(t, got.err, &te, "rank %d: %v", r, got.err)
		assert.True(t, te.Timeout())
		assert.ErrorIs(t, got.err, context.DeadlineExceeded)
		assert.Equal(t, r, te.Rank)
		assert.Equal(t, 3, te.NRanks)
		assert.Equal(t, []int{2}, te.Missing, "rank %d names the rank that never came", r)
		assert.Less(t, got.dur, 5*time.Second)
		assert.Contains(t, got.err.Error(), "[2]")
	}
}

// TestTCPRendezvousNoRank0: without rank 0, the others retry until the timeout,
// and their error names rank 0; the rendezvous's Timeout applies when the context
// has no deadline.
func TestTCPRendezvousNoRank0(t *testing.T) {
	ln := listen(t)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	start := time.Now()
	_, err := (&nccl.TCPRendezvous{Addr: addr, Timeout: 300 * time.Millisecond, RetryInterval: 20 * time.Millisecond}).
		ExchangeID(context.Background(), 1, 2, nil)
	var te *nccl.TimeoutError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, []int{0}, te.Missing)
	assert.Equal(t, 1, te.Rank)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 5*time.Second)
}

// TestTCPRendezvousCancel: cancelling the context ends the rendezvous on every side,
// with an error that matches context.Canceled and is not a timeout.
func TestTCPRendezvousCancel(t *testing.T) {
	ln := listen(t)
	addr := ln.Addr().String()
	_, newID, _ := fakeID(1)
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(200*time.Millisecond, cancel)
	res := runRanks(ctx, 3, []int{0, 1}, func(r int) nccl.Rendezvous {
		if r == 0 {
			return &nccl.TCPRendezvous{Addr: addr, Listener: ln}
		}
		return &nccl.TCPRendezvous{Addr: addr}
	}, newID)
	for r, got := range res {
		require.Error(t, got.err, "rank %d", r)
		assert.ErrorIs(t, got.err, context.Canceled, "rank %d: %v", r, got.err)
		var te *nccl.TimeoutError
		require.ErrorAs(t, got.err, &te)
		assert.False(t, te.Timeout())
		assert.Less(t, got.dur, 5*time.Second)
	}
}

// TestTCPRendezvousGarbageConnections: connections that do not speak the protocol
// (garbage, a short frame, a connection that says nothing, another version) are
// dropped by rank 0, which completes the rendezvous with the real ranks.
func TestTCPRendezvousGarbageConnections(t *testing.T) {
	ln := listen(t)
	addr := ln.Addr().String()
	id, newID, _ := fakeID(5)
	junk := [][]byte{
		[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		[]byte("GCNC\x00"),              // short header
		frame(2, 1, 0, make([]byte, 8)), // another version
		frame(1, 1, 0, []byte{1, 2, 3}), // a hello of 3 bytes
		nil,                             // says nothing
	}
	var conns []net.Conn
	for _, b := range junk {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		conns = append(conns, c)
		if b != nil {
			_, err = c.Write(b)
			require.NoError(t, err)
		}
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	res := runRanks(ctx, 3, []int{0, 1, 2}, func(r int) nccl.Rendezvous {
		if r == 0 {
			return &nccl.TCPRendezvous{Addr: addr, Listener: ln}
		}
		return &nccl.TCPRendezvous{Addr: addr}
	}, newID)
	for r, got := range res {
		require.NoError(t, got.err, "rank %d", r)
		assert.Equal(t, id, got.id)
		assert.Less(t, got.dur, 5*time.Second, "the silent connection does not hold rank 0 up")
	}
}

// frame builds a frame by hand: version, kind, reserved byte and payload.
func frame(version uint16, kind, reserved byte, payload []byte) []byte {
	b := []byte("GCNC")
	b = binary.BigEndian.AppendUint16(b, version)
	b = append(b, kind, reserved)
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...)
}

// fakeRank0 listens and answers each connection with reply (after reading the
// hello's 20 bytes), then closes it.
func fakeRank0(t *testing.T, reply []byte) string {
	ln := listen(t)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.ReadFull(c, make([]byte, 20))
			_, _ = c.Write(reply)
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// TestTCPRendezvousBadRank0: a rank whose "rank 0" answers garbage, a short frame, a
// frame of another version or kind, an oversized length, or nothing, fails at once
// with ErrProtocol (no hang, no panic, no huge allocation); a reject is ErrRejected;
// an id for another number of ranks is ErrRejected.
func TestTCPRendezvousBadRank0(t *testing.T) {
	id, _, _ := fakeID(2)
	idFor := func(n uint32) []byte {
		return append(binary.BigEndian.AppendUint32(nil, n), id.Internal[:]...)
	}
	huge := frame(1, 2, 0, nil)
	binary.BigEndian.PutUint32(huge[8:], 1<<31)
	for _, c := range []struct {
		name  string
		reply []byte
		want  error
	}{
		{"http", []byte("HTTP/1.1 400 Bad Request\r\n\r\n"), nccl.ErrProtocol},
		{"nothing", nil, nccl.ErrProtocol},
		{"short header", []byte("GCNC\x00\x01"), nccl.ErrProtocol},
		{"short payload", frame(1, 2, 0, idFor(2))[:40], nccl.ErrProtocol},
		{"version", frame(7, 2, 0, idFor(2)), nccl.ErrProtocol},
		{"kind", frame(1, 9, 0, idFor(2)), nccl.ErrProtocol},
		{"reserved", frame(1, 2, 1, idFor(2)), nccl.ErrProtocol},
		{"id size", frame(1, 2, 0, idFor(2)[:100]), nccl.ErrProtocol},
		{"huge", huge, nccl.ErrProtocol},
		{"short reject", frame(1, 3, 0, []byte{2}), nccl.ErrProtocol},
		{"reject count", frame(1, 3, 0, []byte{2, 0xff, 0xff, 0xff, 0xff}), nccl.ErrProtocol},
		{"reject", frame(1, 3, 0, append([]byte{2, 0, 0, 0, 0}, "go away"...)), nccl.ErrRejected},
		{"nranks", frame(1, 2, 0, idFor(3)), nccl.ErrRejected},
	} {
		t.Run(c.name, func(t *testing.T) {
			addr := fakeRank0(t, c.reply)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			start := time.Now()
			_, err := (&nccl.TCPRendezvous{Addr: addr}).ExchangeID(ctx, 1, 2, nil)
			require.Error(t, err)
			assert.ErrorIs(t, err, c.want, "%v", err)
			assert.Less(t, time.Since(start), 5*time.Second)
		})
	}
	t.Run("ok", func(t *testing.T) { // the hand-made frames are right
		addr := fakeRank0(t, frame(1, 2, 0, idFor(2)))
		got, err := (&nccl.TCPRendezvous{Addr: addr}).ExchangeID(t.Context(), 1, 2, nil)
		require.NoError(t, err)
		assert.Equal(t, id, got)
	})
}

// A rank 0 that resets the connection (mid-hello or after it) or accepts and never
// answers: every rank gets a typed error, never a bare network error — ErrProtocol
// for a connection lost, a *TimeoutError matching context.DeadlineExceeded for the
// silence, even though the connection's deadline and the context's timer fall due
// together.
func TestTCPRendezvousRank0ResetsOrIsSilent(t *testing.T) {
	serve := func(t *testing.T, handle func(*net.TCPConn)) string {
		ln := listen(t)
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go handle(c.(*net.TCPConn))
			}
		}()
		return ln.Addr().String()
	}
	reset := func(c *net.TCPConn) { _ = c.SetLinger(0); _ = c.Close() }
	for _, c := range []struct {
		name   string
		handle func(*net.TCPConn)
	}{
		{"reset at once", reset},
		{"reset after the hello", func(c *net.TCPConn) { _, _ = io.ReadFull(c, make([]byte, 20)); reset(c) }},
		{"reset mid-frame", func(c *net.TCPConn) {
			_, _ = io.ReadFull(c, make([]byte, 20))
			_, _ = c.Write([]byte("GCNC\x00\x01"))
			reset(c)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			addr := serve(t, c.handle)
			for range 20 {
				_, err := (&nccl.TCPRendezvous{Addr: addr}).ExchangeID(t.Context(), 1, 2, nil)
				require.ErrorIs(t, err, nccl.ErrProtocol, "%v", err)
			}
		})
	}
	t.Run("silent", func(t *testing.T) {
		var held sync.Mutex
		var conns []net.Conn
		t.Cleanup(func() {
			held.Lock()
			defer held.Unlock()
			for _, c := range conns {
				c.Close()
			}
		})
		addr := serve(t, func(c *net.TCPConn) { held.Lock(); conns = append(conns, c); held.Unlock() })
		const n = 40
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		ranks := make([]int, n-1)
		for i := range ranks {
			ranks[i] = i + 1
		}
		res := runRanks(ctx, n, ranks, func(int) nccl.Rendezvous { return &nccl.TCPRendezvous{Addr: addr} }, nil)
		require.Len(t, res, n-1)
		for r, got := range res {
			var te *nccl.TimeoutError
			require.ErrorAs(t, got.err, &te, "rank %d: %v", r, got.err)
			assert.ErrorIs(t, got.err, context.DeadlineExceeded, "rank %d", r)
			assert.Equal(t, []int{0}, te.Missing, "rank %d", r)
		}
	})
}

// TestTCPRendezvousContradiction: a rank that says the communicator has another
// number of ranks, or a rank that joins twice, fails the rendezvous with ErrRejected
// on rank 0 and on the rank rank 0 turned away, without waiting for the timeout.
func TestTCPRendezvousContradiction(t *testing.T) {
	t.Run("nranks", func(t *testing.T) {
		ln := listen(t)
		addr := ln.Addr().String()
		_, newID, _ := fakeID(1)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		var err0, err1 error
		wg.Go(func() { _, err0 = (&nccl.TCPRendezvous{Listener: ln}).ExchangeID(ctx, 0, 3, newID) })
		wg.Go(func() { _, err1 = (&nccl.TCPRendezvous{Addr: addr}).ExchangeID(ctx, 1, 2, nil) })
		wg.Wait()
		assert.ErrorIs(t, err0, nccl.ErrRejected)
		assert.ErrorIs(t, err1, nccl.ErrRejected)
		assert.NoError(t, ctx.Err(), "no timeout")
	})
	t.Run("twice", func(t *testing.T) {
		ln := listen(t)
		addr := ln.Addr().String()
		_, newID, _ := fakeID(1)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		res := runRanks(ctx, 3, []int{0, 1, 1}, func(r int) nccl.Rendezvous {
			if r == 0 {
				return &nccl.TCPRendezvous{Listener: ln}
			}
			return &nccl.TCPRendezvous{Addr: addr}
		}, newID)
		// runRanks keys by rank: the two rank 1s share a slot; rank 0 is the check.
		assert.ErrorIs(t, res[0].err, nccl.ErrRejected)
		assert.Contains(t, res[0].err.Error(), "twice")
		assert.Error(t, res[1].err)
		assert.NoError(t, ctx.Err(), "no timeout")
	})
}

// TestRendezvousArguments: ranks out of range, and connections that do not fit the
// rank, are invalid arguments; one rank needs no exchange and does not listen.
func TestRendezvousArguments(t *testing.T) {
	_, newID, calls := fakeID(1)
	for _, rn := range [][2]int{{-1, 2}, {2, 2}, {0, 0}} {
		_, err := (&nccl.TCPRendezvous{Addr: "127.0.0.1:1"}).ExchangeID(t.Context(), rn[0], rn[1], newID)
		assert.ErrorIs(t, err, cuda.ErrInvalidArgument, "%v", rn)
		_, err = (&nccl.ConnRendezvous{}).ExchangeID(t.Context(), rn[0], rn[1], newID)
		assert.ErrorIs(t, err, cuda.ErrInvalidArgument, "%v", rn)
	}
	_, err := (&nccl.ConnRendezvous{}).ExchangeID(t.Context(), 0, 3, newID)
	assert.ErrorIs(t, err, cuda.ErrInvalidArgument)
	_, err = (&nccl.ConnRendezvous{Conns: []io.ReadWriter{nil}}).ExchangeID(t.Context(), 1, 3, newID)
	assert.ErrorIs(t, err, cuda.ErrInvalidArgument)
	assert.Zero(t, calls.Load())

	id, err := (&nccl.TCPRendezvous{Addr: "no-such-host.invalid:1"}).ExchangeID(t.Context(), 0, 1, newID)
	require.NoError(t, err)
	got, _, _ := fakeID(1)
	assert.Equal(t, got, id)

	fail := errors.New("no id")
	_, err = (&nccl.TCPRendezvous{Listener: listen(t)}).ExchangeID(t.Context(), 0, 2,
		func() (ncclraw.NcclUniqueId, error) { return ncclraw.NcclUniqueId{}, fail })
	assert.ErrorIs(t, err, fail)
}

// pipeRW is a connection without SetDeadline: one io.Pipe each way.
type pipeRW struct {
	io.Reader
	io.Writer
}

func pipePair() (a, b pipeRW, closeAll func()) {
	ar, bw := io.Pipe()
	br, aw := io.Pipe()
	return pipeRW{ar, aw}, pipeRW{br, bw}, func() { ar.Close(); br.Close(); aw.Close(); bw.Close() }
}

// TestConnRendezvous: the exchange over the program's connections, net.Pipe (with
// deadlines) and io.Pipe (without).
func TestConnRendezvous(t *testing.T) {
	for _, kind := range []string{"net.Pipe", "io.Pipe"} {
		t.Run(kind, func(t *testing.T) {
			const n = 4
			root := make([]io.ReadWriter, n-1)
			peers := make([]io.ReadWriter, n)
			for r := 1; r < n; r++ {
				if kind == "net.Pipe" {
					a, b := net.Pipe()
					defer a.Close()
					defer b.Close()
					root[n-1-r], peers[r] = a, b // in any order
				} else {
					a, b, closeAll := pipePair()
					defer closeAll()
					root[n-1-r], peers[r] = a, b
				}
			}
			id, newID, calls := fakeID(4)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			res := runRanks(ctx, n, []int{0, 1, 2, 3}, func(r int) nccl.Rendezvous {
				if r == 0 {
					return &nccl.ConnRendezvous{Conns: root}
				}
				return &nccl.ConnRendezvous{Conns: []io.ReadWriter{peers[r]}}
			}, newID)
			for r, got := range res {
				require.NoError(t, got.err, "rank %d", r)
				assert.Equal(t, id, got.id)
			}
			assert.Equal(t, int32(1), calls.Load())
		})
	}
}

// TestConnRendezvousTimeout: over connections that cannot be interrupted (io.Pipe),
// a rank whose peer never answers still returns at the deadline; a missing rank is
// named by rank 0.
func TestConnRendezvousTimeout(t *testing.T) {
	a, _, closeAll := pipePair()
	defer closeAll()
	start := time.Now()
	_, err := (&nccl.ConnRendezvous{Conns: []io.ReadWriter{a}, Timeout: 200 * time.Millisecond}).
		ExchangeID(context.Background(), 2, 3, nil)
	var te *nccl.TimeoutError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, []int{0}, te.Missing)
	assert.Less(t, time.Since(start), 5*time.Second)

	// Rank 0 with ranks 1 and 2 on pipes; only rank 1 answers.
	r1a, r1b, close1 := pipePair()
	defer close1()
	r2a, _, close2 := pipePair()
	defer close2()
	_, newID, _ := fakeID(1)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	res := runRanks(ctx, 3, []int{0, 1}, func(r int) nccl.Rendezvous {
		if r == 0 {
			return &nccl.ConnRendezvous{Conns: []io.ReadWriter{r2a, r1a}}
		}
		return &nccl.ConnRendezvous{Conns: []io.ReadWriter{r1b}}
	}, newID)
	for r, got := range res {
		require.ErrorAs(t, got.err, &te, "rank %d", r)
		assert.Equal(t, []int{2}, te.Missing, "rank %d", r)
		assert.Less(t, got.dur, 5*time.Second)
	}
}

// FuzzReadID: whatever rank 0 sends, a rank returns an id or an error, without
// panicking or hanging (the reader ends).
func FuzzReadID(f *testing.F) {
	id, _, _ := fakeID(0)
	f.Add(frame(1, 2, 0, append(binary.BigEndian.AppendUint32(nil, 2), id.Internal[:]...)))
	f.Add(frame(1, 3, 0, []byte{1, 0, 0, 0, 1, 0, 0, 0, 2, 'x'}))
	f.Add([]byte("GCNC"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, reply []byte) {
		rw := struct {
			io.Reader
			io.Writer
		}{bytes.NewReader(reply), io.Discard}
		_, err := (&nccl.ConnRendezvous{Conns: []io.ReadWriter{rw}}).ExchangeID(t.Context(), 1, 2, nil)
		if err == nil {
			return
		}
		var te *nccl.TimeoutError
		if !errors.Is(err, nccl.ErrProtocol) && !errors.Is(err, nccl.ErrRejected) && !errors.As(err, &te) {
			t.Fatalf("unexpected error kind: %v", err)
		}
	})
}

// TestRejectCarriesTheCause: a rank that rank 0 turns away learns why — rank 0 ran out of
// time (DeadlineExceeded, a timeout), its context was cancelled (Canceled, not a
// timeout), or it rejected the rank — whatever its own context says.
func TestRejectCarriesTheCause(t *testing.T) {
	for _, c := range []struct {
		cause   error
		timeout bool
	}{{context.DeadlineExceeded, true}, {context.Canceled, false}} {
		err := nccl.RejectRoundTrip(&nccl.TimeoutError{Rank: 0, NRanks: 3, Missing: []int{2}, Err: c.cause}, 3)
		var te *nccl.TimeoutError
		require.ErrorAs(t, err, &te, "%v", c.cause)
		assert.ErrorIs(t, err, c.cause)
		assert.Equal(t, c.timeout, te.Timeout(), "%v", c.cause)
		assert.Equal(t, []int{2}, te.Missing)
	}
	err := nccl.RejectRoundTrip(errors.New("wrong job"), 3)
	require.ErrorIs(t, err, nccl.ErrRejected)
	assert.Contains(t, err.Error(), "wrong job")
}
