package cuda_test

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// graphRace is the objects of one graph race: a graph, memory of a size the cuda
// layer does not cache (its Close frees it in the driver, so the strict fake driver
// sees a use after the free), an event, and an executable made by the operation or
// the setup.
type graphRace struct {
	g    *cuda.Graph
	b    *cuda.DeviceBuffer
	ev   *cuda.Event
	m    *cuda.Module
	x    *cuda.Exec
	made *cuda.Exec // made by the operation
}

// graphRaces bounds the graph races: each builds a graph, and most replay it.
func graphRaces(t *testing.T) int { return min(races(t), 2000) }

// TestRaceCloseGraph races the Close of what graphs use, and of graphs and
// executables, against the graph operations that hand it to the driver: each either
// fails with ErrClosed or runs, and then the graph holds what it used until it lets
// go (a replay after the Close uses live memory, events and modules).
func TestRaceCloseGraph(t *testing.T) {
	e := newRaceEnv(t)
	n := graphRaces(t)
	const size = 2 << 20
	setup := func(t *testing.T) *graphRace {
		g, err := e.ctx.NewGraph()
		require.NoError(t, err)
		b, err := e.ctx.Alloc(e.s, size)
		require.NoError(t, err)
		ev, err := e.ctx.NewEvent(false)
		require.NoError(t, err)
		return &graphRace{g: g, b: b, ev: ev}
	}
	// done replays what the graph holds, then closes everything (a second Close
	// is ErrClosed, not an error here).
	done := func(r *graphRace) {
		if x, err := r.g.Instantiate(); err == nil {
			require.NoError(t, x.Launch(e.s))
			require.NoError(t, x.Close())
		}
		for _, x := range []*cuda.Exec{r.x, r.made} {
			if x != nil {
				_ = x.Close()
			}
		}
		_ = r.g.Close()
		_ = r.b.Close()
		_ = r.ev.Close()
		if r.m != nil {
			_ = r.m.Close()
		}
	}
	runRaces(t, n, raceKind[*graphRace]{
		name:  "DeviceBuffer/AddMemset",
		setup: setup,
		op:    func(r *graphRace) error { _, err := r.g.AddMemset(r.b, 7); return err },
		close: func(r *graphRace) error { return r.b.Close() },
		done:  done,
	})
	runRaces(t, n, raceKind[*graphRace]{
		name:  "DeviceBuffer/AddCopy",
		setup: setup,
		op:    func(r *graphRace) error { _, err := r.g.AddCopy(r.b, r.b); return err },
		close: func(r *graphRace) error { return r.b.Close() },
		done:  done,
	})
	runRaces(t, n, raceKind[*graphRace]{
		name:  "DeviceBuffer/AddKernel",
		setup: setup,
		op: func(r *graphRace) error {
			_, err := r.g.AddKernel(e.axpy, cuda.D1(1), cuda.D1(64), 0, nil, float32(2), r.b, r.b, int32(64))
			return err
		},
		close: func(r *graphRace) error { return r.b.Close() },
		done:  done,
	})
	runRaces(t, n, raceKind[*graphRace]{
		name:  "Event/AddEventRecord",
		setup: setup,
		op:    func(r *graphRace) error { _, err := r.g.AddEventRecord(r.ev); return err },
		close: func(r *graphRace) error { return r.ev.Close() },
		done:  done,
	})
	runRaces(t, min(n, 500), raceKind[*graphRace]{
		name: "Module/AddKernel",
		setup: func(t *testing.T) *graphRace {
			r := setup(t)
			m, err := e.ctx.LoadModule(kernelsPTX)
			require.NoError(t, err)
			r.m = m
			return r
		},
		op: func(r *graphRace) error {
			f, err := r.m.Function("axpy_f32")
			if err != nil {
				return err
			}
			_, err = r.g.AddKernel(f, cuda.D1(1), cuda.D1(64), 0, nil, float32(2), r.b, r.b, int32(64))
			return err
		},
		close: func(r *graphRace) error { return r.m.Close() },
		done:  done,
	})
	runRaces(t, n, raceKind[*graphRace]{
		name: "Graph/Instantiate",
		setup: func(t *testing.T) *graphRace {
			r := setup(t)
			_, err := r.g.AddMemset(r.b, 1)
			require.NoError(t, err)
			return r
		},
		op: func(r *graphRace) error {
			x, err := r.g.Instantiate()
			r.made = x
			return err
		},
		close: func(r *graphRace) error { return r.g.Close() },
		done: func(r *graphRace) {
			if r.made != nil {
				require.NoError(t, r.made.Launch(e.s), "the executable holds the memory")
			}
			done(r)
		},
	})
	// instantiated is setup with a memset of the buffer in the graph, instantiated.
	instantiated := func(t *testing.T) *graphRace {
		r := setup(t)
		_, err := r.g.AddMemset(r.b, 1)
		require.NoError(t, err)
		r.x, err = r.g.Instantiate()
		require.NoError(t, err)
		return r
	}
	runRaces(t, n, raceKind[*graphRace]{
		name: "Exec/Launch",
		setup: func(t *testing.T) *graphRace {
			r := instantiated(t)
			require.NoError(t, r.b.Close()) // leased: freed with the graph and the executable
			return r
		},
		op:    func(r *graphRace) error { return r.x.Launch(e.s2) },
		close: func(r *graphRace) error { return r.x.Close() },
		done:  done,
	})
	// Update replaces what the executable leases under the lock Close takes: it
	// either fails with ErrClosed or finishes before the release.
	runRaces(t, n, raceKind[*graphRace]{
		name:  "Exec/Update",
		setup: instantiated,
		op:    func(r *graphRace) error { return r.x.Update(r.g) },
		close: func(r *graphRace) error { return r.x.Close() },
		done:  done,
	})
}

