package worker_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/worker"
)

// startPool starts a pool that logs to the test and, when the test ends, closes
// it and checks that no worker process is left and that every worker stopped by
// Close cleaned up without error (on the fake: without a driver API violation).
func startPool(t *testing.T, opts worker.Options) *worker.Pool {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	p, err := worker.Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		pids := p.Stats().PIDs
		_ = p.Close()
		st := p.Stats()
		assert.Empty(t, st.PIDs, "Close returns once every worker has ended")
		for _, pid := range pids {
			assert.False(t, alive(pid), "worker %d outlived Close", pid)
		}
		assert.Zero(t, st.ExitErrors, "cleanup errors in the workers (see the log)")
		assert.Zero(t, st.LeftBytes, "device memory left in the workers")
	})
	return p
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// alive reports whether process pid exists (a reaped child does not).
func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func call(t *testing.T, p *worker.Pool, name, req string, opts ...worker.CallOption) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	out, err := p.Call(ctx, name, []byte(req), opts...)
	return string(out), err
}

func mustCall(t *testing.T, p *worker.Pool, name, req string, opts ...worker.CallOption) string {
	t.Helper()
	out, err := call(t, p, name, req, opts...)
	require.NoError(t, err, "%s(%q)", name, req)
	return out
}

// waitInFlight waits until the pool has n requests in flight.
func waitInFlight(t *testing.T, p *worker.Pool, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return p.Stats().InFlight == n }, 10*time.Second, time.Millisecond)
}

// waitServing waits until the pool has its workers and spares back.
func waitServing(t *testing.T, p *worker.Pool, workers, spares int) {
	t.Helper()
	require.Eventually(t, func() bool {
		st := p.Stats()
		return st.Workers == workers && st.Spares == spares && st.Starting == 0
	}, 30*time.Second, 5*time.Millisecond)
}

// Answers and errors: a result, the handler's error with its text, a panic, a
// name no process registered.
func TestAnswers(t *testing.T) {
	p := startPool(t, worker.Options{Workers: 2})
	assert.Equal(t, "hello", mustCall(t, p, "echo", "hello"))
	assert.Empty(t, mustCall(t, p, "echo", ""))

	_, err := call(t, p, "fail", "x")
	var we *worker.Error
	require.ErrorAs(t, err, &we)
	assert.Equal(t, worker.KindHandler, we.Kind)
	assert.Equal(t, "fail", we.Handler)
	assert.Contains(t, err.Error(), `bad input "x"`)
	assert.NotErrorIs(t, err, cuda.ErrFaulted)

	_, err = call(t, p, "panic", "")
	require.ErrorIs(t, err, worker.ErrPanicked)
	assert.Contains(t, err.Error(), "boom")
	assert.Equal(t, "again", mustCall(t, p, "echo", "again"), "a worker serves on after a handler's panic")

	_, err = call(t, p, "no-such-handler", "")
	require.ErrorIs(t, err, worker.ErrUnknownHandler)

	st := p.Stats()
	assert.Equal(t, 2, st.Workers)
	assert.Len(t, st.PIDs, 2)
	assert.EqualValues(t, 5, st.Served)
	assert.Zero(t, st.Restarts)
}

// Requests from many goroutines spread over the workers and each gets its answer.
func TestConcurrentCalls(t *testing.T) {
	const workers, goroutines, each = 3, 24, 20
	p := startPool(t, worker.Options{Workers: workers})
	var mu sync.Mutex
	pids := map[string]int{}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				req := fmt.Sprintf("%d/%d", g, i)
				out, err := call(t, p, "slow-pid", req)
				if !assert.NoError(t, err) {
					return
				}
				pid, got, _ := strings.Cut(out, ":")
				assert.Equal(t, req, got)
				mu.Lock()
				pids[pid]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	assert.Len(t, pids, workers, "every worker served: %v", pids)
	st := p.Stats()
	assert.EqualValues(t, goroutines*each, st.Served)
	assert.Zero(t, st.InFlight)
}

// The GPU from a worker: a round trip through device memory.
func TestGPUEcho(t *testing.T) {
	cudatest.Require(t)
	p := startPool(t, worker.Options{Workers: 2})
	for i := range 20 {
		req := strings.Repeat(strconv.Itoa(i), 1000+i)
		assert.Equal(t, req, mustCall(t, p, "gpu-echo", req))
	}
}

