package nccl_test

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/nccl"
	"github.com/gocuda/gocuda/nccl/ncclraw"
)

// GPU tests: they need a GPU and libnccl.so.2 (they skip elsewhere, and fail with
// GOCUDA_GPU_TESTS=require); the TwoDevices ones need two GPUs and skip with fewer.
//
//	GOCUDA_GPU_TESTS=require go test -race -run 'GPU|DataParallel' ./nccl/

// requireDevices skips unless there is a GPU with NCCL, and n devices.
func requireDevices(t *testing.T, n int) []cuda.Device {
	t.Helper()
	cudatest.Require(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, ncclraw.Library())
	count, err := cuda.DeviceCount()
	require.NoError(t, err)
	if count < n {
		t.Skipf("needs %d GPUs, this machine has %d (runs on a multi-GPU machine)", n, count)
	}
	devs := make([]cuda.Device, n)
	for i := range devs {
		devs[i] = cuda.Device(i)
	}
	return devs
}

// rank is one rank's stream and helpers for a test.
type rank struct {
	t *testing.T
	c *nccl.Comm
	s *cuda.Stream
}

func newRank(t *testing.T, c *nccl.Comm) *rank {
	s, err := c.Context().NewStream()
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return &rank{t, c, s}
}

func download[T any](r *rank, b *cuda.DeviceBuffer) []T {
	require.NoError(r.t, r.c.Wait(r.t.Context(), r.s))
	out := make([]T, b.Len())
	require.NoError(r.t, cuda.CopyFromDeviceAsync(r.s, out, b))
	require.NoError(r.t, r.s.Synchronize())
	return out
}

// rankData is rank r's test data: n integer-valued float32s (exact sums).
func rankData(r, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32((i*7+r*13)%29 - 9)
	}
	return v
}

// TestGPUOneRank: a communicator of one rank (NewComms on device 0): every
// collective gives what it gives over one rank, for several element types; a
// send to itself and a receive from itself, grouped, copy.
func TestGPUOneRank(t *testing.T) {
	devs := requireDevices(t, 1)
	comms, err := nccl.NewComms(t.Context(), devs...)
	require.NoError(t, err)
	c := comms[0]
	defer c.Close()
	r := newRank(t, c)
	in := rankData(0, 1000)

	send := cudatest.AllocFrom(r.t, r.s, in)
	recv := cudatest.AllocFrom(r.t, r.s, make([]float32, len(in)))
	require.NoError(t, nccl.AllReduce[float32](c, r.s, send, recv, nccl.Sum))
	assert.Equal(t, in, download[float32](r, recv), "all-reduce")
	require.NoError(t, nccl.Broadcast[float32](c, r.s, send, recv, 0))
	assert.Equal(t, in, download[float32](r, recv), "broadcast")
	require.NoError(t, nccl.Reduce[float32](c, r.s, send, recv, nccl.Max, 0))
	assert.Equal(t, in, download[float32](r, recv), "reduce")
	require.NoError(t, nccl.AllGather[float32](c, r.s, send, recv))
	assert.Equal(t, in, download[float32](r, recv), "all-gather")
	require.NoError(t, nccl.ReduceScatter[float32](c, r.s, send, recv, nccl.Sum))
	assert.Equal(t, in, download[float32](r, recv), "reduce-scatter")
	require.NoError(t, nccl.AllReduce[float32](c, r.s, recv, recv, nccl.Avg))
	assert.Equal(t, in, download[float32](r, recv), "average in place")

	other := cudatest.AllocFrom(r.t, r.s, make([]float32, len(in)))
	require.NoError(t, nccl.Group(func() error {
		if err := nccl.Send[float32](c, r.s, send, 0); err != nil {
			return err
		}
		return nccl.Recv[float32](c, r.s, other, 0)
	}))
	assert.Equal(t, in, download[float32](r, other), "send to itself")

	ints := []int64{1, -2, 1 << 40, 7}
	ib := cudatest.AllocFrom(r.t, r.s, ints)
	require.NoError(t, nccl.AllReduce[int64](c, r.s, ib, ib, nccl.Sum))
	assert.Equal(t, ints, download[int64](r, ib))
	halves := []cuda.Float16{cuda.NewFloat16(1.5), cuda.NewFloat16(-2)}
	hb := cudatest.AllocFrom(r.t, r.s, halves)
	require.NoError(t, nccl.AllReduce[cuda.Float16](c, r.s, hb, hb, nccl.Sum))
	assert.Equal(t, halves, download[cuda.Float16](r, hb))

	// A view: the second half of a buffer.
	view, err := recv.Slice(500, 500)
	require.NoError(t, err)
	defer view.Close()
	require.NoError(t, nccl.Broadcast[float32](c, r.s, view, view, 0))
	assert.Equal(t, in[500:], download[float32](r, view))

	assert.NoError(t, c.Err())
	require.NoError(t, c.Close())
}

