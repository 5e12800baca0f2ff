package cudalib_test

import (
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/cudalib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const kernelsPTX = `.version 7.0
.target sm_70
.address_size 64
.visible .entry k_a() { ret; }
.visible .entry k_b() { ret; }
`

var testKernels = cudalib.NewKernels([]byte(kernelsPTX))

// A library's kernels load once per context and go with it: a context made after
// another's Close loads its own module, and its kernels launch.
func TestKernels(t *testing.T) {
	ctx, s := cudatest.Stream(t)
	_, err := testKernels.Function(nil, "k_a")
	assert.ErrorIs(t, err, cuda.ErrInvalidArgument)

	a, err := testKernels.Function(ctx, "k_a")
	require.NoError(t, err)
	b, err := testKernels.Function(ctx, "k_b")
	require.NoError(t, err)
	require.NoError(t, a.Launch(s, cuda.D1(1), cuda.D1(1), 0))
	require.NoError(t, b.Launch(s, cuda.D1(1), cuda.D1(1), 0))
	_, err = testKernels.Function(ctx, "k_none")
	assert.Error(t, err)

	for range 3 {
		other, err := cuda.NewContext(0, 0)
		require.NoError(t, err)
		os, err := other.NewStream()
		require.NoError(t, err)
		f, err := testKernels.Function(other, "k_a")
		require.NoError(t, err)
		require.NoError(t, f.Launch(os, cuda.D1(1), cuda.D1(1), 0))
		require.NoError(t, os.Close())
		require.NoError(t, other.Close())
		_, err = testKernels.Function(other, "k_a")
		assert.ErrorIs(t, err, cuda.ErrClosed, "a closed context loads nothing")
	}
	require.NoError(t, s.Synchronize())
}

// PTX that is not ASCII, which the driver refuses, panics where it is made.
func TestKernelsNonASCII(t *testing.T) {
	assert.PanicsWithValue(t, "cudalib: NewKernels: PTX line 2 holds a byte that is not ASCII (0xc2)", func() {
		cudalib.NewKernels([]byte(".version 7.0\n// n = a·b\n"))
	})
}