// A kernel that faults ends its worker's context: the faulting request gets the
// fault as a *cuda.FaultError in the parent, so does the request in flight beside
// it, the one marked Retry runs again on the spare, and a replacement takes the
// spare's place.
func TestFaultReplacesWorker(t *testing.T) {
	cudatest.Require(t)
	p := startPool(t, worker.Options{Workers: 1, Spares: 1})
	pid0 := mustCall(t, p, "pid", "")

	var wg sync.WaitGroup
	var waitErr, retryErr error
	var retryPID string
	wg.Go(func() { _, waitErr = call(t, p, "wait", "") })
	wg.Go(func() { retryPID, retryErr = call(t, p, "block-on", pid0, worker.Retry()) })
	waitInFlight(t, p, 2)

	_, err := call(t, p, "fault", "")
	var fe *cuda.FaultError
	require.ErrorAs(t, err, &fe, "%v", err)
	assert.ErrorIs(t, err, cuda.ErrFaulted)
	assert.ErrorIs(t, err, cudaraw.ErrIllegalAddress)
	assert.Equal(t, cudaraw.CUDA_ERROR_ILLEGAL_ADDRESS, fe.Result)
	assert.Equal(t, cuda.Device(0), fe.Device)
	assert.NotEmpty(t, fe.Op)
	var we *worker.Error
	require.ErrorAs(t, err, &we)
	assert.Equal(t, worker.KindFault, we.Kind)
	assert.Equal(t, pid0, strconv.Itoa(we.PID))
	assert.Contains(t, err.Error(), "fault kernel")

	wg.Wait()
	require.ErrorIs(t, waitErr, cuda.ErrFaulted, "the request in flight beside the fault")
	require.ErrorAs(t, waitErr, &fe)
	assert.Equal(t, cudaraw.CUDA_ERROR_ILLEGAL_ADDRESS, fe.Result)
	require.NoError(t, retryErr, "the request marked Retry")
	assert.NotEqual(t, pid0, retryPID, "it ran again in another worker")

	waitServing(t, p, 1, 1)
	require.Eventually(t, func() bool { return !alive(mustAtoi(t, pid0)) }, 10*time.Second, time.Millisecond, "the faulted worker exits")
	assert.Equal(t, "after", mustCall(t, p, "gpu-echo", "after"))
	st := p.Stats()
	assert.EqualValues(t, 1, st.Faults)
	assert.EqualValues(t, 3, st.Faulted, "the fault, the request beside it, the first try of the retried one")
	assert.EqualValues(t, 1, st.Retries)
	assert.EqualValues(t, 1, st.Restarts)
	assert.Zero(t, st.Lost)
	require.Len(t, st.RestartTimes, 1)
	r := st.RestartTimes[0]
	assert.Equal(t, "fault", r.Reason)
	assert.Positive(t, r.Start)
	assert.GreaterOrEqual(t, r.Ready, r.Start)
	assert.GreaterOrEqual(t, r.Ready, r.Setup)
	assert.NotContains(t, st.PIDs, mustAtoi(t, pid0))
	t.Logf("restart after a fault: ready in %v (process start %v, setup %v)", r.Ready, r.Start, r.Setup)
}

// A handler that returns the driver's sticky error as it is (a raw call, another
// library) ends its worker as a typed fault does: the process's device is as lost.
func TestUntypedStickyError(t *testing.T) {
	p := startPool(t, worker.Options{Workers: 1})
	pid0 := mustCall(t, p, "pid", "")
	_, err := call(t, p, "raw-fault", "")
	var fe *cuda.FaultError
	require.ErrorAs(t, err, &fe)
	assert.ErrorIs(t, err, cuda.ErrFaulted)
	assert.ErrorIs(t, err, cudaraw.ErrIllegalAddress)
	assert.Equal(t, cuda.Device(-1), fe.Device, "no context to name")
	assert.Contains(t, fe.Op, "raw-fault")
	assert.Contains(t, err.Error(), "some library")
	assert.NotEqual(t, pid0, mustCall(t, p, "pid", ""), "a new worker serves")
	st := p.Stats()
	assert.EqualValues(t, 1, st.Faults)
	assert.EqualValues(t, 1, st.Restarts)
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}

