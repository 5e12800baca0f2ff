package cuda_test

import (
	"testing"
	"time"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/resource"
	"github.com/stretchr/testify/require"
)

// Wrapped Go memory stays registered and pinned while a kernel still reads it: a Close
// right after the launch, or a drop followed by collection and Reclaim, waits for the
// kernel (read_sum spins 300 ms before it reads) before unregistering.
func TestWrappedMemoryOutlivesKernel(t *testing.T) {
	_, m, s := loadKernels(t, cudatest.Kernels)
	ctx := m.Context()
	readSum := function(t, m, "read_sum")
	const n = 1 << 16
	spin := uint64(300 * time.Millisecond)

	fill := func() ([]uint32, uint64) {
		vals := make([]uint32, n)
		var want uint64
		for i := range vals {
			vals[i] = uint32(i*7 + 3)
			want += uint64(vals[i])
		}
		return vals, want
	}

	// Each subtest runs on a goroutine of its own: Require makes the context current
	// on its thread for the raw allocations of cudatest.
	t.Run("Close", func(t *testing.T) {
		g := cudatest.Require(t, cudatest.Kernels)
		vals, want := fill()
		w, err := cuda.Wrap(ctx, vals)
		require.NoError(t, err)
		out := cudatest.ToDevice(t, g, []uint64{0})
		require.NoError(t, readSum.Launch(s, cuda.D1(4), cuda.D1(256), 0, w, uint64(n), spin, out))
		t0 := time.Now()
		require.NoError(t, w.Close())
		require.GreaterOrEqual(t, time.Since(t0), 200*time.Millisecond, "Close waited for the kernel")
		require.NoError(t, s.Synchronize())
		require.Equal(t, []uint64{want}, cudatest.FromDevice[uint64](t, out, 1))
	})

	t.Run("Dropped", func(t *testing.T) {
		g := cudatest.Require(t, cudatest.Kernels)
		out := cudatest.ToDevice(t, g, []uint64{0})
		var want uint64
		func() {
			var vals []uint32
			vals, want = fill()
			w, err := cuda.Wrap(ctx, vals)
			require.NoError(t, err)
			require.NoError(t, readSum.Launch(s, cuda.D1(4), cuda.D1(256), 0, w, uint64(n), spin, out))
		}()
		// The buffer and its slice are garbage now; collecting and reclaiming must
		// not pull the memory from under the running kernel.
		_, err := resource.Reclaim()
		require.NoError(t, err)
		require.NoError(t, s.Synchronize())
		require.Equal(t, []uint64{want}, cudatest.FromDevice[uint64](t, out, 1))
		st, err := cuda.MemoryStatus()
		require.NoError(t, err)
		require.Zero(t, st.WrappedAwaiting)
	})
}
