package cuda_test

import (
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// collectMany is how many objects TestGPUCollectManyObjects drops in all.
const collectMany = 10_000

// Collecting many dropped objects at once — device and pinned buffers, events and
// streams, 10,000 in all — while a kernel keeps the GPU busy delays neither the
// collecting goroutine nor a launch from another goroutine (cudatest.CollectWhileBusy
// guards against a wait; the slowest launch is logged for the goal), and
// every release runs.
func TestGPUCollectManyObjects(t *testing.T) {
	ctx, s := cudatest.Stream(t, cudatest.Kernels)
	if cudatest.FakeLoaded() {
		t.Skip("the delays measured are the real driver's")
	}
	perRound := collectMany / cudatest.CollectRounds
	st := cudatest.CollectWhileBusy(t, ctx, 0, func(n int) {
		for range n {
			for i := range perRound {
				switch i % 20 {
				case 0:
					x, err := ctx.NewStream()
					require.NoError(t, err)
					require.NoError(t, x.Synchronize())
				case 1, 2, 3, 4, 5, 6:
					e, err := ctx.NewEvent(false)
					require.NoError(t, err)
					require.NoError(t, e.Record(s))
				case 7, 8, 9:
					h, err := ctx.AllocHost(4 << 10)
					require.NoError(t, err)
					h.Bytes()[0] = 1
				default:
					b, err := cuda.AllocFor[uint32](s, 64)
					require.NoError(t, err)
					require.NoError(t, b.Memset32Async(s, uint32(i)))
				}
				// each object is dropped here, without Close
			}
			require.NoError(t, s.Synchronize())
		}
	})
	t.Logf("%d objects: slowest launch from another goroutine %v (%d launches), runtime.GC %v, %d released during the spin",
		collectMany, st.WorstLaunch, st.Launches, st.GC, st.ReleasedNonBlocking)
	assert.Positive(t, st.ReleasedNonBlocking, "releases ran while the GPU was busy")
}
