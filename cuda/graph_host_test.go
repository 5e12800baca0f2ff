package cuda_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A host node runs between the nodes it depends on and those that depend on it, in
// every replay: here it reads what a copy node brought to pinned memory and writes
// what the next copy node takes to the device. Its function stays registered for
// the replays queued before the graph and executable are closed, and no longer.
func TestGraphHostNode(t *testing.T) {
	cudatest.Check(t)
	ctx, s := cudatest.Stream(t)
	const n = 1 << 16
	a, err := cuda.AllocFor[uint32](s, n)
	require.NoError(t, err)
	defer a.Close()
	b, err := cuda.AllocFor[uint32](s, n)
	require.NoError(t, err)
	defer b.Close()
	in, err := ctx.AllocHost(4 * n)
	require.NoError(t, err)
	defer in.Close()
	out, err := ctx.AllocHost(4 * n)
	require.NoError(t, err)
	defer out.Close()
	before := cuda.HostFuncsForTest()

	g, err := ctx.NewGraph()
	require.NoError(t, err)
	_, err = g.AddHost(nil)
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)
	set, err := g.AddMemset(a, 41)
	require.NoError(t, err)
	toHost, err := g.AddCopy(in, a, set)
	require.NoError(t, err)
	var calls atomic.Int32
	host, err := g.AddHost(func() {
		src, dst := cuda.HostSlice[uint32](in), cuda.HostSlice[uint32](out)
		for i := range src {
			dst[i] = src[i] + 1
		}
		calls.Add(1)
	}, toHost)
	require.NoError(t, err)
	_, err = g.AddCopy(b, out, host)
	require.NoError(t, err)
	assert.Equal(t, before+1, cuda.HostFuncsForTest())

	x, err := g.Instantiate()
	require.NoError(t, err)
	require.NoError(t, x.Launch(s))
	require.NoError(t, s.Synchronize())
	got := make([]uint32, n)
	require.NoError(t, cuda.CopyFromDevice(got, b))
	assert.Equal(t, uint32(42), got[0])
	assert.Equal(t, uint32(42), got[n-1])
	assert.Equal(t, int32(1), calls.Load())

	// Replays queued before the last Close still call the function.
	require.NoError(t, x.Launch(s))
	require.NoError(t, x.Launch(s))
	require.NoError(t, g.Close())
	require.NoError(t, x.Close())
	require.NoError(t, s.Synchronize())
	assert.Equal(t, int32(3), calls.Load())
	// The function is unregistered once the last call has returned (the callback
	// ends after the stream's work is seen complete).
	require.Eventually(t, func() bool { return cuda.HostFuncsForTest() == before }, 5*time.Second, time.Millisecond)
}
