package cufft

import (
	"fmt"
	"reflect"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cudalib"
	"github.com/gocuda/gocuda/cufft/cufftraw"
)

// kind is one transform of a precision: cuFFT's type and the name errors give it.
type kind struct {
	typ cufftraw.CufftType
	op  string
}

// complexRow is a complex element type T's transform (C2C or Z2Z), typed in T.
type complexRow[T any] struct {
	kind
	exec func(c cudaraw.CUcontext, p cufftraw.CufftHandle, in, out *T, dir int32) error
}

// realRow is a real element type R's transforms with its complex partner C of the
// same precision (R2C and C2R, or D2Z and Z2D), typed in both: a pair of another
// precision finds no row.
type realRow[R, C any] struct {
	forward, backward kind
	r2c               func(c cudaraw.CUcontext, p cufftraw.CufftHandle, in *R, out *C) error
	c2r               func(c cudaraw.CUcontext, p cufftraw.CufftHandle, in *C, out *R) error
}

// transforms is the per-precision table, by the element types' CUDA data types:
// the complex types' rows by theirs, the real transforms by the real type's.
var transforms = cudalib.ByDataType[any]{
	cudaraw.CUDA_C_32F: &complexRow[complex64]{kind{cufftraw.CUFFT_C2C, "c2c"},
		func(c cudaraw.CUcontext, p cufftraw.CufftHandle, in, out *complex64, dir int32) error {
			return cufftraw.ExecC2CIn(c, p, cudalib.Retype[cudaraw.CuComplex](in), cudalib.Retype[cudaraw.CuComplex](out), dir)
		}},
	cudaraw.CUDA_C_64F: &complexRow[complex128]{kind{cufftraw.CUFFT_Z2Z, "z2z"},
		func(c cudaraw.CUcontext, p cufftraw.CufftHandle, in, out *complex128, dir int32) error {
			return cufftraw.ExecZ2ZIn(c, p, cudalib.Retype[cudaraw.CuDoubleComplex](in), cudalib.Retype[cudaraw.CuDoubleComplex](out), dir)
		}},
	cudaraw.CUDA_R_32F: &realRow[float32, complex64]{
		forward: kind{cufftraw.CUFFT_R2C, "r2c"}, backward: kind{cufftraw.CUFFT_C2R, "c2r"},
		r2c: func(c cudaraw.CUcontext, p cufftraw.CufftHandle, in *float32, out *complex64) error {
			return cufftraw.ExecR2CIn(c, p, cudalib.Retype[cufftraw.CufftReal](in), cudalib.Retype[cudaraw.CuComplex](out))
		},
		c2r: func(c cudaraw.CUcontext, p cufftraw.CufftHandle, in *complex64, out *float32) error {
			return cufftraw.ExecC2RIn(c, p, cudalib.Retype[cudaraw.CuComplex](in), cudalib.Retype[cufftraw.CufftReal](out))
		},
	},
	cudaraw.CUDA_R_64F: &realRow[float64, complex128]{
		forward: kind{cufftraw.CUFFT_D2Z, "d2z"}, backward: kind{cufftraw.CUFFT_Z2D, "z2d"},
		r2c: func(c cudaraw.CUcontext, p cufftraw.CufftHandle, in *float64, out *complex128) error {
			return cufftraw.ExecD2ZIn(c, p, cudalib.Retype[cufftraw.CufftDoubleReal](in), cudalib.Retype[cudaraw.CuDoubleComplex](out))
		},
		c2r: func(c cudaraw.CUcontext, p cufftraw.CufftHandle, in *complex128, out *float64) error {
			return cufftraw.ExecZ2DIn(c, p, cudalib.Retype[cudaraw.CuDoubleComplex](in), cudalib.Retype[cufftraw.CufftDoubleReal](out))
		},
	},
}

// noTransform is the error of a pair of element types without a row: a real and
// a complex type of different precisions (the constraints keep other types out).
func noTransform[In, Out any](op string) error {
	return fmt.Errorf("cufft: %s: %w: no transform from %v to %v (real and complex types of different precisions)",
		op, cuda.ErrInvalidArgument, reflect.TypeFor[In](), reflect.TypeFor[Out]())
}
