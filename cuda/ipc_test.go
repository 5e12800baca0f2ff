package cuda_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
)

// IPC of a shared pool on the fake driver, which models the two processes in one:
// the exporter and the importer are two sides of one process, connected through a
// real Unix socket with the pool's descriptor passed over it (docs/ipc.md).

// ipcSocket returns a socket path in a fresh directory of mode 0700.
func ipcSocket(t testing.TB) string {
	dir := filepath.Join(t.TempDir(), "ipc")
	require.NoError(t, os.Mkdir(dir, 0o700))
	return filepath.Join(dir, "sock")
}

// ipcPair connects an importer of ctx to a new shared pool of ctx.
func ipcPair(t testing.TB, ctx *cuda.Context) (*cuda.SharedPool, *cuda.IPCExport, *cuda.IPCImport) {
	t.Helper()
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := ctx.NewSharedPool()
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, pool.Close()) })
	path := ipcSocket(t)
	ln, err := pool.Listen(path, cuda.IPCPeers{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	var imp *cuda.IPCImport
	var derr error
	done := make(chan struct{})
	go func() {
		imp, derr = cuda.DialIPC(cctx, ctx, path)
		close(done)
	}()
	exp, err := ln.Accept(cctx)
	require.NoError(t, err)
	<-done
	require.NoError(t, derr)
	return pool, exp, imp
}

// handOffs is what one hand-off loop needs: how the producer sends a buffer and
// waits for it back, how the consumer receives one and gives it back (Close, then
// giveBack when not nil). Every wait ends with ctx.
type handOffs struct {
	send    func(ctx context.Context, b *cuda.DeviceBuffer) (wait func() error, err error)
	receive func(ctx context.Context) (b *cuda.DeviceBuffer, giveBack func(), err error)
}

// runHandOffs hands n buffers of size bytes (a ring of 4 from alloc) from a
// producer on s1, which fills buffer i with i+1, to a consumer on s2, which copies
// each to the host, checks it and gives it back; the producer's next fill of a
// buffer waits for its return. It returns the time per hand-off. A failure on
// either side cancels the other's waits.
func runHandOffs(t testing.TB, h handOffs, alloc func() (*cuda.DeviceBuffer, error), s1, s2 *cuda.Stream, n, size int) time.Duration {
	const ring = 4
	bufs := make([]*cuda.DeviceBuffer, ring)
	for i := range bufs {
		b, err := alloc()
		require.NoError(t, err)
		bufs[i] = b
	}
	defer func() {
		for _, b := range bufs {
			assert.NoError(t, b.Close())
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var cerr error
	wg.Add(1)
	start := time.Now()
	go func() { // the consumer
		defer wg.Done()
		host := make([]uint32, size/4)
		var inCopy, inCheck time.Duration // where the consumer's time goes
		defer func() { t.Logf("consumer: copy %v, check %v in all", inCopy, inCheck) }()
		for i := range n {
			b, giveBack, err := h.receive(ctx)
			t0 := time.Now()
			if err == nil {
				err = cuda.CopyFromDeviceAsync(s2, host, b)
			}
			if err == nil {
				err = s2.Synchronize()
			}
			t1 := time.Now()
			inCopy += t1.Sub(t0)
			if err == nil {
				for j, v := range host {
					if v != uint32(i+1) {
						err = fmt.Errorf("hand-off %d: element %d is %d, want %d", i, j, v, i+1)
						break
					}
				}
			}
			inCheck += time.Since(t1)
			if b != nil {
				if cerr := b.Close(); err == nil {
					err = cerr
				}
			}
			if giveBack != nil {
				giveBack()
			}
			if err != nil {
				cerr = err
				cancel()
				return
			}
		}
	}()
	perr := func() error { // the producer
		waits := make([]func() error, ring)
		for i := range n {
			k := i % ring
			if waits[k] != nil {
				if err := waits[k](); err != nil {
					return err
				}
			}
			if err := bufs[k].Memset32Async(s1, uint32(i+1)); err != nil {
				return err
			}
			w, err := h.send(ctx, bufs[k])
			if err != nil {
				return err
			}
			waits[k] = w
		}
		for _, w := range waits {
			if w != nil {
				if err := w(); err != nil {
					return err
				}
			}
		}
		return nil
	}()
	per := time.Since(start) / time.Duration(n)
	if perr != nil {
		cancel()
	}
	wg.Wait()
	require.NoError(t, cerr, "the consumer")
	require.NoError(t, perr, "the producer")
	return per
}

// ipcHandOffs hands buffers over through exp and imp.
func ipcHandOffs(cctx context.Context, exp *cuda.IPCExport, imp *cuda.IPCImport, s *cuda.Stream) handOffs {
	return handOffs{
		send: func(ctx context.Context, b *cuda.DeviceBuffer) (func() error, error) {
			l, err := exp.Send(cctx, s, b)
			if err != nil {
				return nil, err
			}
			return func() error {
				select {
				case <-l.Done():
				case <-ctx.Done():
					return ctx.Err()
				}
				return l.Wait(cctx)
			}, nil
		},
		receive: func(ctx context.Context) (*cuda.DeviceBuffer, func(), error) {
			ctx, stop := context.WithCancel(ctx) // ended by either
			defer stop()
			defer context.AfterFunc(cctx, stop)()
			b, err := imp.Receive(ctx)
			return b, nil, err
		},
	}
}

// streamHandOffs hands buffers over between two streams of one process, the
// reference the IPC hand-off is measured against.
func streamHandOffs() handOffs {
	ch := make(chan *cuda.DeviceBuffer, 4)
	back := make(map[*cuda.DeviceBuffer]chan struct{})
	var mu sync.Mutex
	return handOffs{
		send: func(ctx context.Context, b *cuda.DeviceBuffer) (func() error, error) {
			done := make(chan struct{})
			mu.Lock()
			back[b] = done
			mu.Unlock()
			select {
			case ch <- b:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return func() error {
				select {
				case <-done:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			}, nil
		},
		receive: func(ctx context.Context) (*cuda.DeviceBuffer, func(), error) {
			var b *cuda.DeviceBuffer
			select {
			case b = <-ch:
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			mu.Lock()
			done := back[b]
			mu.Unlock()
			// The consumer's Close stands for the importer's: the buffer stays the
			// producer's (a view is closed instead), given back once the view's
			// Close ordered the producer's next write after the consumer's uses.
			v, err := b.Slice(0, b.Len())
			return v, func() { close(done) }, err
		},
	}
}

func TestIPCHandOff(t *testing.T) {
	ctx, s1 := memSetup(t)
	s2, err := ctx.NewStream()
	require.NoError(t, err)
	defer s2.Close()
	pool, exp, imp := ipcPair(t, ctx)
	cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const size = 64 << 10
	per := runHandOffs(t, ipcHandOffs(cctx, exp, imp, s1), func() (*cuda.DeviceBuffer, error) { return pool.Alloc(s1, size) }, s1, s2, 200, size)
	t.Logf("%v per hand-off on the fake", per)
	// Each event recorded for a Send is free again once, with the importer's ack:
	// a ring of 4 buffers needs a few, whatever the number of hand-offs.
	own, free := cuda.IPCEventCounts(exp)
	assert.LessOrEqual(t, free, own, "events freed twice")
	assert.LessOrEqual(t, own, 8, "events made for 200 hand-offs of a ring of 4")
	require.NoError(t, imp.Close())
	require.NoError(t, exp.Close())
	require.ErrorIs(t, imp.Close(), cuda.ErrClosed)
}

// The exporter closes a buffer while the importer holds it: the memory is freed only
// after the importer gave it back (the fake counts an earlier free as a violation),
// and the importer reads what was written.
func TestIPCExporterClosesLentBuffer(t *testing.T) {
	ctx, s := memSetup(t)
	pool, exp, imp := ipcPair(t, ctx)
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := pool.Alloc(s, 4096)
	require.NoError(t, err)
	require.NoError(t, b.Memset32Async(s, 7))
	lease, err := exp.Send(cctx, s, b)
	require.NoError(t, err)
	require.NoError(t, b.Close())
	got, err := imp.Receive(cctx)
	require.NoError(t, err)
	require.Equal(t, 4096, got.Size())
	require.NoError(t, resourceSettle())
	host := make([]uint32, 1024)
	require.NoError(t, cuda.CopyFromDevice(host, got))
	for _, v := range host {
		require.Equal(t, uint32(7), v)
	}
	select {
	case <-lease.Done():
		t.Fatal("the lease ended while the importer held the buffer")
	default:
	}
	require.NoError(t, got.Close())
	require.NoError(t, lease.Wait(cctx))
	require.NoError(t, ctx.Synchronize())
	require.NoError(t, imp.Close())
	require.NoError(t, exp.Close())
}

// resourceSettle gives the releases queued so far a chance to run.
func resourceSettle() error {
	time.Sleep(10 * time.Millisecond)
	return nil
}

// A buffer that is not the pool's is refused; Send and Receive honour their context.
func TestIPCArguments(t *testing.T) {
	ctx, s := memSetup(t)
	_, exp, imp := ipcPair(t, ctx)
	other, err := ctx.Alloc(s, 1024)
	require.NoError(t, err)
	defer other.Close()
	_, err = exp.Send(context.Background(), s, other)
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)
	cctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = imp.Receive(cctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, imp.Close())
	require.NoError(t, exp.Close())
}

// The exporter goes: the importer's next Receive fails with ErrPeerGone at once; the
// buffer it holds stays usable until its Close. The importer goes: the exporter's
// leases end with ErrPeerGone.
func TestIPCPeerGone(t *testing.T) {
	ctx, s := memSetup(t)
	pool, exp, imp := ipcPair(t, ctx)
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := pool.Alloc(s, 4096)
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, b.Memset8Async(s, 3))
	lease, err := exp.Send(cctx, s, b)
	require.NoError(t, err)
	got, err := imp.Receive(cctx)
	require.NoError(t, err)
	require.NoError(t, exp.Close())
	start := time.Now()
	_, err = imp.Receive(cctx)
	require.ErrorIs(t, err, cuda.ErrPeerGone)
	assert.Less(t, time.Since(start), time.Second)
	require.ErrorIs(t, imp.Err(), cuda.ErrPeerGone)
	select {
	case <-lease.Done():
		t.Fatal("the exporter's Close ended the lease of a buffer the importer holds")
	default:
	}
	host := make([]byte, 4096)
	require.NoError(t, cuda.CopyFromDevice(host, got))
	assert.Equal(t, bytes.Repeat([]byte{3}, 4096), host)
	if cudatest.Strict() {
		// A last use still running keeps the import's free pending, as a loaded
		// machine does: b's free (deferred) must wait for it on the device.
		s2, err := ctx.NewStream()
		require.NoError(t, err)
		defer s2.Close()
		require.NoError(t, cudatest.Delay(uintptr(s2.Handle()), 100*time.Millisecond))
		for range 8 { // each a step of the executor, which picks the next ready stream at random
			require.NoError(t, got.Memset8Async(s2, 4))
		}
	}
	require.NoError(t, got.Close())
	require.NoError(t, lease.Wait(cctx), "given back after the exporter's Close")
	require.NoError(t, imp.Close())

	// The other way round.
	pool2, exp2, imp2 := ipcPair(t, ctx)
	b2, err := pool2.Alloc(s, 4096)
	require.NoError(t, err)
	defer b2.Close()
	lease2, err := exp2.Send(cctx, s, b2)
	require.NoError(t, err)
	_, err = imp2.Receive(cctx)
	require.NoError(t, err)
	require.NoError(t, imp2.Close()) // frees the buffer it held
	require.NoError(t, lease2.Wait(cctx), "the importer's Close gave the buffer back")
	select {
	case <-exp2.Gone():
	case <-cctx.Done():
		t.Fatal("the exporter did not see the importer go")
	}
	_, err = exp2.Send(cctx, s, b2)
	require.ErrorIs(t, err, cuda.ErrPeerGone)
	require.NoError(t, exp2.Close())
}

// Security: the socket is owner-only; a peer whose pid or uid is not allowed is
// refused and logged; once the pool is imported, every other importer is refused.
func TestIPCRefusesPeers(t *testing.T) {
	ctx, _ := memSetup(t)
	pool, err := ctx.NewSharedPool()
	require.NoError(t, err)
	defer pool.Close()
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var logBuf bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logBuf, mu: &logMu}, nil))
	logged := func() string { logMu.Lock(); defer logMu.Unlock(); return logBuf.String() }

	// A directory that others may enter is refused.
	open := filepath.Join(t.TempDir(), "open")
	require.NoError(t, os.Mkdir(open, 0o755))
	_, err = pool.Listen(filepath.Join(open, "sock"), cuda.IPCPeers{})
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)

	for _, tc := range []struct {
		name  string
		peers cuda.IPCPeers
		want  string
	}{
		{"pid", cuda.IPCPeers{PIDs: []int{os.Getpid() + 1<<20}, Logger: logger}, fmt.Sprintf("pid %d not allowed", os.Getpid())},
		{"uid", cuda.IPCPeers{UIDs: []int{os.Getuid() + 1}, Logger: logger}, fmt.Sprintf("uid %d not allowed", os.Getuid())},
	} {
		path := filepath.Join(t.TempDir(), "d", "sock") // a directory Listen creates
		ln, err := pool.Listen(path, tc.peers)
		require.NoError(t, err, tc.name)
		st, err := os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "the socket is owner-only")
		st, err = os.Stat(filepath.Dir(path))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), st.Mode().Perm(), "in an owner-only directory")
		_, err = cuda.DialIPC(cctx, ctx, path)
		require.ErrorIs(t, err, cuda.ErrPeerRefused, tc.name)
		assert.Contains(t, err.Error(), tc.want)
		assert.Contains(t, logged(), "IPC connection refused")
		assert.Contains(t, logged(), tc.want)
		require.NoError(t, ln.Close())
	}

	// The allowed peer imports the pool; a second one (even allowed) is refused.
	path := ipcSocket(t)
	ln, err := pool.Listen(path, cuda.IPCPeers{PIDs: []int{os.Getpid()}, UIDs: []int{os.Getuid()}, Logger: logger})
	require.NoError(t, err)
	defer ln.Close()
	var imp *cuda.IPCImport
	done := make(chan error, 1)
	go func() {
		var err error
		imp, err = cuda.DialIPC(cctx, ctx, path)
		done <- err
	}()
	exp, err := ln.Accept(cctx)
	require.NoError(t, err)
	require.NoError(t, <-done)
	_, err = cuda.DialIPC(cctx, ctx, path)
	require.ErrorIs(t, err, cuda.ErrPeerRefused)
	assert.Contains(t, err.Error(), "imported already")
	assert.Contains(t, logged(), "imported already")
	require.NoError(t, imp.Close())
	require.NoError(t, exp.Close())
	short, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	_, err = ln.Accept(short)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
