package cuda_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
)

// A batch runs its launches in order, can be submitted again, and refuses memory
// closed since Add.
func TestLaunchBatch(t *testing.T) {
	g, m, s := loadKernels(t, cudatest.Kernels)
	ctx := m.Context()
	const n = 1000
	x, err := cuda.AllocFor[float32](s, n)
	require.NoError(t, err)
	y, err := cuda.AllocFor[float32](s, n)
	require.NoError(t, err)
	fill, axpy := function(t, m, "fill_u32"), function(t, m, "axpy_f32")

	// y = 1, then y += 2·x five times with x = 1: 11 everywhere, only if the
	// launches ran in order.
	var b cuda.LaunchBatch
	grid, block := cuda.D1(cuda.Blocks(n, 128)), cuda.D1(128)
	require.NoError(t, b.Add(fill, grid, block, 0, x, math.Float32bits(1), uint64(n)))
	require.NoError(t, b.Add(fill, grid, block, 0, y, math.Float32bits(1), uint64(n)))
	for range 5 {
		require.NoError(t, b.Add(axpy, grid, block, 0, float32(2), x, y, int32(n)))
	}
	require.Equal(t, 7, b.Len())
	check := func() {
		t.Helper()
		for i, v := range cudatest.FromDevice[float32](t, y.Ptr(), n) {
			require.Equal(t, float32(11), v, "y[%d]", i)
		}
	}
	require.NoError(t, b.Submit(s))
	require.NoError(t, s.Synchronize())
	check()

	// Again, on another stream of the context: the same result.
	other, err := ctx.NewStream()
	require.NoError(t, err)
	defer other.Close()
	require.NoError(t, s.Synchronize())
	require.NoError(t, b.Submit(other))
	require.NoError(t, other.Synchronize())
	check()

	allocs := testing.AllocsPerRun(100, func() {
		if err := b.Submit(other); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs, "Submit allocates nothing")
	require.NoError(t, other.Synchronize())

	require.NoError(t, x.Close())
	require.ErrorIs(t, b.Submit(s), cuda.ErrClosed)
	require.NoError(t, y.Close())
	_ = g
}

// A launch the driver rejects stops the batch there: the launches before it are
// queued, and the error names the one that failed.
func TestLaunchBatchDriverError(t *testing.T) {
	_, m, s := loadKernels(t)
	empty := function(t, m, "empty")
	var b cuda.LaunchBatch
	require.NoError(t, b.Add(empty, cuda.D1(1), cuda.D1(1), 0))
	require.NoError(t, b.Add(empty, cuda.D1(1), cuda.D1(4096), 0)) // more threads than a block holds
	require.NoError(t, b.Add(empty, cuda.D1(1), cuda.D1(1), 0))
	err := b.Submit(s)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "launch 2 of 3 (empty)")
	require.NoError(t, s.Synchronize())
}
