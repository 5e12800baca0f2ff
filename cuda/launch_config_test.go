package cuda_test

import (
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A configured launch reaches the driver with its attributes, fills its buffer as
// Launch does, and is ordered by the hand-off like any launch; one with no addition
// is Launch.
func TestLaunchWith(t *testing.T) {
	_, m, s := loadKernels(t)
	ctx := m.Context()
	fill := function(t, m, "fill_u32")
	const n = 1024
	buf, err := cuda.AllocFor[uint32](s, n)
	require.NoError(t, err)
	defer buf.Close()
	cfg := cuda.LaunchConfig{Grid: cuda.D1(4), Block: cuda.D1(256), Cluster: cuda.D1(2), Programmatic: true, Priority: -1}
	require.NoError(t, fill.LaunchWith(s, cfg, buf, uint32(7), uint64(n)))
	got, err := cuda.ToSlice[uint32](s, buf)
	require.NoError(t, err)
	if cudatest.FakeLoaded() {
		last := cudatest.Launches(cudatest.LaunchCount() - 1)
		require.Len(t, last, 1)
		l := last[0]
		assert.Equal(t, "fill_u32", l.Func)
		assert.Equal(t, [3]uint32{2, 1, 1}, l.Cluster)
		assert.False(t, l.Cooperative)
		assert.True(t, l.Programmatic)
		assert.Equal(t, -1, l.Priority)
	} else {
		for i, v := range got {
			require.Equal(t, uint32(7), v, "element %d", i)
		}
	}

	// Another stream's writes are waited for: the buffer is filled on other, then
	// the configured launch on s overwrites it.
	other, err := ctx.NewStream()
	require.NoError(t, err)
	defer other.Close()
	require.NoError(t, fill.Launch(other, cuda.D1(4), cuda.D1(256), 0, buf, uint32(1), uint64(n)))
	require.NoError(t, fill.LaunchWith(s, cuda.LaunchConfig{Grid: cuda.D1(4), Block: cuda.D1(256), Priority: -1},
		buf, uint32(2), uint64(n)))
	got, err = cuda.ToSlice[uint32](s, buf)
	require.NoError(t, err)
	if !cudatest.FakeLoaded() {
		assert.Equal(t, uint32(2), got[n-1])
	}

	// Errors before anything is queued.
	before := cudatest.LaunchCount()
	err = fill.LaunchWith(s, cuda.LaunchConfig{Grid: cuda.D1(3), Block: cuda.D1(256), Cluster: cuda.D1(2)}, buf, uint32(1), uint64(n))
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "does not divide")
	require.ErrorIs(t, fill.LaunchWith(s, cuda.LaunchConfig{Grid: cuda.D1(1), Block: cuda.D1(1), Cooperative: true}, buf, uint32(1)),
		cuda.ErrInvalidArgument, "a missing argument")
	require.NoError(t, buf.Close())
	require.ErrorIs(t, fill.LaunchWith(s, cfg, buf, uint32(1), uint64(n)), cuda.ErrClosed)
	if cudatest.FakeLoaded() {
		assert.Equal(t, before, cudatest.LaunchCount(), "nothing launched")
	}
}

// A cooperative grid larger than the device holds at once is the driver's error;
// MaxActiveBlocks says how large one may be.
func TestLaunchWithCooperativeLimit(t *testing.T) {
	_, m, s := loadKernels(t)
	empty := function(t, m, "empty")
	per, err := empty.MaxActiveBlocks(1024, 0)
	require.NoError(t, err)
	require.Positive(t, per)
	sms, err := cuda.Device(0).Attribute(cudaraw.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
	require.NoError(t, err)
	most := per * sms
	require.NoError(t, empty.LaunchWith(s, cuda.LaunchConfig{Grid: cuda.D1(most), Block: cuda.D1(1024), Cooperative: true}))
	if cudatest.FakeLoaded() {
		last := cudatest.Launches(cudatest.LaunchCount() - 1)
		require.Len(t, last, 1)
		assert.True(t, last[0].Cooperative)
	}
	err = empty.LaunchWith(s, cuda.LaunchConfig{Grid: cuda.D1(most + 1), Block: cuda.D1(1024), Cooperative: true})
	require.ErrorIs(t, err, cudaraw.CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE)
	require.NoError(t, s.Synchronize())

	block, grid, err := empty.SuggestedBlockSize(0)
	require.NoError(t, err)
	assert.Positive(t, block)
	assert.LessOrEqual(t, block, 1024)
	assert.Positive(t, grid)
	_, err = empty.MaxActiveBlocks(0, 0)
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)
}

// More than 48 KiB of dynamic shared memory: the function's limit is raised for
// Launch and LaunchWith alike.
func TestLaunchLargeSharedMemory(t *testing.T) {
	_, m, s := loadKernels(t)
	empty := function(t, m, "empty")
	require.NoError(t, empty.Launch(s, cuda.D1(1), cuda.D1(32), 100<<10))
	require.NoError(t, empty.LaunchWith(s, cuda.LaunchConfig{Grid: cuda.D1(2), Block: cuda.D1(32), SharedMem: 150 << 10, Priority: -1}))
	require.NoError(t, s.Synchronize())
	limit, err := empty.Attribute(cudaraw.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
	require.NoError(t, err)
	assert.Equal(t, 150<<10, limit)
	err = empty.Launch(s, cuda.D1(1), cuda.D1(32), 1<<20)
	require.ErrorIs(t, err, cudaraw.ErrInvalidValue, "past the device's opt-in maximum")
}
