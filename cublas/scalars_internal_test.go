package cublas

import (
	"testing"
	"unsafe"

	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cuda"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// checkScalars: setScalars puts alpha at the start of sc and beta at its second
// element, whatever the type, and returns those addresses.
func checkScalars[T comparable](t *testing.T, alpha, beta T) {
	t.Helper()
	sc := new(scalars)
	a, b := setScalars(sc, alpha, beta)
	assert.Equal(t, unsafe.Pointer(&sc[0]), unsafe.Pointer(a))
	assert.Equal(t, unsafe.Pointer(&sc[1]), unsafe.Pointer(b))
	assert.Equal(t, alpha, *(*T)(unsafe.Pointer(&sc[0])))
	assert.Equal(t, beta, *(*T)(unsafe.Pointer(&sc[1])))
	one := setScalar(sc, beta)
	assert.Equal(t, unsafe.Pointer(&sc[0]), unsafe.Pointer(one))
	assert.Equal(t, beta, *one)
}

func TestScalars(t *testing.T) {
	checkScalars(t, float32(1.5), float32(-2))
	checkScalars(t, 1.5, -2.0)
	checkScalars(t, complex64(1+2i), complex64(-3i))
	checkScalars(t, 1+2i, -3i)
	checkScalars(t, cuda.NewFloat16(1.5), cuda.NewFloat16(-2))
	checkScalars(t, int32(7), int32(-9))
	assert.LessOrEqual(t, unsafe.Sizeof(complex128(0)), unsafe.Sizeof(scalars{})/2, "each scalar has room for a complex128")
}

// TestExScalars: GemmMixed's scalars go to the compute kind's scale type, and
// Compute32I takes only int32 values.
func TestExScalars(t *testing.T) {
	sc := new(scalars)
	for _, c := range []struct {
		compute cublasraw.CublasComputeType
		check   func(a, b unsafe.Pointer)
	}{
		{cublasraw.CUBLAS_COMPUTE_16F, func(a, b unsafe.Pointer) {
			assert.Equal(t, cuda.NewFloat16(1.5), *(*cuda.Float16)(a))
			assert.Equal(t, cuda.NewFloat16(-2), *(*cuda.Float16)(b))
		}},
		{cublasraw.CUBLAS_COMPUTE_32I, func(a, b unsafe.Pointer) {
			assert.Equal(t, int32(1), *(*int32)(a))
			assert.Equal(t, int32(-2), *(*int32)(b))
		}},
		{cublasraw.CUBLAS_COMPUTE_64F, func(a, b unsafe.Pointer) {
			assert.Equal(t, 1.5, *(*float64)(a))
			assert.Equal(t, -2.0, *(*float64)(b))
		}},
		{cublasraw.CUBLAS_COMPUTE_32F, func(a, b unsafe.Pointer) {
			assert.Equal(t, float32(1.5), *(*float32)(a))
			assert.Equal(t, float32(-2), *(*float32)(b))
		}},
	} {
		alpha := 1.5
		if c.compute == cublasraw.CUBLAS_COMPUTE_32I {
			alpha = 1
		}
		require.NoError(t, checkExScalars(c.compute, alpha, -2))
		a, b := exScalars(sc, c.compute, alpha, -2)
		assert.Equal(t, unsafe.Pointer(&sc[0]), a, "%v", c.compute)
		assert.Equal(t, unsafe.Pointer(&sc[1]), b, "%v", c.compute)
		c.check(a, b)
	}
	assert.ErrorIs(t, checkExScalars(cublasraw.CUBLAS_COMPUTE_32I, 1.5, 0), cuda.ErrInvalidArgument)
	assert.NoError(t, checkExScalars(cublasraw.CUBLAS_COMPUTE_32F, 1.5, 0.25))
}
