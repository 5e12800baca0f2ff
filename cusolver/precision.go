package cusolver

import (
	"fmt"
	"reflect"

	"github.com/gocuda/gocuda/cublas/cublasraw"
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
	geqrfBufferSize func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, m, n int32, a *E, lda int32, lwork *int32) error
	geqrf           func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, m, n int32, a *E, lda int32, tau, w *E, lwork int32, info *int32) error
	ormqrBufferSize func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, side Side, t Op, m, n, k int32, a *E, lda int32, tau, cm *E, ldc int32, lwork *int32) error
	ormqr           func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, side Side, t Op, m, n, k int32, a *E, lda int32, tau, cm *E, ldc int32, w *E, lwork int32, info *int32) error
	orgqrBufferSize func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, m, n, k int32, a *E, lda int32, tau *E, lwork *int32) error
	orgqr           func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, m, n, k int32, a *E, lda int32, tau, w *E, lwork int32, info *int32) error
	// trsm is cuBLAS's, for least squares (Gels).
	trsm func(c cudaraw.CUcontext, h cublasraw.CublasHandle, side Side, uplo Fill, t Op, diag cublasraw.CublasDiagType, m, n int32, alpha, a *E, lda int32, b *E, ldb int32) error
}

// dense is the per-precision table, by the element types' CUDA data types: float32
// and float64 rows hold the raw routines themselves; the complex rows convert
// complex64 and complex128 pointers to cuComplex and cuDoubleComplex ones.
var dense = cudalib.ByDataType[any]{
	cudaraw.CUDA_R_32F: &routines[float32]{
		potrfBufferSize: cusolverraw.DnSpotrfBufferSizeIn, potrf: cusolverraw.DnSpotrfIn, potrs: cusolverraw.DnSpotrsIn,
		getrfBufferSize: cusolverraw.DnSgetrfBufferSizeIn, getrf: cusolverraw.DnSgetrfIn, getrs: cusolverraw.DnSgetrsIn,
		geqrfBufferSize: cusolverraw.DnSgeqrfBufferSizeIn, geqrf: cusolverraw.DnSgeqrfIn,
		ormqrBufferSize: cusolverraw.DnSormqrBufferSizeIn, ormqr: cusolverraw.DnSormqrIn,
		orgqrBufferSize: cusolverraw.DnSorgqrBufferSizeIn, orgqr: cusolverraw.DnSorgqrIn,
		trsm: cublasraw.StrsmIn,
	},
	cudaraw.CUDA_R_64F: &routines[float64]{
		potrfBufferSize: cusolverraw.DnDpotrfBufferSizeIn, potrf: cusolverraw.DnDpotrfIn, potrs: cusolverraw.DnDpotrsIn,
		getrfBufferSize: cusolverraw.DnDgetrfBufferSizeIn, getrf: cusolverraw.DnDgetrfIn, getrs: cusolverraw.DnDgetrsIn,
		geqrfBufferSize: cusolverraw.DnDgeqrfBufferSizeIn, geqrf: cusolverraw.DnDgeqrfIn,
		ormqrBufferSize: cusolverraw.DnDormqrBufferSizeIn, ormqr: cusolverraw.DnDormqrIn,
		orgqrBufferSize: cusolverraw.DnDorgqrBufferSizeIn, orgqr: cusolverraw.DnDorgqrIn,
		trsm: cublasraw.DtrsmIn,
	},
	cudaraw.CUDA_C_32F: retyped[complex64](routines[cudaraw.CuComplex]{
		potrfBufferSize: cusolverraw.DnCpotrfBufferSizeIn, potrf: cusolverraw.DnCpotrfIn, potrs: cusolverraw.DnCpotrsIn,
		getrfBufferSize: cusolverraw.DnCgetrfBufferSizeIn, getrf: cusolverraw.DnCgetrfIn, getrs: cusolverraw.DnCgetrsIn,
		geqrfBufferSize: cusolverraw.DnCgeqrfBufferSizeIn, geqrf: cusolverraw.DnCgeqrfIn,
		ormqrBufferSize: cusolverraw.DnCunmqrBufferSizeIn, ormqr: cusolverraw.DnCunmqrIn,
		orgqrBufferSize: cusolverraw.DnCungqrBufferSizeIn, orgqr: cusolverraw.DnCungqrIn,
		trsm: cublasraw.CtrsmIn,
	}),
	cudaraw.CUDA_C_64F: retyped[complex128](routines[cudaraw.CuDoubleComplex]{
		potrfBufferSize: cusolverraw.DnZpotrfBufferSizeIn, potrf: cusolverraw.DnZpotrfIn, potrs: cusolverraw.DnZpotrsIn,
		getrfBufferSize: cusolverraw.DnZgetrfBufferSizeIn, getrf: cusolverraw.DnZgetrfIn, getrs: cusolverraw.DnZgetrsIn,
		geqrfBufferSize: cusolverraw.DnZgeqrfBufferSizeIn, geqrf: cusolverraw.DnZgeqrfIn,
		ormqrBufferSize: cusolverraw.DnZunmqrBufferSizeIn, ormqr: cusolverraw.DnZunmqrIn,
		orgqrBufferSize: cusolverraw.DnZungqrBufferSizeIn, orgqr: cusolverraw.DnZungqrIn,
		trsm: cublasraw.ZtrsmIn,
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
		geqrfBufferSize: func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, m, n int32, a *T, lda int32, lwork *int32) error {
			return r.geqrfBufferSize(c, h, m, n, cudalib.Retype[R](a), lda, lwork)
		},
		geqrf: func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, m, n int32, a *T, lda int32, tau, w *T, lwork int32, info *int32) error {
			return r.geqrf(c, h, m, n, cudalib.Retype[R](a), lda, cudalib.Retype[R](tau), cudalib.Retype[R](w), lwork, info)
		},
		ormqrBufferSize: func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, side Side, t Op, m, n, k int32, a *T, lda int32, tau, cm *T, ldc int32, lwork *int32) error {
			return r.ormqrBufferSize(c, h, side, t, m, n, k, cudalib.Retype[R](a), lda, cudalib.Retype[R](tau), cudalib.Retype[R](cm), ldc, lwork)
		},
		ormqr: func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, side Side, t Op, m, n, k int32, a *T, lda int32, tau, cm *T, ldc int32, w *T, lwork int32, info *int32) error {
			return r.ormqr(c, h, side, t, m, n, k, cudalib.Retype[R](a), lda, cudalib.Retype[R](tau), cudalib.Retype[R](cm), ldc, cudalib.Retype[R](w), lwork, info)
		},
		orgqrBufferSize: func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, m, n, k int32, a *T, lda int32, tau *T, lwork *int32) error {
			return r.orgqrBufferSize(c, h, m, n, k, cudalib.Retype[R](a), lda, cudalib.Retype[R](tau), lwork)
		},
		orgqr: func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, m, n, k int32, a *T, lda int32, tau, w *T, lwork int32, info *int32) error {
			return r.orgqr(c, h, m, n, k, cudalib.Retype[R](a), lda, cudalib.Retype[R](tau), cudalib.Retype[R](w), lwork, info)
		},
		trsm: func(c cudaraw.CUcontext, h cublasraw.CublasHandle, side Side, uplo Fill, t Op, diag cublasraw.CublasDiagType, m, n int32, alpha, a *T, lda int32, b *T, ldb int32) error {
			return r.trsm(c, h, side, uplo, t, diag, m, n, cudalib.Retype[R](alpha), cudalib.Retype[R](a), lda, cudalib.Retype[R](b), ldb)
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

// spectral are one element type E's cuSOLVER routines that also name its real type
// R (singular values, eigenvalues): a row of the per-precision table spectra.
type spectral[E, R any] struct {
	gesvdBufferSize         func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, m, n int32, lwork *int32) error
	gesvd                   func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, jobu, jobvt int8, m, n int32, a *E, lda int32, sv *R, u *E, ldu int32, vt *E, ldvt int32, w *E, lwork int32, rwork *R, info *int32) error
	gesvdjBatchedBufferSize func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, jobz EigMode, m, n int32, a *E, lda int32, sv *R, u *E, ldu int32, v *E, ldv int32, lwork *int32, p cusolverraw.GesvdjInfo, batch int32) error
	gesvdjBatched           func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, jobz EigMode, m, n int32, a *E, lda int32, sv *R, u *E, ldu int32, v *E, ldv int32, w *E, lwork int32, info *int32, p cusolverraw.GesvdjInfo, batch int32) error
	syevdBufferSize         func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, jobz EigMode, uplo Fill, n int32, a *E, lda int32, ev *R, lwork *int32) error
	syevd                   func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, jobz EigMode, uplo Fill, n int32, a *E, lda int32, ev *R, w *E, lwork int32, info *int32) error
	syevjBatchedBufferSize  func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, jobz EigMode, uplo Fill, n int32, a *E, lda int32, ev *R, lwork *int32, p cusolverraw.SyevjInfo, batch int32) error
	syevjBatched            func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, jobz EigMode, uplo Fill, n int32, a *E, lda int32, ev *R, w *E, lwork int32, info *int32, p cusolverraw.SyevjInfo, batch int32) error
}

