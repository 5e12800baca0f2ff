package cudalib_test

import (
	"reflect"
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cudalib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dataType is DataType's answer for T, with T's name.
type dataType struct {
	typ string
	dt  cudaraw.CudaDataType
	ok  bool
}

func dataTypeOf[T any]() dataType {
	dt, ok := cudalib.DataType[T]()
	return dataType{reflect.TypeFor[T]().String(), dt, ok}
}

// TestDataType: each Go element type that CUDA has a data type for maps to its
// own, which indexes a ByDataType table; other types, types defined on those
// included, have none.
func TestDataType(t *testing.T) {
	type celsius float32
	got := []dataType{
		dataTypeOf[int8](), dataTypeOf[uint8](), dataTypeOf[int16](), dataTypeOf[uint16](),
		dataTypeOf[int32](), dataTypeOf[uint32](), dataTypeOf[int64](), dataTypeOf[uint64](),
		dataTypeOf[cuda.Float16](), dataTypeOf[cuda.BFloat16](), dataTypeOf[float32](), dataTypeOf[float64](),
		dataTypeOf[complex64](), dataTypeOf[complex128](),
		dataTypeOf[celsius](), dataTypeOf[int](), dataTypeOf[string](), dataTypeOf[cudaraw.CuComplex](),
	}
	assert.Equal(t, []dataType{
		{"int8", cudaraw.CUDA_R_8I, true},
		{"uint8", cudaraw.CUDA_R_8U, true},
		{"int16", cudaraw.CUDA_R_16I, true},
		{"uint16", cudaraw.CUDA_R_16U, true},
		{"int32", cudaraw.CUDA_R_32I, true},
		{"uint32", cudaraw.CUDA_R_32U, true},
		{"int64", cudaraw.CUDA_R_64I, true},
		{"uint64", cudaraw.CUDA_R_64U, true},
		{"cuda.Float16", cudaraw.CUDA_R_16F, true},
		{"cuda.BFloat16", cudaraw.CUDA_R_16BF, true},
		{"float32", cudaraw.CUDA_R_32F, true},
		{"float64", cudaraw.CUDA_R_64F, true},
		{"complex64", cudaraw.CUDA_C_32F, true},
		{"complex128", cudaraw.CUDA_C_64F, true},
		{"cudalib_test.celsius", 0, false},
		{"int", 0, false},
		{"string", 0, false},
		{"cudaraw.CuComplex", 0, false}, // the raw layer's type: Go code names complex64
	}, got)
	var owner cudalib.ByDataType[string]
	for _, g := range got {
		if g.ok {
			assert.Empty(t, owner[g.dt], "%s's data type %v", g.typ, g.dt)
			owner[g.dt] = g.typ
		}
	}
}

type twice[T any] struct{ f func(T) T }

// Row finds a type's row, typed in it, and no row for a type without a data type,
// without an entry, or with an entry of another row type.
func TestRow(t *testing.T) {
	tab := cudalib.ByDataType[any]{
		cudaraw.CUDA_R_32F: &twice[float32]{func(x float32) float32 { return 2 * x }},
		cudaraw.CUDA_R_64F: &twice[float32]{}, // mistyped: found for no one
	}
	r, ok := cudalib.Row[*twice[float32], float32](&tab)
	require.True(t, ok)
	assert.Equal(t, float32(3), r.f(1.5))
	_, ok = cudalib.Row[*twice[float64], float64](&tab)
	assert.False(t, ok, "an entry of another row type")
	_, ok = cudalib.Row[*twice[int32], int32](&tab)
	assert.False(t, ok, "no entry")
	_, ok = cudalib.Row[*twice[int], int](&tab)
	assert.False(t, ok, "no data type")

	c := complex64(complex(1, 2))
	p := cudalib.Retype[cudaraw.CuComplex](&c)
	assert.Equal(t, cudaraw.CuComplex{X: 1, Y: 2}, *p)
}
