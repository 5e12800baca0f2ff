package curand

import (
	"fmt"
	"reflect"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cudalib"
	"github.com/gocuda/gocuda/curand/curandraw"
)

// distributions are one element type E's cuRAND routines: a row of the
// per-precision table floats. cuRAND has no half-precision generator: the half row
// has none, and its calls draw float32s and convert them (viaFloat32).
type distributions[E any] struct {
	viaFloat32 bool
	uniform    func(c cudaraw.CUcontext, g curandraw.CurandGenerator, out *E, n uint64) error
	normal     func(c cudaraw.CUcontext, g curandraw.CurandGenerator, out *E, n uint64, mean, stddev E) error
	logNormal  func(c cudaraw.CUcontext, g curandraw.CurandGenerator, out *E, n uint64, mean, stddev E) error
}

// floats is the per-precision table, by the element types' CUDA data types.
var floats = cudalib.ByDataType[any]{
	cudaraw.CUDA_R_32F: &distributions[float32]{
		uniform: curandraw.GenerateUniformIn, normal: curandraw.GenerateNormalIn, logNormal: curandraw.GenerateLogNormalIn,
	},
	cudaraw.CUDA_R_64F: &distributions[float64]{
		uniform: curandraw.GenerateUniformDoubleIn, normal: curandraw.GenerateNormalDoubleIn,
		logNormal: curandraw.GenerateLogNormalDoubleIn,
	},
	cudaraw.CUDA_R_16F: &distributions[cuda.Float16]{viaFloat32: true},
}

// precisionOf returns T's row of floats: an error matching cuda.ErrInvalidArgument
// for a type without one, which Float keeps out.
func precisionOf[T any](op string) (*distributions[T], error) {
	if r, ok := cudalib.Row[*distributions[T], T](&floats); ok {
		return r, nil
	}
	return nil, fmt.Errorf("curand: %s: %w: no cuRAND routines for element type %v", op, cuda.ErrInvalidArgument, reflect.TypeFor[T]())
}
