package nvrtc_test

import (
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/nvrtc"
	"github.com/gocuda/gocuda/nvrtc/nvrtcraw"
	"github.com/stretchr/testify/require"
)

// launchSrc uses what cuda.LaunchConfig asks the driver for: a grid-wide barrier
// (cooperative launch), a cluster's distributed shared memory, and programmatic
// dependent launch.
const launchSrc = `
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

// Every thread adds one; after the grid's barrier, thread 0 reads the total, which
// only a cooperative launch guarantees is complete.
extern "C" __global__ void grid_total(unsigned *out) {
	atomicAdd(&out[0], 1u);
	cg::this_grid().sync();
	if (blockIdx.x == 0 && threadIdx.x == 0) out[1] = atomicAdd(&out[0], 0u);
}

// Each block of a cluster writes its rank in the cluster to its shared memory, and
// block 0 of each cluster sums its peers' through distributed shared memory.
extern "C" __global__ void cluster_ranks(unsigned *out) {
	__shared__ unsigned rank;
	cg::cluster_group cl = cg::this_cluster();
	if (threadIdx.x == 0) rank = cl.block_rank();
	cl.sync();
	if (cl.block_rank() == 0 && threadIdx.x == 0) {
		unsigned sum = 0;
		for (unsigned r = 0; r < cl.num_blocks(); r++) sum += *cl.map_shared_rank(&rank, r);
		out[blockIdx.x / cl.num_blocks()] = sum;
	}
	cl.sync();
}

// The second kernel of a pair may start early; it waits for the first's writes.
extern "C" __global__ void first(unsigned *x) { x[threadIdx.x] = threadIdx.x + 1; }
extern "C" __global__ void second(const unsigned *x, unsigned *y) {
	asm volatile("griddepcontrol.wait;" ::: "memory");
	y[threadIdx.x] = 2 * x[threadIdx.x];
}
`

// TestGPULaunchConfig runs each kind of configured launch for real (compute
// capability 9.0 and later: clusters and programmatic launch are Hopper's).
func TestGPULaunchConfig(t *testing.T) {
	ctx, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, nvrtcraw.Library())
	if major, _, err := ctx.Device().ComputeCapability(); err != nil || major < 9 {
		t.Skipf("clusters and programmatic launch need compute capability 9.0 (%d, %v)", major, err)
	}
	out, err := nvrtc.Compile(launchSrc, "launch.cu", nvrtc.Options{Context: ctx})
	require.NoError(t, err)
	mod, err := out.Load(ctx)
	require.NoError(t, err)
	defer mod.Close()
	fn := func(name string) *cuda.Function {
		f, err := mod.Function(name)
		require.NoError(t, err)
		return f
	}

	t.Run("cooperative", func(t *testing.T) {
		k := fn("grid_total")
		per, err := k.MaxActiveBlocks(256, 0)
		require.NoError(t, err)
		sms, err := ctx.Device().Attribute(cudaraw.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
		require.NoError(t, err)
		blocks := per * sms
		buf, err := cuda.AllocFrom(s, []uint32{0, 0})
		require.NoError(t, err)
		defer buf.Close()
		require.NoError(t, k.LaunchWith(s, cuda.LaunchConfig{Grid: cuda.D1(blocks), Block: cuda.D1(256), Cooperative: true}, buf))
		got, err := cuda.ToSlice[uint32](s, buf)
		require.NoError(t, err)
		require.Equal(t, uint32(blocks*256), got[1], "the total after the grid's barrier (%d blocks)", blocks)
	})
	t.Run("cluster", func(t *testing.T) {
		const clusters, size = 8, 4
		buf, err := cuda.AllocFor[uint32](s, clusters)
		require.NoError(t, err)
		defer buf.Close()
		require.NoError(t, fn("cluster_ranks").LaunchWith(s, cuda.LaunchConfig{Grid: cuda.D1(clusters * size), Block: cuda.D1(32),
			Cluster: cuda.D1(size)}, buf))
		got, err := cuda.ToSlice[uint32](s, buf)
		require.NoError(t, err)
		for c, v := range got {
			require.Equal(t, uint32(0+1+2+3), v, "cluster %d: its blocks' ranks", c)
		}
	})
	t.Run("programmatic", func(t *testing.T) {
		const n = 256
		x, err := cuda.AllocFor[uint32](s, n)
		require.NoError(t, err)
		defer x.Close()
		y, err := cuda.AllocFor[uint32](s, n)
		require.NoError(t, err)
		defer y.Close()
		for range 100 {
			require.NoError(t, fn("first").Launch(s, cuda.D1(1), cuda.D1(n), 0, x))
			require.NoError(t, fn("second").LaunchWith(s, cuda.LaunchConfig{Grid: cuda.D1(1), Block: cuda.D1(n), Programmatic: true},
				cuda.In(x), y))
		}
		got, err := cuda.ToSlice[uint32](s, y)
		require.NoError(t, err)
		for i, v := range got {
			require.Equal(t, uint32(2*(i+1)), v, "element %d", i)
		}
	})
}