// Context.Locked restores the thread's previous context, unless another goroutine
// destroyed it meanwhile: then it leaves no context current rather than a destroyed
// one (which the strict fake driver reports).
func TestLockedAfterPreviousContextDestroyed(t *testing.T) {
	cudatest.Check(t)
	cudatest.Require(t)
	ctx, err := cuda.Device(0).Context()
	require.NoError(t, err)
	other, err := cuda.NewContext(0, 0)
	require.NoError(t, err)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	require.NoError(t, cudaraw.CtxSetCurrent(other.Handle()))
	// Destroyed on another thread, while still current on this one.
	closed := make(chan error)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		closed <- other.Close()
	}()
	require.NoError(t, <-closed)
	require.NoError(t, ctx.Locked(func() error { return nil }))
	var cur cudaraw.CUcontext
	require.NoError(t, cudaraw.CtxGetCurrent(&cur))
	assert.NotEqual(t, other.Handle(), cur, "not the destroyed one")
}

// A replay racing a write of the same buffer on another stream keeps its use: the
// buffer, closed right after, is freed only once the replay has run. The write,
// finding itself the buffer's only user, must not replace the replay's use with its
// own, nor may a replay plan against the uses the write is replacing: the strict
// fake driver sees the replay's memset on freed memory if either happens (about once
// in 400 races).
func TestReplayRacingWriteKeepsUse(t *testing.T) {
	if cudatest.Strict() {
		cudatest.Check(t)
	}
	ctx, s1 := cudatest.Stream(t)
	s2, err := ctx.NewStream()
	require.NoError(t, err)
	defer s2.Close()
	n := min(races(t)/25, 400)
	rng := rand.New(rand.NewPCG(1, 2))
	for range n {
		b, err := ctx.Alloc(s1, 2<<20) // not cached: Close frees it in the driver
		require.NoError(t, err)
		g, err := ctx.NewGraph()
		require.NoError(t, err)
		_, err = g.AddMemset(b, 1)
		require.NoError(t, err)
		x, err := g.Instantiate()
		require.NoError(t, err)
		require.NoError(t, g.Close())
		require.NoError(t, x.Launch(s1))
		require.NoError(t, s1.Synchronize())
		if cudatest.FakeLoaded() { // s1's work runs late: after the free, if its use was lost
			require.NoError(t, cudatest.Delay(uintptr(s1.Handle()), 3*time.Millisecond))
		}
		var wg sync.WaitGroup
		a, c := rng.IntN(2048), rng.IntN(2048)
		wg.Go(func() { spin(a); assert.NoError(t, x.Launch(s1)) })
		wg.Go(func() { spin(c); assert.NoError(t, b.Memset8Async(s2, 2)) })
		wg.Wait()
		require.NoError(t, x.Close())
		require.NoError(t, b.Close())
	}
	require.NoError(t, ctx.Synchronize())
}

// A replay of memory last written on another stream waits for that write once: the
// launch, alone with the memory, records its own use in place of the other stream's,
// so that later launches on its stream wait for nothing.
func TestReplayHandsOffOnce(t *testing.T) {
	ctx, s1 := cudatest.Stream(t)
	s2, err := ctx.NewStream()
	require.NoError(t, err)
	defer s2.Close()
	b, err := ctx.Alloc(s1, 2<<20)
	require.NoError(t, err)
	defer b.Close()
	g, err := ctx.NewGraph()
	require.NoError(t, err)
	defer g.Close()
	_, err = g.AddMemset(b, 1)
	require.NoError(t, err)
	x, err := g.Instantiate()
	require.NoError(t, err)
	defer x.Close()
	h0 := cuda.HandOffsForTest(s2)
	for range 5 {
		require.NoError(t, x.Launch(s2))
	}
	assert.Equal(t, int64(1), cuda.HandOffsForTest(s2)-h0, "one wait for the allocation on s1")
	require.NoError(t, s2.Synchronize())
}