// spectra is the per-precision table of the routines with real values, by the
// element types' CUDA data types (rows typed in the element type and its real type;
// the complex rows convert pointers as dense's do). Symmetric eigenproblems of real
// types are Hermitian ones of complex types: syevd's row holds heevd for these.
var spectra = cudalib.ByDataType[any]{
	cudaraw.CUDA_R_32F: &spectral[float32, float32]{
		gesvdBufferSize: cusolverraw.DnSgesvdBufferSizeIn, gesvd: cusolverraw.DnSgesvdIn,
		gesvdjBatchedBufferSize: cusolverraw.DnSgesvdjBatchedBufferSizeIn, gesvdjBatched: cusolverraw.DnSgesvdjBatchedIn,
		syevdBufferSize: cusolverraw.DnSsyevdBufferSizeIn, syevd: cusolverraw.DnSsyevdIn,
		syevjBatchedBufferSize: cusolverraw.DnSsyevjBatchedBufferSizeIn, syevjBatched: cusolverraw.DnSsyevjBatchedIn,
	},
	cudaraw.CUDA_R_64F: &spectral[float64, float64]{
		gesvdBufferSize: cusolverraw.DnDgesvdBufferSizeIn, gesvd: cusolverraw.DnDgesvdIn,
		gesvdjBatchedBufferSize: cusolverraw.DnDgesvdjBatchedBufferSizeIn, gesvdjBatched: cusolverraw.DnDgesvdjBatchedIn,
		syevdBufferSize: cusolverraw.DnDsyevdBufferSizeIn, syevd: cusolverraw.DnDsyevdIn,
		syevjBatchedBufferSize: cusolverraw.DnDsyevjBatchedBufferSizeIn, syevjBatched: cusolverraw.DnDsyevjBatchedIn,
	},
	cudaraw.CUDA_C_32F: retypedSpectral[complex64](spectral[cudaraw.CuComplex, float32]{
		gesvdBufferSize: cusolverraw.DnCgesvdBufferSizeIn, gesvd: cusolverraw.DnCgesvdIn,
		gesvdjBatchedBufferSize: cusolverraw.DnCgesvdjBatchedBufferSizeIn, gesvdjBatched: cusolverraw.DnCgesvdjBatchedIn,
		syevdBufferSize: cusolverraw.DnCheevdBufferSizeIn, syevd: cusolverraw.DnCheevdIn,
		syevjBatchedBufferSize: cusolverraw.DnCheevjBatchedBufferSizeIn, syevjBatched: cusolverraw.DnCheevjBatchedIn,
	}),
	cudaraw.CUDA_C_64F: retypedSpectral[complex128](spectral[cudaraw.CuDoubleComplex, float64]{
		gesvdBufferSize: cusolverraw.DnZgesvdBufferSizeIn, gesvd: cusolverraw.DnZgesvdIn,
		gesvdjBatchedBufferSize: cusolverraw.DnZgesvdjBatchedBufferSizeIn, gesvdjBatched: cusolverraw.DnZgesvdjBatchedIn,
		syevdBufferSize: cusolverraw.DnZheevdBufferSizeIn, syevd: cusolverraw.DnZheevdIn,
		syevjBatchedBufferSize: cusolverraw.DnZheevjBatchedBufferSizeIn, syevjBatched: cusolverraw.DnZheevjBatchedIn,
	}),
}