// A worker killed mid-request: the request gets a *LostError, or, marked Retry,
// its answer from the replacement.
func TestKilledWorker(t *testing.T) {
	p := startPool(t, worker.Options{Workers: 1})

	pid0 := mustCall(t, p, "pid", "")
	done := make(chan struct{})
	var out string
	var err error
	go func() { defer close(done); out, err = call(t, p, "block-on", pid0, worker.Retry()) }()
	waitInFlight(t, p, 1)
	require.NoError(t, syscall.Kill(mustAtoi(t, pid0), syscall.SIGKILL))
	<-done
	require.NoError(t, err)
	assert.NotEqual(t, pid0, out)

	pid1 := mustCall(t, p, "pid", "")
	assert.Equal(t, out, pid1)
	done = make(chan struct{})
	go func() { defer close(done); _, err = call(t, p, "block-on", pid1) }()
	waitInFlight(t, p, 1)
	require.NoError(t, syscall.Kill(mustAtoi(t, pid1), syscall.SIGKILL))
	<-done
	require.ErrorIs(t, err, worker.ErrWorkerLost)
	var le *worker.LostError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, pid1, strconv.Itoa(le.PID))
	assert.Contains(t, le.Cause, "killed")

	waitServing(t, p, 1, 0)
	assert.Equal(t, "x", mustCall(t, p, "echo", "x"))
	st := p.Stats()
	assert.EqualValues(t, 2, st.Lost)
	assert.EqualValues(t, 2, st.LostRequests)
	assert.EqualValues(t, 1, st.Retries)
	assert.EqualValues(t, 2, st.Restarts)
	assert.Zero(t, st.Faults)
}

// Canceling a call returns at once with the context's error, and the worker
// cancels the handler's context; a deadline reaches the handler too.
func TestCancel(t *testing.T) {
	p := startPool(t, worker.Options{Workers: 1})
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)
	t0 := time.Now()
	_, err := p.Call(ctx, "wait", nil)
	require.ErrorIs(t, err, context.Canceled)
	assert.Less(t, time.Since(t0), 2*time.Second)
	require.Eventually(t, func() bool { return mustCall(t, p, "canceled", "") == "1" }, 10*time.Second, time.Millisecond,
		"the worker cancels the handler's context")

	ctx, cancel = context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err = p.Call(ctx, "wait", nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Eventually(t, func() bool { return mustCall(t, p, "canceled", "") == "2" }, 10*time.Second, time.Millisecond)
	assert.Zero(t, p.Stats().InFlight)
	assert.Zero(t, p.Stats().Restarts)
}

// Restarts beyond the limit wait for the window: meanwhile Call fails with
// ErrRestartLimit, and the pool serves again once the window has passed.
func TestRestartLimit(t *testing.T) {
	const window = 1500 * time.Millisecond
	p := startPool(t, worker.Options{Workers: 1, MaxRestarts: 1, RestartWindow: window})
	_, err := call(t, p, "crash", "")
	require.ErrorIs(t, err, worker.ErrWorkerLost)
	assert.Equal(t, "1", mustCall(t, p, "echo", "1"), "the first restart is within the limit")

	_, err = call(t, p, "crash", "")
	require.ErrorIs(t, err, worker.ErrWorkerLost)
	require.Eventually(t, func() bool { return p.Stats().Throttled }, 10*time.Second, time.Millisecond)
	_, err = call(t, p, "echo", "2")
	require.ErrorIs(t, err, worker.ErrRestartLimit)
	st := p.Stats()
	assert.EqualValues(t, 1, st.Restarts)
	assert.EqualValues(t, 1, st.Refused)
	assert.Zero(t, st.Workers)

	require.Eventually(t, func() bool {
		out, err := call(t, p, "echo", "3")
		return err == nil && out == "3"
	}, 3*window, 10*time.Millisecond, "the window passes")
	st = p.Stats()
	assert.False(t, st.Throttled)
	assert.EqualValues(t, 2, st.Restarts)
	assert.EqualValues(t, 2, st.Lost)
}

