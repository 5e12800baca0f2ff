package cudnn

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
)

// The algorithm cache chooses once per key however many goroutines ask at once,
// keeps no failure, and forgets chosen entries (never one being chosen) when full.
// No CUDA: it runs in CI.
func TestChooseOncePerKey(t *testing.T) {
	k := algoKey{ctx: cuda.CUcontext(0xdead), x: Tensor4D{1, 2, 3, 4}}
	t.Cleanup(func() {
		algos.mu.Lock()
		delete(algos.m, k)
		algos.mu.Unlock()
	})

	var calls atomic.Int32
	release := make(chan struct{})
	want := choice{algo: CUDNN_CONVOLUTION_FWD_ALGO_GEMM, math: CUDNN_FMA_MATH, workspace: 4096}
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
		algos.mu.Lock()
		delete(algos.m, k2)
		algos.mu.Unlock()
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
	algos.mu.Lock()
	delete(algos.m, k3)
	algos.mu.Unlock()

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
	algos.mu.Lock()
	prune()
	_, pending := algos.m[k4]
	_, chosen := algos.m[k]
	algos.mu.Unlock()
	assert.True(t, pending, "prune dropped an entry being chosen")
	assert.False(t, chosen, "prune kept a chosen entry")
	close(finish)
	<-done
	algos.mu.Lock()
	delete(algos.m, k4)
	algos.mu.Unlock()
}
