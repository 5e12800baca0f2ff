package cusolver

import (
	"reflect"
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPrecisionTable: every Scalar type's row of dense has every routine; a type
// without a row is an error matching cuda.ErrInvalidArgument.
func TestPrecisionTable(t *testing.T) {
	for _, r := range []any{row[float32](t), row[float64](t), row[complex64](t), row[complex128](t)} {
		v := reflect.ValueOf(r).Elem()
		for i := range v.NumField() {
			assert.False(t, v.Field(i).IsNil(), "%T: %s", r, v.Type().Field(i).Name)
		}
	}
	for _, r := range []any{spectralRowFor[float32, float32](t), spectralRowFor[float64, float64](t),
		spectralRowFor[complex64, float32](t), spectralRowFor[complex128, float64](t)} {
		v := reflect.ValueOf(r).Elem()
		for i := range v.NumField() {
			assert.False(t, v.Field(i).IsNil(), "%T: %s", r, v.Type().Field(i).Name)
		}
	}
	_, ok := spectralOf[complex64, float64]()
	assert.False(t, ok, "a mismatched real type has no row")
	_, err := spectralRow[float64, float32]("syevd")
	assert.ErrorIs(t, err, cuda.ErrInvalidArgument)
	_, err = precisionOf[int8]("potrf")
	assert.ErrorIs(t, err, cuda.ErrInvalidArgument)
	assert.ErrorContains(t, err, "cusolver: potrf: ")
}

func row[T any](t *testing.T) *routines[T] {
	r, err := precisionOf[T]("test")
	require.NoError(t, err)
	return r
}

func spectralRowFor[T Scalar, R Real](t *testing.T) *spectral[T, R] {
	r, err := spectralRow[T, R]("test")
	require.NoError(t, err)
	return r
}