// Close stops every worker, spares too: each cleans up and reports its memory,
// and no process is left.
func TestClose(t *testing.T) {
	p, err := worker.Start(t.Context(), worker.Options{Workers: 2, Spares: 1, Logger: testLogger(t)})
	require.NoError(t, err)
	assert.Equal(t, "x", mustCall(t, p, "echo", "x"))
	pids := p.Stats().PIDs
	require.Len(t, pids, 3)
	require.NoError(t, p.Close())
	for _, pid := range pids {
		assert.False(t, alive(pid), "worker %d", pid)
	}
	st := p.Stats()
	assert.Empty(t, st.PIDs)
	assert.EqualValues(t, 3, st.Exited)
	assert.Zero(t, st.LeftBytes)
	assert.Zero(t, st.ExitErrors)
	_, err = call(t, p, "echo", "x")
	require.ErrorIs(t, err, worker.ErrClosed)
	require.NoError(t, p.Close(), "again")
}

// A worker that does not finish within the grace is killed; its request gets a
// *LostError and Close says so.
func TestCloseKillsAfterGrace(t *testing.T) {
	p, err := worker.Start(t.Context(), worker.Options{Workers: 1, Grace: 200 * time.Millisecond, Logger: testLogger(t)})
	require.NoError(t, err)
	pids := p.Stats().PIDs
	done := make(chan error)
	go func() { _, err := call(t, p, "hang", ""); done <- err }()
	waitInFlight(t, p, 1)
	err = p.Close()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "killed")
	require.ErrorIs(t, <-done, worker.ErrWorkerLost)
	for _, pid := range pids {
		assert.False(t, alive(pid))
	}
}

// A Setup that fails, or does not end within StartTimeout, fails Start.
func TestStartFails(t *testing.T) {
	_, err := worker.Start(t.Context(), worker.Options{Workers: 2, Env: []string{envSetupFail + "=no model here"}, Logger: testLogger(t)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "setup: no model here")

	t0 := time.Now()
	_, err = worker.Start(t.Context(), worker.Options{StartTimeout: 300 * time.Millisecond,
		Env: []string{envSetupSleep + "=1m"}, Logger: testLogger(t)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not ready within")
	assert.Less(t, time.Since(t0), 20*time.Second)
}

// Workers die with their parent, even one that never closed its pool.
func TestNoOrphans(t *testing.T) {
	if os.Getenv("WORKER_TEST_ORPHAN_PARENT") != "" {
		p, err := worker.Start(t.Context(), worker.Options{Workers: 2, Spares: 1})
		if err != nil {
			fmt.Println("ERROR", err)
			os.Exit(1)
		}
		fmt.Println("PIDS", strings.Trim(fmt.Sprint(p.Stats().PIDs), "[]"))
		os.Exit(0) // without Close
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.CommandContext(t.Context(), exe, "-test.run=^TestNoOrphans$")
	cmd.Env = append(os.Environ(), "WORKER_TEST_ORPHAN_PARENT=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	// Read the one line, not to EOF: workers that outlived the parent would hold
	// the pipe open.
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	_ = cmd.Wait()
	fields, ok := strings.CutPrefix(strings.TrimSpace(line), "PIDS ")
	require.True(t, ok, "the parent said: %q", line)
	pids := strings.Fields(fields)
	require.Len(t, pids, 3)
	for _, s := range pids {
		pid := mustAtoi(t, s)
		assert.Eventually(t, func() bool { return !alive(pid) }, 10*time.Second, time.Millisecond, "worker %d outlived its parent", pid)
	}
}

// A handler error and a worker's fault keep apart: errors.Is finds each only where
// it belongs.
func TestErrorMatching(t *testing.T) {
	lost := &worker.LostError{Handler: "h", PID: 1, Cause: "signal: killed"}
	assert.ErrorIs(t, lost, worker.ErrWorkerLost)
	assert.NotErrorIs(t, lost, cuda.ErrFaulted)
	canceled := &worker.Error{Handler: "h", Kind: worker.KindCanceled, Msg: "context canceled"}
	assert.ErrorIs(t, canceled, context.Canceled)
	assert.NotErrorIs(t, canceled, context.DeadlineExceeded)
	assert.ErrorIs(t, &worker.Error{Kind: worker.KindDeadline}, context.DeadlineExceeded)
	assert.NoError(t, errors.Unwrap(&worker.Error{Kind: worker.KindHandler}))
	assert.Equal(t, "fault", worker.KindFault.String())
}
