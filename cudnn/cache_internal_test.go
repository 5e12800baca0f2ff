package cudnn

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cudnn/cudnnraw"
)

// The algorithm cache chooses once per key however many goroutines ask at once,
// keeps no failure, and forgets chosen entries (never one being chosen) when full.
// No CUDA: it runs in CI.
func TestChooseOncePerKey(t *testing.T) {
	k := algoKey{ctx: cudaraw.CUcontext(0xdead), x: Tensor4D{1, 2, 3, 4}}
	t.Cleanup(func() {
		forget(k)
	})

	var calls atomic.Int32
	release := make(chan struct{})
	want := choice{algo: cudnnraw.CUDNN_CONVOLUTION_FWD_ALGO_GEMM, math: cudnnraw.CUDNN_FMA_MATH, workspace: 4096}
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			got, err := choose(k, func() (choice, error) {
				calls.Add(1)
				<-release // the others arrive meanwhile and wait
				return want, nil
			})
			assert.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
	time.Sleep(20 * time.Millisecond)
	close(release)
	wg.Wait()
	assert.Equal(t, int32(1), calls.Load())

	// A failure is returned to the chooser and not kept; a waiter then chooses itself.
	k2 := k
	k2.x.N = 2
	t.Cleanup(func() {
		forget(k2)
	})
	boom := errors.New("boom")
	_, err := choose(k2, func() (choice, error) { return choice{}, boom })
	require.ErrorIs(t, err, boom)
	got, err := choose(k2, func() (choice, error) { return want, nil })
	require.NoError(t, err)
	assert.Equal(t, want, got)

	// A panic in the chooser leaves no entry behind for others to wait on forever.
	k3 := k
	k3.x.N = 3
	assert.Panics(t, func() { _, _ = choose(k3, func() (choice, error) { panic("x") }) })
	got, err = choose(k3, func() (choice, error) { return want, nil })
	require.NoError(t, err)
	assert.Equal(t, want, got)
	forget(k3)

	// prune keeps an entry being chosen.
	k4 := k
	k4.x.N = 4
	started, finish := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = choose(k4, func() (choice, error) { close(started); <-finish; return want, nil })
	}()
	<-started
	prune()
	_, pending := algos.Load(k4)
	_, chosen := algos.Load(k)
	assert.True(t, pending, "prune dropped an entry being chosen")
	assert.False(t, chosen, "prune kept a chosen entry")
	close(finish)
	<-done
	forget(k4)
}

// forget removes k's entry (test cleanup).
func forget(k algoKey) {
	if _, ok := algos.LoadAndDelete(k); ok {
		algoCount.Add(-1)
	}
}

// The count that bounds the cache follows its adds, failures and prunes, and a
// full cache forgets its chosen entries before it adds one.
func TestAlgoCacheBound(t *testing.T) {
	entries := func() (n int64) {
		algos.Range(func(any, any) bool { n++; return true })
		return n
	}
	require.Equal(t, entries(), algoCount.Load())
	base := algoCount.Load()
	keys := make([]algoKey, maxAlgoEntries+1-int(base))
	t.Cleanup(func() {
		for _, k := range keys {
			forget(k)
		}
	})
	ok := func() (choice, error) { return choice{workspace: 1}, nil }
	for i := range keys {
		keys[i] = algoKey{ctx: cudaraw.CUcontext(0xbeef), x: Tensor4D{N: i + 1}}
		if i < len(keys)-1 {
			_, err := choose(keys[i], ok)
			require.NoError(t, err)
		}
	}
	_, err := choose(keys[0], func() (choice, error) { return choice{}, errors.New("not asked: cached") })
	require.NoError(t, err)
	assert.Equal(t, int64(maxAlgoEntries), algoCount.Load())
	_, err = choose(keys[len(keys)-1], ok)
	require.NoError(t, err)
	assert.Equal(t, int64(1), algoCount.Load(), "the full cache forgot its chosen entries")
	assert.Equal(t, entries(), algoCount.Load())
}
