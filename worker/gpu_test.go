package worker_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/worker"
)

// axpy computes y = a*x + y on the GPU: the request is a (float32), n (uint32), x
// and y (n float32 each), little-endian; the answer is y.
func axpy(ctx context.Context, req []byte) ([]byte, error) {
	a, x, y, err := decodeAxpy(req)
	if err != nil {
		return nil, err
	}
	return onStream(ctx, func(s *cuda.Stream) ([]byte, error) {
		n := len(x)
		dx, err := cuda.AllocFor[float32](s, n)
		if err != nil {
			return nil, err
		}
		defer dx.Close()
		dy, err := cuda.AllocFor[float32](s, n)
		if err != nil {
			return nil, err
		}
		defer dy.Close()
		if err := cuda.CopyToDeviceAsync(s, dx, x); err != nil {
			return nil, err
		}
		if err := cuda.CopyToDeviceAsync(s, dy, y); err != nil {
			return nil, err
		}
		if err := gpu.axpy.Launch(s, cuda.D1(cuda.Blocks(n, 256)), cuda.D1(256), 0, a, cuda.In(dx), dy, int32(n)); err != nil {
			return nil, err
		}
		if err := cuda.CopyFromDeviceAsync(s, y, dy); err != nil {
			return nil, err
		}
		if err := s.SynchronizeContext(ctx); err != nil {
			return nil, err
		}
		return appendFloats(nil, y), nil
	})
}

func appendFloats(b []byte, v []float32) []byte {
	for _, f := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	return b
}

