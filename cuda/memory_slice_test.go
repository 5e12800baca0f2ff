package cuda_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
)

func TestAllocFromToSlice(t *testing.T) {
	ctx, s := memSetup(t)
	src := []float32{1, 2, 3, 4, 5}
	d, err := cuda.AllocFrom(s, src)
	require.NoError(t, err)
	defer d.Close()
	assert.Equal(t, len(src), d.Len())
	src[0] = 99 // AllocFrom has read src already
	got, err := cuda.ToSlice[float32](s, d)
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2, 3, 4, 5}, got)

	// A view, and the same bytes read as another type of the same size.
	v, err := d.Slice(1, 3)
	require.NoError(t, err)
	defer v.Close()
	got, err = cuda.ToSlice[float32](s, v)
	require.NoError(t, err)
	assert.Equal(t, []float32{2, 3, 4}, got)

	// Host-visible memory, written on the GPU, read after the write.
	h, err := ctx.AllocHost(len(src) * 4)
	require.NoError(t, err)
	defer h.Close()
	require.NoError(t, cuda.CopyAsync(s, h, d))
	got, err = cuda.ToSlice[float32](s, h)
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2, 3, 4, 5}, got)
	m, err := ctx.AllocManaged(len(src) * 4)
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, cuda.CopyAsync(s, m, d))
	got, err = cuda.ToSlice[float32](s, m)
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2, 3, 4, 5}, got)
}

func TestAllocFromToSliceErrors(t *testing.T) {
	ctx, s := memSetup(t)
	_, err := cuda.AllocFrom[float32](s, nil)
	assert.ErrorIs(t, err, cuda.ErrInvalidArgument, "empty slice")
	_, err = cuda.AllocFrom(nil, []float32{1})
	assert.Error(t, err, "nil stream")

	d, err := cuda.AllocFrom(s, []byte{1, 2, 3})
	require.NoError(t, err)
	_, err = cuda.ToSlice[float32](s, d)
	assert.ErrorIs(t, err, cuda.ErrInvalidArgument, "3 bytes are no whole float32")
	_, err = cuda.ToSlice[float32](s, nil)
	assert.ErrorIs(t, err, cuda.ErrInvalidArgument, "nil memory")
	require.NoError(t, d.Close())
	_, err = cuda.ToSlice[byte](s, d)
	assert.ErrorIs(t, err, cuda.ErrClosed, "closed memory")

	w, err := cuda.Wrap(ctx, []float32{1})
	require.NoError(t, err)
	defer w.Close()
	_, err = cuda.ToSlice[float32](s, w)
	assert.ErrorIs(t, err, cuda.ErrInvalidArgument, "wrapped memory")
}
