package cublas

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMatrixAgreesWithExtent: the operands' check (matrix, with one matrix's span
// in line) passes exactly the operands that extent's shape and span allow, with
// DevicePtr's address, and batched fails on exactly the others; over random shapes
// (negative, zero, past int32, strides that wrap around) and memory of two element
// types and several sizes, nil and closed.
func TestMatrixAgreesWithExtent(t *testing.T) {
	_, s := cudatest.Stream(t)
	var mems []cuda.Memory
	for _, n := range []int{0, 1, 12, 100} {
		f, err := cuda.AllocFor[float32](s, max(n, 1))
		require.NoError(t, err)
		t.Cleanup(func() { f.Close() })
		d, err := cuda.AllocFor[float64](s, max(n, 1))
		require.NoError(t, err)
		t.Cleanup(func() { d.Close() })
		mems = append(mems, f, d)
	}
	closed, err := cuda.AllocFor[float32](s, 12)
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	var nilBuf *cuda.DeviceBuffer
	mems = append(mems, nil, nilBuf, closed)

	r := rand.New(rand.NewPCG(1, 2))
	pick := func() int {
		switch r.IntN(6) {
		case 0:
			return -r.IntN(3) - 1
		case 1:
			return 0
		case 2:
			return []int{maxInt32, maxInt32 + 1, math.MaxInt / 3, 1 << 62}[r.IntN(4)]
		default:
			return r.IntN(12)
		}
	}
	passed := 0
	for range 20000 {
		m := mems[r.IntN(len(mems))]
		rows, cols, ld, stride, batch := pick(), pick(), pick(), pick(), 1
		if r.IntN(2) == 0 {
			batch = pick()
		}
		need, fits := extent(rows, cols, ld, stride, batch)
		want, err := cuda.DevicePtr[float32](m)
		fits = fits && err == nil && m.Size()/4 >= need
		p, ok := matrix[float32](m, rows, cols, ld, stride, batch)
		require.Equal(t, fits, ok, "%v×%v ld %v stride %v batch %v", rows, cols, ld, stride, batch)
		q, err := batched[float32]("gemm", "A", m, rows, cols, ld, stride, batch)
		require.Equal(t, ok, err == nil, err)
		if ok {
			assert.Equal(t, want, p)
			assert.Equal(t, want, q)
			passed++
		}
	}
	assert.Greater(t, passed, 100, "some shapes pass")
}

// TestGemmErrorOrder: with several bad arguments, a GEMM reports the first in the
// order A, B, C, transpositions, as one check after another would.
func TestGemmErrorOrder(t *testing.T) {
	_, s := cudatest.Stream(t)
	a, err := cuda.AllocFor[float32](s, 12)
	require.NoError(t, err)
	defer a.Close()
	small, err := cuda.AllocFor[float32](s, 2)
	require.NoError(t, err)
	defer small.Close()
	for want, err := range map[string]error{
		"A needs":       Gemm[float32](s, 7, 9, 3, 4, 1, 1, small, 3, small, 4, 0, small, 3),
		"B needs":       Gemm[float32](s, 7, 9, 3, 4, 1, 1, a, 3, small, 4, 0, small, 3),
		"C needs":       Gemm[float32](s, 7, 9, 3, 4, 1, 1, a, 3, a, 4, 0, small, 3),
		"transposition": Gemm[float32](s, 7, 9, 3, 4, 1, 1, a, 3, a, 4, 0, a, 3),
	} {
		require.ErrorIs(t, err, cuda.ErrInvalidArgument, want)
		assert.Contains(t, err.Error(), want)
	}
}
