package cudalib_test

import (
	"sync"
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/cudalib"
	"github.com/gocuda/gocuda/resource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testSetting is made once: each setting is told of every context destroyed for the
// life of the process.
var testSetting = cudalib.NewSetting(64)

func TestSetting(t *testing.T) {
	ctx, _ := cudatest.Stream(t)
	st := testSetting
	base := st.ContextsForTest()
	assert.Equal(t, 64, st.Default())
	assert.Equal(t, 64, st.Get(ctx))
	assert.Equal(t, 64, st.Get(nil))
	assert.ErrorIs(t, st.Set(nil, 1), cuda.ErrInvalidArgument)
	assert.ErrorIs(t, st.Set(&cuda.Context{}, 1), cuda.ErrInvalidArgument)

	// Values per context, versioned.
	v0 := st.Version()
	assert.NotZero(t, v0)
	other, err := cuda.NewContext(0, 0)
	require.NoError(t, err)
	require.NoError(t, st.Set(other, 128))
	v1 := st.Version()
	assert.NotEqual(t, v0, v1)
	assert.Equal(t, 128, st.Get(other))
	assert.Equal(t, 64, st.Get(ctx), "other contexts keep the default")
	assert.Equal(t, base+1, st.ContextsForTest())

	// A destroyed context's value goes with it: none is kept, a Set fails, and a new
	// context starts from the default.
	require.NoError(t, other.Close())
	assert.Equal(t, base, st.ContextsForTest(), "dropped with the context")
	assert.Equal(t, 64, st.Get(other))
	assert.NotEqual(t, v1, st.Version())
	assert.ErrorIs(t, st.Set(other, 256), cuda.ErrClosed)
	assert.Equal(t, base, st.ContextsForTest())
	again, err := cuda.NewContext(0, 0)
	require.NoError(t, err)
	defer again.Close()
	assert.Equal(t, 64, st.Get(again))

	// The primary context keeps its value: it lives as long as the process.
	require.NoError(t, st.Set(ctx, 32))
	defer st.Set(ctx, st.Default())
	assert.Equal(t, 32, st.Get(ctx))
	primary, err := cuda.Device(0).Context()
	require.NoError(t, err)
	assert.Equal(t, 32, st.Get(primary))
}

// A context dropped without Close is destroyed by resource.Reclaim, and its value with
// it; a Set racing a Close leaves no value either.
func TestSettingDroppedContext(t *testing.T) {
	cudatest.Require(t)
	st := testSetting
	_, err := resource.Reclaim()
	require.NoError(t, err)
	base := st.ContextsForTest()
	func() {
		for range 5 {
			c, err := cuda.NewContext(0, 0)
			require.NoError(t, err)
			require.NoError(t, st.Set(c, 1))
		}
	}()
	assert.Equal(t, base+5, st.ContextsForTest())
	for range 3 {
		_, err = resource.Reclaim()
		require.NoError(t, err)
	}
	assert.Equal(t, base, st.ContextsForTest(), "every dropped context's value gone")

	for range 20 {
		c, err := cuda.NewContext(0, 0)
		require.NoError(t, err)
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := st.Set(c, 2); err != nil {
				assert.ErrorIs(t, err, cuda.ErrClosed)
			}
		})
		wg.Go(func() { assert.NoError(t, c.Close()) })
		wg.Wait()
		assert.Equal(t, base, st.ContextsForTest())
	}
}
