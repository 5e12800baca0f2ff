package nccl_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"os"
	"path/filepath"
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

var (
	jobSecret   = []byte("the job's secret, 32 bytes long!")
	wrongSecret = []byte("not the job's secret, though long")
)

// secretRanks runs ranks of a TCP rendezvous on ln with the given secrets per rank.
func secretRanks(t *testing.T, ln net.Listener, nranks int, secret func(rank int) []byte, newID func() (ncclraw.NcclUniqueId, error)) map[int]rankResult {
	addr := ln.Addr().String()
	ranks := make([]int, nranks)
	for i := range ranks {
		ranks[i] = i
	}
	return runRanks(t.Context(), nranks, ranks, func(r int) nccl.Rendezvous {
		rv := &nccl.TCPRendezvous{Addr: addr, RetryInterval: 5 * time.Millisecond, Timeout: 10 * time.Second, Secret: secret(r)}
		if r == 0 {
			rv.Listener = ln
		}
		return rv
	}, newID)
}

// Ranks that share the job's secret join and get rank 0's id.
func TestTCPRendezvousSecret(t *testing.T) {
	id, newID, _ := fakeID(9)
	res := secretRanks(t, listen(t), 4, func(int) []byte { return jobSecret }, newID)
	for r, got := range res {
		require.NoError(t, got.err, "rank %d", r)
		assert.Equal(t, id, got.id, "rank %d", r)
	}
}

// A rank with a wrong secret, or none, or with one where rank 0 has none, fails
// with ErrAuthentication, and so does rank 0's rendezvous only by its timeout (the
// refused rank never joined).
func TestTCPRendezvousSecretMismatch(t *testing.T) {
	for name, secrets := range map[string][2][]byte{
		"wrong secret":            {jobSecret, wrongSecret},
		"rank without a secret":   {jobSecret, nil},
		"rank 0 without a secret": {nil, jobSecret},
	} {
		t.Run(name, func(t *testing.T) {
			ln := listen(t)
			addr := ln.Addr().String()
			_, newID, _ := fakeID(1)
			done := make(chan error, 1)
			go func() {
				rv := &nccl.TCPRendezvous{Addr: addr, Listener: ln, Timeout: time.Second, Secret: secrets[0]}
				_, err := rv.ExchangeID(t.Context(), 0, 2, newID)
				done <- err
			}()
			rv := &nccl.TCPRendezvous{Addr: addr, RetryInterval: 5 * time.Millisecond, Timeout: time.Second, Secret: secrets[1]}
			_, err := rv.ExchangeID(t.Context(), 1, 2, newID)
			require.ErrorIs(t, err, nccl.ErrAuthentication)
			var te *nccl.TimeoutError
			require.ErrorAs(t, <-done, &te, "rank 0 waits for the real rank 1 until its deadline")
			assert.Equal(t, []int{1}, te.Missing)
		})
	}
}

// recorder keeps what a connection wrote.
type recorder struct {
	net.Conn
	mu    sync.Mutex
	wrote bytes.Buffer
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	r.wrote.Write(p)
	r.mu.Unlock()
	return r.Conn.Write(p)
}

