package nccl_test

import (
	"context"
	"errors"
	"fmt"
	"net"
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

// The data-parallel training of Example_dataParallel, made elastic: each rank (a
// process per GPU in a real job; a goroutine per GPU here) joins through a TCP
// rendezvous that watches the ranks (Liveness), and when a rank dies the others go
// on with the ranks left: their Wait fails with nccl.ErrRankGone within the
// Liveness, they shrink the communicator (Comm.Shrink), the new rank 0 broadcasts
// the model (the ranks may have got through different numbers of steps), and the
// samples are split again among the ranks left. Rank 1 dies at step 20 here: it
// aborts its communicator and stops, as a killed process would. (Compiled, not
// run: it needs two GPUs or more and NCCL.)
func Example_elastic() {
	n, err := cuda.DeviceCount()
	if err != nil || n < 2 {
		fmt.Println("needs two GPUs:", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0") // rank 0's rendezvous
	if err != nil {
		fmt.Println(err)
		return
	}
	X, y := linearData()
	results := make([]elasticResult, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			rv := &nccl.TCPRendezvous{Addr: ln.Addr().String(), Liveness: 2 * time.Second}
			if r == 0 {
				rv.Listener = ln
			}
			dieAt := -1
			if r == 1 {
				dieAt = 20
			}
			results[r] = elasticRank(ctx, rv, r, n, cuda.Device(r), X, y, dieAt)
		})
	}
	wg.Wait()
	for r, res := range results {
		if res.err != nil {
			fmt.Printf("rank %d: %v\n", r, res.err)
			continue
		}
		fmt.Printf("rank %d: %d steps, the last %d on %d ranks: w = %.4f\n", r, res.steps, res.stepsAfter, res.size, res.w)
	}
}

// elasticResult is what a rank of the elastic training ends with.
type elasticResult struct {
	w          []float64
	steps      int // the steps the rank took part in
	stepsAfter int // of them, the steps after the last shrink
	size       int // the number of ranks at the end
	err        error
}

var errDied = errors.New("this rank died")

// elasticRank is what each process of the job runs: it joins as rank of nranks on
// dev, trains, and goes on with the ranks left when ranks die. At step dieAt (if
// not negative) the rank dies instead. The gradient of the rank's samples is
// computed on the host here (Example_dataParallel does it with cuBLAS); the
// all-reduce sums the ranks' gradients on the GPUs.
func elasticRank(ctx context.Context, rv nccl.Rendezvous, rank, nranks int, dev cuda.Device, X, y []float64, dieAt int) (res elasticResult) {
	c, err := nccl.Join(ctx, rv, rank, nranks, dev)
	if err != nil {
		return elasticResult{err: err}
	}
	defer func() { _ = c.Close() }() // the last communicator: Shrink aborts the ones it replaces
	s, err := c.Context().NewStream()
	if err != nil {
		return elasticResult{err: err}
	}
	defer s.Close()
	g, err := cuda.AllocFor[float64](s, features+1) // the gradient; w and the step for the broadcast
	if err != nil {
		return elasticResult{err: err}
	}
	defer g.Close()

	w := make([]float64, features)
	grad := make([]float64, features+1)
	for step := 0; step < steps; {
		if step == dieAt {
			_ = c.Abort()
			return elasticResult{err: fmt.Errorf("step %d: %w", step, errDied)}
		}
		err := allReduceGradient(ctx, c, s, g, shardGradient(X, y, w, c.Rank(), c.Size()))
		var gone *nccl.RankGoneError
		if errors.As(err, &gone) {
			// Ranks died: go on with the others, from the new rank 0's model.
			shrunk, err := c.Shrink(ctx, gone.Ranks)
			if err != nil {
				return elasticResult{err: err}
			}
			c = shrunk
			res.stepsAfter = 0
			if step, err = agree(ctx, c, s, g, w, step); err != nil {
				return elasticResult{err: err}
			}
			continue
		}
		if err != nil {
			return elasticResult{err: err}
		}
		if err := cuda.CopyFromDevice(grad, g); err != nil {
			return elasticResult{err: err}
		}
		for j := range w {
			w[j] -= rate * grad[j]
		}
		step++
		res.steps++
		res.stepsAfter++
	}
	res.w, res.size = w, c.Size()
	return res
}

// shardGradient returns the gradient of the mean squared error over the samples
// of rank's shard (of size ranks), divided by all the samples: the all-reduce sums
// the shards' into the gradient of all the data.
func shardGradient(X, y, w []float64, rank, size int) []float64 {
	m := samples / size
	lo, hi := rank*m, (rank+1)*m
	if rank == size-1 {
		hi = samples // the last rank takes the rest
	}
	g := make([]float64, features+1)
	for i := lo; i < hi; i++ {
		r := -y[i]
		for j := range features {
			r += X[i*features+j] * w[j]
		}
		for j := range features {
			g[j] += X[i*features+j] * r / samples
		}
	}
	return g
}

// allReduceGradient sums the ranks' gradients into g and waits for it.
func allReduceGradient(ctx context.Context, c *nccl.Comm, s *cuda.Stream, g *cuda.DeviceBuffer, grad []float64) error {
	if err := cuda.CopyToDeviceAsync(s, g, grad); err != nil {
		return err
	}
	if err := nccl.AllReduce[float64](c, s, g, g, nccl.Sum); err != nil {
		return err
	}
	return c.Wait(ctx, s)
}

// agree makes every rank of c take rank 0's model and step (a broadcast), and
// returns the step.
func agree(ctx context.Context, c *nccl.Comm, s *cuda.Stream, g *cuda.DeviceBuffer, w []float64, step int) (int, error) {
	state := append(append([]float64(nil), w...), float64(step))
	if err := cuda.CopyToDeviceAsync(s, g, state); err != nil {
		return 0, err
	}
	if err := nccl.Broadcast[float64](c, s, g, g, 0); err != nil {
		return 0, err
	}
	if err := c.Wait(ctx, s); err != nil {
		return 0, err
	}
	if err := cuda.CopyFromDevice(state, g); err != nil {
		return 0, err
	}
	copy(w, state)
	return int(state[features]), nil
}

// TestElasticExampleFake runs Example_elastic's ranks on the fake: rank 1 dies at
// step 20, the others shrink and finish the training on 3 ranks.
func TestElasticExampleFake(t *testing.T) {
	cudatest.Require(t)
	f := nccl.InstallFakeNCCL(t)
	f.AbortLeaves = true // the dead rank's peers wait for it, as NCCL's do
	ln := listen(t)
	X, y := linearData()
	const n = 4
	results := make([]elasticResult, n)
	eachRank([]int{0, 1, 2, 3}, func(r int) {
		rv := &nccl.TCPRendezvous{Addr: ln.Addr().String(), RetryInterval: 5 * time.Millisecond, Liveness: 2 * time.Second}
		if r == 0 {
			rv.Listener = ln
		}
		dieAt := -1
		if r == 1 {
			dieAt = 20
		}
		results[r] = elasticRank(t.Context(), rv, r, n, 0, X, y, dieAt)
	})
	require.ErrorIs(t, results[1].err, errDied)
	for _, r := range []int{0, 2, 3} {
		res := results[r]
		require.NoError(t, res.err, "rank %d", r)
		assert.Equal(t, 3, res.size, "rank %d", r)
		assert.Equal(t, steps, res.steps, "rank %d", r)
		assert.Positive(t, res.stepsAfter, "rank %d", r)
		assert.Len(t, res.w, features)
	}
	shrinks := f.ShrinksSnapshot()
	require.Len(t, shrinks, 3)
	for _, sh := range shrinks {
		assert.Equal(t, []int{1}, sh.Exclude)
		assert.Equal(t, int32(ncclraw.NCCL_SHRINK_ABORT), sh.Flags)
	}
}
