package cusolver

import (
	"fmt"
	"reflect"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cudalib"
	"github.com/gocuda/gocuda/cusolver/cusolverraw"
)

// routines are one element type E's cuSOLVER routines, typed in E (the workspace
// too): a row of the per-precision table dense.
type routines[E any] struct {
	potrfBufferSize func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, uplo Fill, n int32, a *E, lda int32, lwork *int32) error
	potrf           func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, uplo Fill, n int32, a *E, lda int32, w *E, lwork int32, info *int32) error
	potrs           func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, uplo Fill, n, nrhs int32, a *E, lda int32, b *E, ldb int32, info *int32) error
	getrfBufferSize func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, m, n int32, a *E, lda int32, lwork *int32) error
	getrf           func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, m, n int32, a *E, lda int32, w *E, ipiv, info *int32) error
	getrs           func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, t Op, n, nrhs int32, a *E, lda int32, ipiv *int32, b *E, ldb int32, info *int32) error
}

// dense is the per-precision table, by the element types' CUDA data types: float32
// and float64 rows hold the raw routines themselves; the complex rows convert
// complex64 and complex128 pointers to cuComplex and cuDoubleComplex ones.
var dense = cudalib.ByDataType[any]{
	cudaraw.CUDA_R_32F: &routines[float32]{
		potrfBufferSize: cusolverraw.DnSpotrfBufferSizeIn, potrf: cusolverraw.DnSpotrfIn, potrs: cusolverraw.DnSpotrsIn,
		getrfBufferSize: cusolverraw.DnSgetrfBufferSizeIn, getrf: cusolverraw.DnSgetrfIn, getrs: cusolverraw.DnSgetrsIn,
	},
	cudaraw.CUDA_R_64F: &routines[float64]{
		potrfBufferSize: cusolverraw.DnDpotrfBufferSizeIn, potrf: cusolverraw.DnDpotrfIn, potrs: cusolverraw.DnDpotrsIn,
		getrfBufferSize: cusolverraw.DnDgetrfBufferSizeIn, getrf: cusolverraw.DnDgetrfIn, getrs: cusolverraw.DnDgetrsIn,
	},
	cudaraw.CUDA_C_32F: retyped[complex64](routines[cudaraw.CuComplex]{
		potrfBufferSize: cusolverraw.DnCpotrfBufferSizeIn, potrf: cusolverraw.DnCpotrfIn, potrs: cusolverraw.DnCpotrsIn,
		getrfBufferSize: cusolverraw.DnCgetrfBufferSizeIn, getrf: cusolverraw.DnCgetrfIn, getrs: cusolverraw.DnCgetrsIn,
	}),
	cudaraw.CUDA_C_64F: retyped[complex128](routines[cudaraw.CuDoubleComplex]{
		potrfBufferSize: cusolverraw.DnZpotrfBufferSizeIn, potrf: cusolverraw.DnZpotrfIn, potrs: cusolverraw.DnZpotrsIn,
		getrfBufferSize: cusolverraw.DnZgetrfBufferSizeIn, getrf: cusolverraw.DnZgetrfIn, getrs: cusolverraw.DnZgetrsIn,
	}),
}

// retyped returns r, the routines of the raw element type R, as routines of T, a Go
// type of R's layout: each converts its pointers and calls r's.
func retyped[T, R any](r routines[R]) *routines[T] {
	return &routines[T]{
		potrfBufferSize: func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, uplo Fill, n int32, a *T, lda int32, lwork *int32) error {
			return r.potrfBufferSize(c, h, uplo, n, cudalib.Retype[R](a), lda, lwork)
		},
		potrf: func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, uplo Fill, n int32, a *T, lda int32, w *T, lwork int32, info *int32) error {
			return r.potrf(c, h, uplo, n, cudalib.Retype[R](a), lda, cudalib.Retype[R](w), lwork, info)
		},
		potrs: func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, uplo Fill, n, nrhs int32, a *T, lda int32, b *T, ldb int32, info *int32) error {
			return r.potrs(c, h, uplo, n, nrhs, cudalib.Retype[R](a), lda, cudalib.Retype[R](b), ldb, info)
		},
		getrfBufferSize: func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, m, n int32, a *T, lda int32, lwork *int32) error {
			return r.getrfBufferSize(c, h, m, n, cudalib.Retype[R](a), lda, lwork)
		},
		getrf: func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, m, n int32, a *T, lda int32, w *T, ipiv, info *int32) error {
			return r.getrf(c, h, m, n, cudalib.Retype[R](a), lda, cudalib.Retype[R](w), ipiv, info)
		},
		getrs: func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, t Op, n, nrhs int32, a *T, lda int32, ipiv *int32, b *T, ldb int32, info *int32) error {
			return r.getrs(c, h, t, n, nrhs, cudalib.Retype[R](a), lda, ipiv, cudalib.Retype[R](b), ldb, info)
		},
	}
}

// precisionOf returns T's row of dense: an error matching cuda.ErrInvalidArgument
// for a type without one, which Scalar keeps out.
func precisionOf[T any](op string) (*routines[T], error) {
	if r, ok := cudalib.Row[*routines[T], T](&dense); ok {
		return r, nil
	}
	return nil, fmt.Errorf("cusolver: %s: %w: no cuSOLVER routines for element type %v", op, cuda.ErrInvalidArgument, reflect.TypeFor[T]())
}
