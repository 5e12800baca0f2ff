package cublas

import (
	"reflect"
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPrecisionTable: each element type's row of blas has the routines that the
// operations its constraints admit call, and no others; a type without a row is an
// error matching cuda.ErrInvalidArgument.
func TestPrecisionTable(t *testing.T) {
	scalar := []string{"gemm", "gemmStridedBatched", "gemv", "axpy", "scal"}
	level3 := []string{"trsm", "syrk", "geam", "gemmBatched"}
	real := append(append(scalar[:len(scalar):len(scalar)], "dot", "nrm2"), level3...)
	real = append(real, "lt")
	complexes := append(append(scalar[:len(scalar):len(scalar)], level3...), "herk")
	assert.Equal(t, real, columns[float32](t))
	assert.Equal(t, real, columns[float64](t))
	assert.Equal(t, complexes, columns[complex64](t))
	assert.Equal(t, complexes, columns[complex128](t))
	assert.Equal(t, []string{"gemm", "gemmStridedBatched"}, columns[cuda.Float16](t))
	_, err := precisionOf[int8]("gemm")
	assert.ErrorIs(t, err, cuda.ErrInvalidArgument)
	assert.ErrorContains(t, err, "cublas: gemm: ")
}

// columns names the routines of T's row.
func columns[T any](t *testing.T) []string {
	r, err := precisionOf[T]("test")
	require.NoError(t, err)
	var names []string
	v := reflect.ValueOf(r).Elem()
	for i := range v.NumField() {
		if !v.Field(i).IsNil() {
			names = append(names, v.Type().Field(i).Name)
		}
	}
	return names
}