func floats(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

func decodeAxpy(req []byte) (a float32, x, y []float32, err error) {
	if len(req) < 8 {
		return 0, nil, nil, errors.New("axpy: short request")
	}
	a = math.Float32frombits(binary.LittleEndian.Uint32(req))
	n := int(binary.LittleEndian.Uint32(req[4:]))
	if n == 0 || len(req) != 8+8*n {
		return 0, nil, nil, fmt.Errorf("axpy: %d bytes for n=%d", len(req), n)
	}
	return a, floats(req[8 : 8+4*n]), floats(req[8+4*n:]), nil
}

// axpyCase is request i and its answer: small integers, so that every product and
// sum is exact and the answer is known to the bit.
func axpyCase(i, n int) (req []byte, want []float32) {
	a := float32(i%13 - 6)
	x, y := make([]float32, n), make([]float32, n)
	want = make([]float32, n)
	for j := range n {
		x[j], y[j] = float32((i+j)%7), float32(j%5)
		want[j] = a*x[j] + y[j]
	}
	req = binary.LittleEndian.AppendUint32(nil, math.Float32bits(a))
	req = binary.LittleEndian.AppendUint32(req, uint32(n))
	return appendFloats(appendFloats(req, x), y), want
}

// load is a service's traffic: requests 0..requests-1 from 8 goroutines; request i
// runs the kernel that faults where i%faultEvery == faultEvery-1 (skipped unless
// faults), else the request of kind, marked Retry. Every faulting request must get
// the typed fault, every other one its right answer. do sends a request.
type load struct {
	requests, faultEvery int
	faults               bool
	kind                 func(i int) (name string, req []byte, check func(t *testing.T, out []byte) bool)
	do                   func(ctx context.Context, name string, req []byte, retry bool) ([]byte, error)
}

func (l load) run(t *testing.T, ctx context.Context) (answered, faulted int64, took time.Duration) {
	const goroutines = 8
	var next, ok, typed atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for range goroutines {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= l.requests {
					return
				}
				if i%l.faultEvery == l.faultEvery-1 {
					if !l.faults {
						continue
					}
					_, err := l.do(ctx, "fault", nil, false)
					var fe *cuda.FaultError
					if assert.ErrorAs(t, err, &fe, "request %d", i) {
						assert.ErrorIs(t, err, cuda.ErrFaulted)
						assert.ErrorIs(t, err, cudaraw.ErrIllegalAddress)
						typed.Add(1)
					}
					continue
				}
				name, req, check := l.kind(i)
				out, err := l.do(ctx, name, req, true)
				if assert.NoError(t, err, "request %d", i) && check(t, out) {
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return ok.Load(), typed.Load(), time.Since(t0)
}

// callPool is load.do through a pool.
func callPool(p *worker.Pool) func(ctx context.Context, name string, req []byte, retry bool) ([]byte, error) {
	return func(ctx context.Context, name string, req []byte, retry bool) ([]byte, error) {
		if retry {
			return p.Call(ctx, name, req, worker.Retry())
		}
		return p.Call(ctx, name, req)
	}
}

// The fault churn of TestGPUService on the fake driver, smaller: requests through
// device memory (the fake runs no kernel), 1 in 25 faulting.
func TestFaultChurn(t *testing.T) {
	cudatest.Require(t)
	const requests, faultEvery, workers, spares = 400, 25, 3, 1
	p := startPool(t, worker.Options{Workers: workers, Spares: spares, MaxRestarts: 4 * requests / faultEvery, Retries: 3})
	guard, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ok, faulted, took := load{requests: requests, faultEvery: faultEvery, faults: true, do: callPool(p),
		kind: func(i int) (string, []byte, func(*testing.T, []byte) bool) {
			req := []byte(strings.Repeat(strconv.Itoa(i), 100))
			return "gpu-echo", req, func(t *testing.T, out []byte) bool { return assert.Equal(t, req, out, "request %d", i) }
		}}.run(t, guard)
	require.NoError(t, guard.Err(), "the guard's deadline passed")
	const faulting = requests / faultEvery
	assert.EqualValues(t, requests-faulting, ok, "right answers")
	assert.EqualValues(t, faulting, faulted, "typed faults")
	waitServing(t, p, workers, spares)
	require.NoError(t, p.Close())
	st := p.Stats()
	assert.EqualValues(t, workers+spares, st.Exited)
	assert.Positive(t, st.Faults)
	assert.Equal(t, st.Faults, st.Restarts)
	assert.Zero(t, st.Lost)
	t.Logf("%d requests in %v: %d workers faulted, %d faulted answers, %d retries", requests, took.Round(time.Millisecond),
		st.Faults, st.Faulted, st.Retries)
}

// A GPU service that survives faults: 8 goroutines send 2,000 requests (copy in,
// the axpy kernel, copy out) to a pool of 4 workers and a spare; 1 in 50 runs the
// kernel that faults. Every faulting request gets the typed fault, every other one
// (marked Retry) its right answer, nothing hangs, the workers stopped at the end
// hold no device memory and no process is left. The log has the numbers for a
// table: the pool beside the same requests served in this process without faults,
// and what a restart costs.
func TestGPUService(t *testing.T) {
	cudatest.Require(t, cudatest.Kernels)
	const (
		requests   = 2000
		faultEvery = 50
		faulting   = requests / faultEvery
		n          = 1 << 14
		workers    = 4
		spares     = 1
	)
	p := startPool(t, worker.Options{Workers: workers, Spares: spares, MaxRestarts: 4 * faulting, Retries: 3})
	var phases [2]time.Duration
	_, err := fmt.Sscan(mustCall(t, p, "phases", ""), &phases[0], &phases[1])
	require.NoError(t, err)
	guard, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	traffic := load{requests: requests, faultEvery: faultEvery, faults: true, do: callPool(p),
		kind: func(i int) (string, []byte, func(*testing.T, []byte) bool) {
			req, want := axpyCase(i, n)
			return "axpy", req, func(t *testing.T, out []byte) bool { return assert.Equal(t, want, floats(out), "request %d", i) }
		}}

	ok, faulted, poolTime := traffic.run(t, guard)
	require.NoError(t, guard.Err(), "the guard's deadline passed")
	assert.EqualValues(t, requests-faulting, ok, "right answers")
	assert.EqualValues(t, faulting, faulted, "typed faults")

	waitServing(t, p, workers, spares) // the last replacements are ready: each will exit cleanly
	pids := p.Stats().PIDs
	require.NoError(t, p.Close())
	st := p.Stats()
	assert.EqualValues(t, workers+spares, st.Exited, "every worker alive at Close exits cleanly")
	assert.Zero(t, st.LeftBytes, "device memory left in the workers at exit")
	assert.Zero(t, st.ExitErrors)
	assert.Zero(t, st.Lost)
	assert.Positive(t, st.Faults)
	assert.LessOrEqual(t, st.Faults, int64(faulting))
	assert.Equal(t, st.Faults, st.Restarts)
	for _, pid := range pids {
		assert.False(t, alive(pid), "worker %d", pid)
	}

	// The same requests in this process, without the faulting ones.
	require.NoError(t, setupGPU())
	defer cleanupGPU()
	traffic.faults = false
	traffic.do = func(ctx context.Context, _ string, req []byte, _ bool) ([]byte, error) { return axpy(ctx, req) }
	ok1, _, oneTime := traffic.run(t, guard)
	assert.EqualValues(t, requests-faulting, ok1)

	rate := func(n int64, d time.Duration) float64 { return float64(n) / d.Seconds() }
	t.Logf("| run | requests | right answers | typed faults | worker faults | restarts | retries | wall | answers/s |")
	t.Logf("|---|---|---|---|---|---|---|---|---|")
	t.Logf("| pool, %d workers + %d spare, 1 in %d faults | %d | %d | %d | %d | %d | %d | %v | %.0f |",
		workers, spares, faultEvery, requests, ok, faulted, st.Faults, st.Restarts, st.Retries, poolTime.Round(time.Millisecond), rate(ok, poolTime))
	t.Logf("| one process, no faults | %d | %d | 0 | 0 | 0 | 0 | %v | %.0f |",
		requests-faulting, ok1, oneTime.Round(time.Millisecond), rate(ok1, oneTime))
	t.Logf("requests: axpy of %d float32 (%d KiB vectors, x and y in, y out); served %d, faulted answers %d",
		n, 4*n/1024, st.Served, st.Faulted)
	t.Logf("| restart cost (%d restarts) | min | median | max |", len(st.RestartTimes))
	t.Logf("|---|---|---|---|")
	for _, c := range []struct {
		name string
		of   func(worker.Restart) time.Duration
	}{
		{"ready (exec to serving)", func(r worker.Restart) time.Duration { return r.Ready }},
		{"process start (exec to first message)", func(r worker.Restart) time.Duration { return r.Start }},
		{"Setup (context + module loads)", func(r worker.Restart) time.Duration { return r.Setup }},
	} {
		var d []time.Duration
		for _, r := range st.RestartTimes {
			d = append(d, c.of(r))
		}
		if len(d) == 0 {
			continue
		}
		slices.Sort(d)
		t.Logf("| %s | %v | %v | %v |", c.name, d[0].Round(time.Microsecond), d[len(d)/2].Round(time.Microsecond), d[len(d)-1].Round(time.Microsecond))
	}
	t.Logf("one worker's Setup: primary context %v, module loads %v", phases[0].Round(time.Microsecond), phases[1].Round(time.Microsecond))
	var each []string
	for _, r := range st.RestartTimes {
		each = append(each, r.Ready.Round(time.Millisecond).String())
	}
	t.Logf("each restart's time to ready: %s", strings.Join(each, " "))
}
