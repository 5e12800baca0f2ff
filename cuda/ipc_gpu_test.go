package cuda_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
)

// IPC between two processes on a GPU: the test binary runs again as the other
// process (envIPCRole names its part, envIPCSocket the socket).

const (
	envIPCRole   = "GOCUDA_IPC_TEST_ROLE"
	envIPCSocket = "GOCUDA_IPC_TEST_SOCKET"
	ipcBytes     = 1 << 20
	ipcCount     = 10_000
)

// ipcChild starts the test binary running test as role, with the socket path.
func ipcChild(t *testing.T, test, role, path string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), envIPCRole+"="+role, envIPCSocket+"="+path)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	require.NoError(t, cmd.Start())
	return cmd
}

// dialRetry dials until the exporter listens (the processes start in any order).
func dialRetry(cctx context.Context, ctx *cuda.Context, path string) (*cuda.IPCImport, error) {
	for {
		imp, err := cuda.DialIPC(cctx, ctx, path)
		if err == nil || errors.Is(err, cuda.ErrPeerRefused) || cctx.Err() != nil {
			return imp, err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// importerLoop receives n buffers, checks each (buffer i holds i+1) and gives it back.
func importerLoop(t *testing.T, cctx context.Context, ctx *cuda.Context, imp *cuda.IPCImport, n int, got func(int)) error {
	s, err := ctx.NewStream()
	require.NoError(t, err)
	defer s.Close()
	host := make([]uint32, ipcBytes/4)
	var inReceive, inCopy, inCheck, inClose, inCopyAgain time.Duration // where the importer's time goes
	defer func() {
		t.Logf("importer: Receive %v, copy %v, check %v, Close %v in all", inReceive, inCopy, inCheck, inClose)
		if got != nil {
			t.Logf("importer: the same copies again (the exporter's writes done) %v in all", inCopyAgain)
		}
	}()
	for i := 0; n < 0 || i < n; i++ {
		t0 := time.Now()
		b, err := imp.Receive(cctx)
		if err != nil {
			return err
		}
		t1 := time.Now()
		inReceive += t1.Sub(t0)
		err = cuda.CopyFromDeviceAsync(s, host, b)
		if err == nil {
			err = s.SynchronizeContext(cctx)
		}
		tc := time.Now()
		inCopy += tc.Sub(t1)
		if err == nil && (host[0] != uint32(i+1) || host[len(host)-1] != uint32(i+1)) {
			err = errors.New("wrong data")
		}
		if err == nil {
			for j, v := range host {
				if v != uint32(i+1) {
					t.Errorf("hand-off %d: element %d is %d", i, j, v)
					break
				}
			}
		}
		t2 := time.Now()
		inCheck += t2.Sub(tc)
		if got != nil && err == nil { // a probe of the copy alone, where the hand-off's time is not measured
			err = cuda.CopyFromDeviceAsync(s, host, b)
			if err == nil {
				err = s.SynchronizeContext(cctx)
			}
			inCopyAgain += time.Since(t2)
			t2 = time.Now()
		}
		if cerr := b.Close(); err == nil {
			err = cerr
		}
		inClose += time.Since(t2)
		if err != nil {
			return err
		}
		if got != nil {
			got(i)
		}
	}
	return nil
}

// 10,000 hand-offs of 1 MiB buffers from this process to another through a shared
// pool, data checked, in five rounds alternated with the same hand-off between two
// streams of one process; the log gives each round's time per hand-off and the
// medians' ratio.
func TestGPUIPCHandOff(t *testing.T) {
	cudatest.Require(t, cudatest.Kernels) // two real processes: the fake shares within one
	ctx, err := cuda.Device(0).Context()
	require.NoError(t, err)
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if os.Getenv(envIPCRole) == "importer" {
		imp, err := dialRetry(cctx, ctx, os.Getenv(envIPCSocket))
		require.NoError(t, err)
		require.NoError(t, importerLoop(t, cctx, ctx, imp, ipcCount, nil))
		require.NoError(t, imp.Close())
		return
	}
	s1, err := ctx.NewStream()
	require.NoError(t, err)
	defer s1.Close()
	s2, err := ctx.NewStream()
	require.NoError(t, err)
	defer s2.Close()
	alloc := func() (*cuda.DeviceBuffer, error) { return ctx.Alloc(s1, ipcBytes) }
	streamRound := func(n int) time.Duration { return runHandOffs(t, streamHandOffs(), alloc, s1, s2, n, ipcBytes) }
	streamRound(100) // the context's pool holds the ring from here on

	require.NoError(t, ctx.Synchronize())
	free0 := deviceFree(t, ctx)
	pool, err := ctx.NewSharedPool()
	require.NoError(t, err)
	path := ipcSocket(t)
	child := ipcChild(t, "TestGPUIPCHandOff", "importer", path)
	ln, err := pool.Listen(path, cuda.IPCPeers{PIDs: []int{child.Process.Pid}})
	require.NoError(t, err)
	defer ln.Close()
	exp, err := ln.Accept(cctx)
	require.NoError(t, err)
	const rounds = 5
	n := ipcCount / rounds
	var ipc, streams []float64 // µs per hand-off, per round
	for r := range rounds {
		streams = append(streams, float64(streamRound(n).Nanoseconds())/1e3)
		start := time.Now()
		bufs := exporterLoop(t, cctx, pool, exp, s1, r*n, n)
		ipc = append(ipc, float64(time.Since(start).Nanoseconds())/1e3/float64(n))
		for _, b := range bufs {
			require.NoError(t, b.Close())
		}
	}
	require.NoError(t, child.Wait(), "the importer process failed")
	t.Logf("µs per hand-off of %d bytes, between processes: %.1f (rounds %.1f); between two streams of one process: %.1f (rounds %.1f); %.2fx",
		ipcBytes, median(ipc), ipc, median(streams), streams, median(ipc)/median(streams))
	require.NoError(t, exp.Close())
	require.NoError(t, pool.Close())
	require.NoError(t, ctx.Synchronize())
	t.Logf("device memory free: %+d bytes after both sides closed (the importer exited)", int64(settledFree(t, ctx, free0))-int64(free0))
}

// exporterLoop hands n buffers over (n < 0: until cctx is done), a ring of 4 from
// pool whose buffer i holds from+i+1, each filled again once the importer gave it
// back, and returns the ring once every lease ended.
func exporterLoop(t *testing.T, cctx context.Context, pool *cuda.SharedPool, exp *cuda.IPCExport, s *cuda.Stream, from, n int) []*cuda.DeviceBuffer {
	bufs := make([]*cuda.DeviceBuffer, 4)
	leases := make([]*cuda.IPCLease, len(bufs))
	var err error
	for i := range bufs {
		bufs[i], err = pool.Alloc(s, ipcBytes)
		require.NoError(t, err)
	}
	var inWait, inSend time.Duration // where the exporter's time goes
	for i := 0; (n < 0 && cctx.Err() == nil) || i < n; i++ {
		k := i % len(bufs)
		t0 := time.Now()
		if leases[k] != nil {
			require.NoError(t, leases[k].Wait(cctx))
		}
		t1 := time.Now()
		require.NoError(t, bufs[k].Memset32Async(s, uint32(from+i+1)))
		leases[k], err = exp.Send(cctx, s, bufs[k])
		require.NoError(t, err)
		inWait, inSend = inWait+t1.Sub(t0), inSend+time.Since(t1)
	}
	t.Logf("exporter: waiting for leases %v, fill and Send %v in all", inWait, inSend)
	for _, l := range leases {
		require.NoError(t, l.Wait(cctx))
	}
	return bufs
}

// deviceFree returns the device's free memory (cuMemGetInfo).
func deviceFree(t *testing.T, ctx *cuda.Context) uint64 {
	var free, total uint64
	require.NoError(t, ctx.Locked(func() error { return cudaraw.MemGetInfo(&free, &total) }))
	return free
}

// The exporter killed mid-run: the importer gets ErrPeerGone within a second, and
// once both processes are gone the device's free memory is back where it was (what
// nvidia-smi shows), twice in a row. The importer is a process of its own (it starts
// the exporter); its own free memory is back after Close once its context's pools
// gave back what they cache, measured from after what it does besides IPC (the
// driver keeps what the context's first stream and copy took; docs/ipc.md).
func TestGPUIPCExporterKilled(t *testing.T) {
	cudatest.Require(t, cudatest.Kernels)
	ctx, err := cuda.Device(0).Context()
	require.NoError(t, err)
	cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	switch os.Getenv(envIPCRole) {
	case "exporter":
		// Hand buffers over until killed.
		s, err := ctx.NewStream()
		require.NoError(t, err)
		pool, err := ctx.NewSharedPool()
		require.NoError(t, err)
		ln, err := pool.Listen(os.Getenv(envIPCSocket), cuda.IPCPeers{PIDs: []int{os.Getppid()}})
		require.NoError(t, err)
		exp, err := ln.Accept(cctx)
		require.NoError(t, err)
		exporterLoop(t, cctx, pool, exp, s, 0, -1) // until killed
		return
	case "importer":
		path := ipcSocket(t)
		child := ipcChild(t, "TestGPUIPCExporterKilled", "exporter", path)
		// What the importer does besides IPC (a stream, a copy to the host, an
		// allocation of the context's pool), done once before the first measure.
		fw := deviceFree(t, ctx)
		s, err := ctx.NewStream()
		require.NoError(t, err)
		b, err := ctx.Alloc(s, ipcBytes)
		require.NoError(t, err)
		require.NoError(t, cuda.CopyFromDeviceAsync(s, make([]uint32, ipcBytes/4), b))
		require.NoError(t, s.Synchronize())
		require.NoError(t, b.Close())
		require.NoError(t, s.Close())
		require.NoError(t, ctx.Synchronize())
		f0 := deviceFree(t, ctx)
		t.Logf("importer: device memory free %+d after a stream, an allocation and a copy, before IPC", int64(f0)-int64(fw))
		imp, err := dialRetry(cctx, ctx, path)
		require.NoError(t, err)
		f1 := deviceFree(t, ctx)
		var killed time.Time
		err = importerLoop(t, cctx, ctx, imp, -1, func(i int) {
			if i == 1000 {
				require.NoError(t, child.Process.Signal(syscall.SIGKILL))
				killed = time.Now()
			}
		})
		took := time.Since(killed)
		require.ErrorIs(t, err, cuda.ErrPeerGone)
		t.Logf("the importer saw the exporter gone %v after the kill", took)
		assert.Less(t, took, time.Second)
		_ = child.Wait()
		f2 := deviceFree(t, ctx)
		require.NoError(t, imp.Close())
		require.NoError(t, ctx.Synchronize())
		f3 := deviceFree(t, ctx)
		require.NoError(t, cuda.ReclaimForTest(ctx))
		f4 := deviceFree(t, ctx)
		t.Logf("importer: device memory free: %d before the dial, %+d after it, %+d after the kill, %+d after Close, %+d once the context's pools gave back what they cache",
			f0, int64(f1)-int64(f0), int64(f2)-int64(f0), int64(f3)-int64(f0), int64(f4)-int64(f0))
		assert.GreaterOrEqual(t, f4+2<<20, f0, "the importer's free memory is not back (within 2 MiB) once its pools gave back what they cache")
		return
	}
	require.NoError(t, ctx.Synchronize())
	before := deviceFree(t, ctx)
	for run := range 2 {
		imp := ipcChild(t, "TestGPUIPCExporterKilled", "importer", "")
		require.NoError(t, imp.Wait(), "the importer process failed")
		after := settledFree(t, ctx, before)
		t.Logf("run %d: device memory free %+d bytes once both processes exited", run, int64(after)-int64(before))
		assert.GreaterOrEqual(t, after+2<<20, before, "run %d: device memory did not come back (within 2 MiB)", run)
	}
}

// settledFree returns the device's free memory once it is within 2 MiB of want, or
// after 10 s.
func settledFree(t *testing.T, ctx *cuda.Context, want uint64) uint64 {
	var free uint64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if free = deviceFree(t, ctx); free+2<<20 >= want {
			break
		}
	}
	return free
}