// Impostors hammer rank 0 while the real ranks join: spoofed plain hellos, hellos
// with a wrong secret, and a real rank's recorded hello and proof replayed. None
// gets an id (nor a sealed one); each is refused; the real ranks all join.
func TestTCPRendezvousRefusesImpostors(t *testing.T) {
	const attempts = 1000
	// A real rank's frames from an earlier rendezvous of the same job.
	var recorded []byte
	{
		ln := listen(t)
		addr := ln.Addr().String()
		_, newID, _ := fakeID(2)
		go func() {
			rv := &nccl.TCPRendezvous{Addr: addr, Listener: ln, Timeout: 5 * time.Second, Secret: jobSecret}
			_, _ = rv.ExchangeID(t.Context(), 0, 2, newID)
		}()
		var c net.Conn
		var err error
		for c == nil {
			if c, err = net.Dial("tcp", addr); err != nil {
				time.Sleep(5 * time.Millisecond)
			}
		}
		rec := &recorder{Conn: c}
		_, err = (&nccl.ConnRendezvous{Conns: []io.ReadWriter{rec}, Secret: jobSecret}).ExchangeID(t.Context(), 1, 2, nil)
		require.NoError(t, err)
		c.Close()
		recorded = rec.wrote.Bytes() // the auth hello and the proof
	}
	require.Len(t, recorded, 12+8+32+12+32)

	const nranks = 4
	ln := listen(t)
	addr := ln.Addr().String()
	id, newID, _ := fakeID(7)
	var accepted, refused atomic.Int64
	attack := func(send func(c net.Conn) error) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return // the rendezvous is over: the listener is closed
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if send(c) != nil {
			return
		}
		for {
			var h [12]byte
			if _, err := io.ReadFull(c, h[:]); err != nil {
				refused.Add(1) // dropped
				return
			}
			p := make([]byte, binary.BigEndian.Uint32(h[8:]))
			if _, err := io.ReadFull(c, p); err != nil {
				refused.Add(1)
				return
			}
			switch h[6] {
			case 2, 7: // an id, plain or sealed
				accepted.Add(1)
				return
			case 3: // a reject
				refused.Add(1)
				return
			case 4: // a challenge: an impostor cannot answer it
				_, _ = c.Write(frame(1, 6, 0, make([]byte, 32)))
			}
		}
	}
	hello := func(rank uint32) []byte {
		p := binary.BigEndian.AppendUint32(nil, nranks)
		return binary.BigEndian.AppendUint32(p, rank)
	}
	impostors := []func(c net.Conn) error{
		func(c net.Conn) error { _, err := c.Write(frame(1, 1, 0, hello(1))); return err }, // spoofed, no secret
		func(c net.Conn) error { // a wrong secret: answers the challenge with garbage
			_, err := c.Write(frame(1, 5, 0, append(hello(2), make([]byte, 32)...)))
			return err
		},
		func(c net.Conn) error { _, err := c.Write(recorded); return err }, // replayed
	}
	// Rank 0 waits for rank 3, which comes only once every impostor has tried;
	// ranks 1 and 2 join meanwhile.
	var results sync.Map
	var ranks sync.WaitGroup
	join := func(r int) {
		ranks.Go(func() {
			rv := &nccl.TCPRendezvous{Addr: addr, RetryInterval: 5 * time.Millisecond, Timeout: 30 * time.Second, Secret: jobSecret}
			if r == 0 {
				rv.Listener = ln
			}
			got, err := rv.ExchangeID(t.Context(), r, nranks, newID)
			results.Store(r, rankResult{id: got, err: err})
		})
	}
	join(0)
	var wg sync.WaitGroup
	for k, send := range impostors {
		wg.Go(func() {
			for i := range attempts {
				if k == 0 && i == attempts/2 {
					join(1)
					join(2)
				}
				attack(send)
			}
		})
	}
	wg.Wait()
	join(3)
	ranks.Wait()
	for r := range nranks {
		v, ok := results.Load(r)
		require.True(t, ok, "rank %d", r)
		got := v.(rankResult)
		require.NoError(t, got.err, "rank %d", r)
		assert.Equal(t, id, got.id, "rank %d", r)
	}
	assert.Zero(t, accepted.Load(), "no impostor got an id")
	assert.Equal(t, int64(len(impostors)*attempts), refused.Load(), "every impostor was refused")
}

func TestJobSecretFromEnv(t *testing.T) {
	t.Setenv("GOCUDA_JOB_SECRET", string(jobSecret))
	s, err := nccl.JobSecretFromEnv()
	require.NoError(t, err)
	assert.Equal(t, jobSecret, s)

	t.Setenv("GOCUDA_JOB_SECRET", "short")
	_, err = nccl.JobSecretFromEnv()
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)

	os.Unsetenv("GOCUDA_JOB_SECRET")
	f := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(f, append(jobSecret, '\n'), 0o600))
	t.Setenv("GOCUDA_JOB_SECRET_FILE", f)
	s, err = nccl.JobSecretFromEnv()
	require.NoError(t, err)
	assert.Equal(t, jobSecret, s, "the trailing newline is dropped")

	t.Setenv("GOCUDA_JOB_SECRET_FILE", filepath.Join(t.TempDir(), "missing"))
	_, err = nccl.JobSecretFromEnv()
	require.ErrorIs(t, err, os.ErrNotExist)

	os.Unsetenv("GOCUDA_JOB_SECRET_FILE")
	s, err = nccl.JobSecretFromEnv()
	require.NoError(t, err)
	assert.Nil(t, s, "no secret")
}