// retypedSpectral is retyped for spectra's rows: r's routines, of the raw element
// type E, as routines of T, a Go type of E's layout; the real type stays.
func retypedSpectral[T, E, R any](r spectral[E, R]) *spectral[T, R] {
	return &spectral[T, R]{
		gesvdBufferSize: r.gesvdBufferSize,
		gesvd: func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, jobu, jobvt int8, m, n int32, a *T, lda int32, sv *R, u *T, ldu int32, vt *T, ldvt int32, w *T, lwork int32, rwork *R, info *int32) error {
			return r.gesvd(c, h, jobu, jobvt, m, n, cudalib.Retype[E](a), lda, sv, cudalib.Retype[E](u), ldu, cudalib.Retype[E](vt), ldvt, cudalib.Retype[E](w), lwork, rwork, info)
		},
		gesvdjBatchedBufferSize: func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, jobz EigMode, m, n int32, a *T, lda int32, sv *R, u *T, ldu int32, v *T, ldv int32, lwork *int32, p cusolverraw.GesvdjInfo, batch int32) error {
			return r.gesvdjBatchedBufferSize(c, h, jobz, m, n, cudalib.Retype[E](a), lda, sv, cudalib.Retype[E](u), ldu, cudalib.Retype[E](v), ldv, lwork, p, batch)
		},
		gesvdjBatched: func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, jobz EigMode, m, n int32, a *T, lda int32, sv *R, u *T, ldu int32, v *T, ldv int32, w *T, lwork int32, info *int32, p cusolverraw.GesvdjInfo, batch int32) error {
			return r.gesvdjBatched(c, h, jobz, m, n, cudalib.Retype[E](a), lda, sv, cudalib.Retype[E](u), ldu, cudalib.Retype[E](v), ldv, cudalib.Retype[E](w), lwork, info, p, batch)
		},
		syevdBufferSize: func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, jobz EigMode, uplo Fill, n int32, a *T, lda int32, ev *R, lwork *int32) error {
			return r.syevdBufferSize(c, h, jobz, uplo, n, cudalib.Retype[E](a), lda, ev, lwork)
		},
		syevd: func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, jobz EigMode, uplo Fill, n int32, a *T, lda int32, ev *R, w *T, lwork int32, info *int32) error {
			return r.syevd(c, h, jobz, uplo, n, cudalib.Retype[E](a), lda, ev, cudalib.Retype[E](w), lwork, info)
		},
		syevjBatchedBufferSize: func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, jobz EigMode, uplo Fill, n int32, a *T, lda int32, ev *R, lwork *int32, p cusolverraw.SyevjInfo, batch int32) error {
			return r.syevjBatchedBufferSize(c, h, jobz, uplo, n, cudalib.Retype[E](a), lda, ev, lwork, p, batch)
		},
		syevjBatched: func(c cudaraw.CUcontext, h cusolverraw.CusolverDnHandle, jobz EigMode, uplo Fill, n int32, a *T, lda int32, ev *R, w *T, lwork int32, info *int32, p cusolverraw.SyevjInfo, batch int32) error {
			return r.syevjBatched(c, h, jobz, uplo, n, cudalib.Retype[E](a), lda, ev, cudalib.Retype[E](w), lwork, info, p, batch)
		},
	}
}

// spectralOf returns T's row of spectra if R is T's real type (float32 for float32
// and complex64, float64 for float64 and complex128).
func spectralOf[T, R any]() (*spectral[T, R], bool) {
	return cudalib.Row[*spectral[T, R], T](&spectra)
}

// withReal runs f32 when T's real type is float32, else f64: the operations with
// real values are generic in T alone, and run their body instantiated with T's real
// type (a type without a row gets f64's error from spectralOf).
func withReal[T any](f32, f64 func() (*Info, error)) (*Info, error) {
	if _, ok := spectralOf[T, float32](); ok {
		return f32()
	}
	return f64()
}