// TestGPUJoinTCP: a one-rank communicator made by Join, over the TCP rendezvous.
func TestGPUJoinTCP(t *testing.T) {
	devs := requireDevices(t, 1)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, err := nccl.Join(ctx, &nccl.TCPRendezvous{Listener: listen(t)}, 0, 1, devs[0])
	require.NoError(t, err)
	defer c.Close()
	r := newRank(t, c)
	b := cudatest.AllocFrom(r.t, r.s, []float64{1, 2, 3})
	require.NoError(t, nccl.AllReduce[float64](c, r.s, b, b, nccl.Sum))
	assert.Equal(t, []float64{1, 2, 3}, download[float64](r, b))
}

// TestGPUTwoDevices: the collectives over two GPUs of this process, issued by one
// goroutine in groups, against the CPU's results.
func TestGPUTwoDevices(t *testing.T) {
	devs := requireDevices(t, 2)
	comms, err := nccl.NewComms(t.Context(), devs...)
	require.NoError(t, err)
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	const n = 1024
	ranks := make([]*rank, 2)
	in := make([][]float32, 2)
	send := make([]*cuda.DeviceBuffer, 2)
	recv := make([]*cuda.DeviceBuffer, 2)
	big := make([]*cuda.DeviceBuffer, 2)
	for i, c := range comms {
		ranks[i] = newRank(t, c)
		in[i] = rankData(i, n)
		send[i] = cudatest.AllocFrom(ranks[i].t, ranks[i].s, in[i])
		recv[i] = cudatest.AllocFrom(ranks[i].t, ranks[i].s, make([]float32, n))
		big[i] = cudatest.AllocFrom(ranks[i].t, ranks[i].s, make([]float32, 2*n))
	}
	each := func(f func(i int, c *nccl.Comm, r *rank) error) {
		t.Helper()
		require.NoError(t, nccl.Group(func() error {
			for i, c := range comms {
				if err := f(i, c, ranks[i]); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	sum := make([]float32, n)
	maxv := make([]float32, n)
	for j := range n {
		sum[j] = in[0][j] + in[1][j]
		maxv[j] = max(in[0][j], in[1][j])
	}

	each(func(i int, c *nccl.Comm, r *rank) error {
		return nccl.AllReduce[float32](c, r.s, send[i], recv[i], nccl.Sum)
	})
	for i := range 2 {
		assert.Equal(t, sum, download[float32](ranks[i], recv[i]), "all-reduce sum, rank %d", i)
	}
	each(func(i int, c *nccl.Comm, r *rank) error {
		return nccl.AllReduce[float32](c, r.s, send[i], recv[i], nccl.Max)
	})
	for i := range 2 {
		assert.Equal(t, maxv, download[float32](ranks[i], recv[i]), "all-reduce max, rank %d", i)
	}
	each(func(i int, c *nccl.Comm, r *rank) error { return nccl.Broadcast[float32](c, r.s, send[i], recv[i], 1) })
	for i := range 2 {
		assert.Equal(t, in[1], download[float32](ranks[i], recv[i]), "broadcast from 1, rank %d", i)
	}
	each(func(i int, c *nccl.Comm, r *rank) error {
		if i == 0 {
			return nccl.Reduce[float32](c, r.s, send[i], recv[i], nccl.Sum, 0)
		}
		return nccl.Reduce[float32](c, r.s, send[i], nil, nccl.Sum, 0) // recv only on the root
	})
	assert.Equal(t, sum, download[float32](ranks[0], recv[0]), "reduce to 0")
	each(func(i int, c *nccl.Comm, r *rank) error { return nccl.AllGather[float32](c, r.s, send[i], big[i]) })
	for i := range 2 {
		assert.Equal(t, append(append([]float32{}, in[0]...), in[1]...), download[float32](ranks[i], big[i]), "all-gather, rank %d", i)
	}
	each(func(i int, c *nccl.Comm, r *rank) error {
		half, err := recv[i].Slice(0, n/2)
		if err != nil {
			return err
		}
		defer half.Close()
		return nccl.ReduceScatter[float32](c, r.s, send[i], half, nccl.Sum)
	})
	for i := range 2 {
		got := download[float32](ranks[i], recv[i])[:n/2]
		assert.Equal(t, sum[i*n/2:(i+1)*n/2], got, "reduce-scatter, rank %d", i)
	}
	each(func(i int, c *nccl.Comm, r *rank) error { // exchange
		if err := nccl.Send[float32](c, r.s, send[i], 1-i); err != nil {
			return err
		}
		return nccl.Recv[float32](c, r.s, recv[i], 1-i)
	})
	for i := range 2 {
		assert.Equal(t, in[1-i], download[float32](ranks[i], recv[i]), "exchange, rank %d", i)
	}
	for _, c := range comms {
		assert.NoError(t, c.Err())
	}
}

// TestGPUAllReduceSizes: sums of 8 B to 1 GiB over two GPUs (each rank's buffer
// filled with rank+1: the sum is 3 everywhere).
func TestGPUAllReduceSizes(t *testing.T) {
	devs := requireDevices(t, 2)
	comms, err := nccl.NewComms(t.Context(), devs...)
	require.NoError(t, err)
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	ranks := []*rank{newRank(t, comms[0]), newRank(t, comms[1])}
	for _, bytes := range []int{8, 64, 4 << 10, 1 << 20, 64 << 20, 1 << 30} {
		t.Run(fmt.Sprint(bytes), func(t *testing.T) {
			n := bytes / 4
			bufs := make([]*cuda.DeviceBuffer, 2)
			for i, r := range ranks {
				bufs[i], err = cuda.AllocFor[float32](r.s, n)
				require.NoError(t, err)
				defer bufs[i].Close()
				require.NoError(t, bufs[i].Memset32Async(r.s, math.Float32bits(float32(i+1))))
			}
			require.NoError(t, nccl.Group(func() error {
				for i, r := range ranks {
					if err := nccl.AllReduce[float32](r.c, r.s, bufs[i], bufs[i], nccl.Sum); err != nil {
						return err
					}
				}
				return nil
			}))
			for i, r := range ranks {
				rr := &rank{t, r.c, r.s}
				got := download[float32](rr, bufs[i])
				bad := 0
				for _, v := range got {
					if v != 3 {
						bad++
					}
				}
				assert.Zero(t, bad, "rank %d: %d of %d elements are not 3", i, bad, n)
			}
		})
	}
}

// TestGPUJoinTwoGoroutines: two ranks of one communicator joined in two goroutines
// (devices 0 and 1) through the TCP rendezvous, each all-reducing on its own.
func TestGPUJoinTwoGoroutines(t *testing.T) {
	devs := requireDevices(t, 2)
	ln := listen(t)
	addr := ln.Addr().String()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	out := make([][]float32, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			rv := &nccl.TCPRendezvous{Addr: addr}
			if i == 0 {
				rv.Listener = ln
			}
			c, err := nccl.Join(ctx, rv, i, 2, devs[i])
			if err != nil {
				errs[i] = err
				return
			}
			defer c.Close()
			out[i], errs[i] = allReduceOnce(ctx, c, rankData(i, 4096))
		})
	}
	wg.Wait()
	want := rankData(0, 4096)
	for j, v := range rankData(1, 4096) {
		want[j] += v
	}
	for i := range 2 {
		require.NoError(t, errs[i], "rank %d", i)
		assert.Equal(t, want, out[i])
	}
}

// allReduceOnce sums v over c's ranks and returns the result.
func allReduceOnce(ctx context.Context, c *nccl.Comm, v []float32) ([]float32, error) {
	s, err := c.Context().NewStream()
	if err != nil {
		return nil, err
	}
	defer s.Close()
	b, err := cuda.AllocFor[float32](s, len(v))
	if err != nil {
		return nil, err
	}
	defer b.Close()
	if err := cuda.CopyToDeviceAsync(s, b, v); err != nil {
		return nil, err
	}
	if err := nccl.AllReduce[float32](c, s, b, b, nccl.Sum); err != nil {
		return nil, err
	}
	if err := c.Wait(ctx, s); err != nil {
		return nil, err
	}
	out := make([]float32, len(v))
	return out, cuda.CopyFromDevice(out, b)
}

// TestDataParallel: the example's training on every GPU (one or more) gives the
// single-GPU result.
func TestDataParallel(t *testing.T) {
	requireDevices(t, 1)
	n, err := cuda.DeviceCount()
	require.NoError(t, err)
	devs := make([]cuda.Device, n)
	for i := range devs {
		devs[i] = cuda.Device(i)
	}
	X, y := linearData()
	parallel, err := trainOnDevices(devs, X, y)
	require.NoError(t, err)
	single, err := trainOnDevices(devs[:1], X, y)
	require.NoError(t, err)
	assert.InDeltaSlice(t, single, parallel, 1e-9, "%d GPUs against one", n)
	t.Logf("w on %d GPUs %v, on one %v", n, parallel, single)
}

// The two-process tests run this test binary again as rank 1 (on device 1): the
// environment variable names the role, rank 0's address and what to do.
const childEnv = "GOCUDA_NCCL_TEST_CHILD"

// TestGPUTwoProcesses: two processes, one GPU each, through the TCP rendezvous: an
// all-reduce and the data-parallel training (equal to the single-GPU run); then, with
// a child that is killed after joining, the parent's collective returns an error
// within seconds instead of hanging.
func TestGPUTwoProcesses(t *testing.T) {
	if role := os.Getenv(childEnv); role != "" {
		runChild(t, role)
		return
	}
	devs := requireDevices(t, 2)
	t.Run("train", func(t *testing.T) {
		ln := listen(t)
		cmd, _ := startChild(t, "train "+ln.Addr().String())
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		c, err := nccl.Join(ctx, &nccl.TCPRendezvous{Listener: ln}, 0, 2, devs[0])
		require.NoError(t, err)
		defer c.Close()
		got, err := allReduceOnce(ctx, c, rankData(0, 1000))
		require.NoError(t, err)
		want := rankData(0, 1000)
		for j, v := range rankData(1, 1000) {
			want[j] += v
		}
		assert.Equal(t, want, got)
		X, y := linearData()
		w, err := trainRank(ctx, c, X, y)
		require.NoError(t, err)
		single, err := trainOnDevices(devs[:1], X, y)
		require.NoError(t, err)
		assert.InDeltaSlice(t, single, w, 1e-9, "two processes against one GPU")
		require.NoError(t, cmd.Wait(), "the child (rank 1) failed")
	})
	t.Run("kill", func(t *testing.T) {
		ln := listen(t)
		cmd, ready := startChild(t, "kill "+ln.Addr().String())
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		c, err := nccl.Join(ctx, &nccl.TCPRendezvous{Listener: ln}, 0, 2, devs[0])
		require.NoError(t, err)
		defer c.Abort()
		_, err = allReduceOnce(ctx, c, rankData(0, 100)) // the child does one too
		require.NoError(t, err)
		select {
		case <-ready:
		case <-time.After(time.Minute):
			t.Fatal("the child did not get ready")
		}
		require.NoError(t, cmd.Process.Kill())
		_ = cmd.Wait()
		// The child will never do its part: the collective must fail, not hang.
		wctx, wcancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer wcancel()
		start := time.Now()
		_, err = allReduceOnce(wctx, c, rankData(0, 100))
		require.Error(t, err)
		assert.ErrorIs(t, err, nccl.ErrAborted)
		assert.Less(t, time.Since(start), 20*time.Second)
		t.Logf("after the peer was killed, in %v: %v", time.Since(start), err)
	})
}

// startChild starts this test binary as rank 1 with role; ready is closed when the
// child prints READY.
func startChild(t *testing.T, role string) (*exec.Cmd, <-chan struct{}) {
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.CommandContext(t.Context(), exe, "-test.run", "^TestGPUTwoProcesses$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+role)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		closed := false
		for sc.Scan() {
			line := sc.Text()
			t.Logf("child: %s", line)
			if strings.TrimSpace(line) == "READY" && !closed {
				close(ready)
				closed = true
			}
		}
	}()
	return cmd, ready
}

// runChild is rank 1 on device 1: "train ADDR" or "kill ADDR".
func runChild(t *testing.T, role string) {
	mode, addr, ok := strings.Cut(role, " ")
	require.True(t, ok, "role %q", role)
	requireDevices(t, 2)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c, err := nccl.Join(ctx, &nccl.TCPRendezvous{Addr: addr}, 1, 2, 1)
	require.NoError(t, err)
	defer c.Close()
	_, err = allReduceOnce(ctx, c, rankData(1, map[string]int{"train": 1000, "kill": 100}[mode]))
	require.NoError(t, err)
	switch mode {
	case "train":
		X, y := linearData()
		_, err := trainRank(ctx, c, X, y)
		require.NoError(t, err)
	case "kill":
		fmt.Println("READY")
		time.Sleep(time.Minute) // killed by the parent
		t.Fatal("not killed")
	}
}
