package cublas

import (
	"fmt"
	"reflect"
	"unsafe"

	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cudalib"
)

// routines are one element type E's cuBLAS routines, typed in E: a row of the
// per-precision table blas. A routine that E has none of is nil; the constraint of
// the function that calls it keeps E out (Gemv's Scalar, Dot's Real).
type routines[E any] struct {
	gemm               func(c cudaraw.CUcontext, h cublasraw.CublasHandle, ta, tb Op, m, n, k int32, alpha, a *E, lda int32, b *E, ldb int32, beta, cc *E, ldc int32) error
	gemmStridedBatched func(c cudaraw.CUcontext, h cublasraw.CublasHandle, ta, tb Op, m, n, k int32, alpha, a *E, lda int32, sa int64, b *E, ldb int32, sb int64, beta, cc *E, ldc int32, sc int64, batch int32) error
	gemv               func(c cudaraw.CUcontext, h cublasraw.CublasHandle, t Op, m, n int32, alpha, a *E, lda int32, x *E, incx int32, beta, y *E, incy int32) error
	axpy               func(c cudaraw.CUcontext, h cublasraw.CublasHandle, n int32, alpha, x *E, incx int32, y *E, incy int32) error
	scal               func(c cudaraw.CUcontext, h cublasraw.CublasHandle, n int32, alpha, x *E, incx int32) error
	dot                func(c cudaraw.CUcontext, h cublasraw.CublasHandle, n int32, x *E, incx int32, y *E, incy int32, r *E) error
	nrm2               func(c cudaraw.CUcontext, h cublasraw.CublasHandle, n int32, x *E, incx int32, r *E) error
	trsm               func(c cudaraw.CUcontext, h cublasraw.CublasHandle, side Side, uplo Fill, t Op, diag Diag, m, n int32, alpha, a *E, lda int32, b *E, ldb int32) error
	syrk               func(c cudaraw.CUcontext, h cublasraw.CublasHandle, uplo Fill, t Op, n, k int32, alpha, a *E, lda int32, beta, cc *E, ldc int32) error
	geam               func(c cudaraw.CUcontext, h cublasraw.CublasHandle, ta, tb Op, m, n int32, alpha, a *E, lda int32, beta, b *E, ldb int32, cc *E, ldc int32) error
	gemmBatched        func(c cudaraw.CUcontext, h cublasraw.CublasHandle, ta, tb Op, m, n, k int32, alpha *E, a **E, lda int32, b **E, ldb int32, beta *E, cc **E, ldc int32, batch int32) error
	// herk is the complex types' Hermitian rank-k update, whose scalars are real:
	// it stores alpha and beta in sc in its precision.
	herk func(c cudaraw.CUcontext, h cublasraw.CublasHandle, uplo Fill, t Op, n, k int32, sc *scalars, alpha float64, a *E, lda int32, beta float64, cc *E, ldc int32) error
	// lt is the element type's cuBLASLt types (Matmul); nil: none.
	lt *ltTypes
}

// blas is the per-precision table, by the element types' CUDA data types: float32
// and float64 rows hold the raw routines themselves; the complex rows convert
// complex64 and complex128 pointers to cuComplex and cuDoubleComplex ones; half
// precision has the GEMMs only, through cublasGemmEx and computed in half.
var blas = cudalib.ByDataType[any]{
	cudaraw.CUDA_R_32F: &routines[float32]{
		gemm: cublasraw.SgemmIn, gemmStridedBatched: cublasraw.SgemmStridedBatchedIn, gemv: cublasraw.SgemvIn,
		axpy: cublasraw.SaxpyIn, scal: cublasraw.SscalIn, dot: cublasraw.SdotIn, nrm2: cublasraw.Snrm2In,
		trsm: cublasraw.StrsmIn, syrk: cublasraw.SsyrkIn, geam: cublasraw.SgeamIn, gemmBatched: cublasraw.SgemmBatchedIn,
		lt: &ltTypes{cudaraw.CUDA_R_32F, cublasraw.CUBLAS_COMPUTE_32F},
	},
	cudaraw.CUDA_R_64F: &routines[float64]{
		gemm: cublasraw.DgemmIn, gemmStridedBatched: cublasraw.DgemmStridedBatchedIn, gemv: cublasraw.DgemvIn,
		axpy: cublasraw.DaxpyIn, scal: cublasraw.DscalIn, dot: cublasraw.DdotIn, nrm2: cublasraw.Dnrm2In,
		trsm: cublasraw.DtrsmIn, syrk: cublasraw.DsyrkIn, geam: cublasraw.DgeamIn, gemmBatched: cublasraw.DgemmBatchedIn,
		lt: &ltTypes{cudaraw.CUDA_R_64F, cublasraw.CUBLAS_COMPUTE_64F},
	},
	cudaraw.CUDA_C_32F: retyped[complex64](routines[cudaraw.CuComplex]{
		gemm: cublasraw.CgemmIn, gemmStridedBatched: cublasraw.CgemmStridedBatchedIn, gemv: cublasraw.CgemvIn,
		axpy: cublasraw.CaxpyIn, scal: cublasraw.CscalIn,
		trsm: cublasraw.CtrsmIn, syrk: cublasraw.CsyrkIn, geam: cublasraw.CgeamIn, gemmBatched: cublasraw.CgemmBatchedIn,
		herk: func(c cudaraw.CUcontext, h cublasraw.CublasHandle, uplo Fill, t Op, n, k int32, sc *scalars, alpha float64, a *cudaraw.CuComplex, lda int32, beta float64, cc *cudaraw.CuComplex, ldc int32) error {
			pa, pb := setScalars(sc, float32(alpha), float32(beta))
			return cublasraw.CherkIn(c, h, uplo, t, n, k, pa, a, lda, pb, cc, ldc)
		},
	}),
	cudaraw.CUDA_C_64F: retyped[complex128](routines[cudaraw.CuDoubleComplex]{
		gemm: cublasraw.ZgemmIn, gemmStridedBatched: cublasraw.ZgemmStridedBatchedIn, gemv: cublasraw.ZgemvIn,
		axpy: cublasraw.ZaxpyIn, scal: cublasraw.ZscalIn,
		trsm: cublasraw.ZtrsmIn, syrk: cublasraw.ZsyrkIn, geam: cublasraw.ZgeamIn, gemmBatched: cublasraw.ZgemmBatchedIn,
		herk: func(c cudaraw.CUcontext, h cublasraw.CublasHandle, uplo Fill, t Op, n, k int32, sc *scalars, alpha float64, a *cudaraw.CuDoubleComplex, lda int32, beta float64, cc *cudaraw.CuDoubleComplex, ldc int32) error {
			pa, pb := setScalars(sc, alpha, beta)
			return cublasraw.ZherkIn(c, h, uplo, t, n, k, pa, a, lda, pb, cc, ldc)
		},
	}),
	cudaraw.CUDA_R_16F: &routines[cuda.Float16]{
		gemm: func(c cudaraw.CUcontext, h cublasraw.CublasHandle, ta, tb Op, m, n, k int32, alpha, a *cuda.Float16, lda int32,
			b *cuda.Float16, ldb int32, beta, cc *cuda.Float16, ldc int32) error {
			return cublasraw.GemmExIn(c, h, ta, tb, m, n, k, unsafe.Pointer(alpha), unsafe.Pointer(a), cudaraw.CUDA_R_16F, lda,
				unsafe.Pointer(b), cudaraw.CUDA_R_16F, ldb, unsafe.Pointer(beta), unsafe.Pointer(cc), cudaraw.CUDA_R_16F, ldc,
				cublasraw.CUBLAS_COMPUTE_16F, cublasraw.CUBLAS_GEMM_DEFAULT)
		},
		gemmStridedBatched: func(c cudaraw.CUcontext, h cublasraw.CublasHandle, ta, tb Op, m, n, k int32, alpha, a *cuda.Float16, lda int32, sa int64,
			b *cuda.Float16, ldb int32, sb int64, beta, cc *cuda.Float16, ldc int32, sc int64, batch int32) error {
			return cublasraw.GemmStridedBatchedExIn(c, h, ta, tb, m, n, k, unsafe.Pointer(alpha), unsafe.Pointer(a), cudaraw.CUDA_R_16F, lda, sa,
				unsafe.Pointer(b), cudaraw.CUDA_R_16F, ldb, sb, unsafe.Pointer(beta), unsafe.Pointer(cc), cudaraw.CUDA_R_16F, ldc, sc, batch,
				cublasraw.CUBLAS_COMPUTE_16F, cublasraw.CUBLAS_GEMM_DEFAULT)
		},
	},
}

// retyped returns r, the routines of the raw element type R, as routines of T, a Go
// type of R's layout: each converts its pointers and calls r's. Its columns are
// those the complex types have.
func retyped[T, R any](r routines[R]) *routines[T] {
	return &routines[T]{
		gemm: func(c cudaraw.CUcontext, h cublasraw.CublasHandle, ta, tb Op, m, n, k int32, alpha, a *T, lda int32, b *T, ldb int32, beta, cc *T, ldc int32) error {
			return r.gemm(c, h, ta, tb, m, n, k, cudalib.Retype[R](alpha), cudalib.Retype[R](a), lda, cudalib.Retype[R](b), ldb, cudalib.Retype[R](beta), cudalib.Retype[R](cc), ldc)
		},
		gemmStridedBatched: func(c cudaraw.CUcontext, h cublasraw.CublasHandle, ta, tb Op, m, n, k int32, alpha, a *T, lda int32, sa int64,
			b *T, ldb int32, sb int64, beta, cc *T, ldc int32, sc int64, batch int32) error {
			return r.gemmStridedBatched(c, h, ta, tb, m, n, k, cudalib.Retype[R](alpha), cudalib.Retype[R](a), lda, sa, cudalib.Retype[R](b), ldb, sb, cudalib.Retype[R](beta), cudalib.Retype[R](cc), ldc, sc, batch)
		},
		gemv: func(c cudaraw.CUcontext, h cublasraw.CublasHandle, t Op, m, n int32, alpha, a *T, lda int32, x *T, incx int32, beta, y *T, incy int32) error {
			return r.gemv(c, h, t, m, n, cudalib.Retype[R](alpha), cudalib.Retype[R](a), lda, cudalib.Retype[R](x), incx, cudalib.Retype[R](beta), cudalib.Retype[R](y), incy)
		},
		axpy: func(c cudaraw.CUcontext, h cublasraw.CublasHandle, n int32, alpha, x *T, incx int32, y *T, incy int32) error {
			return r.axpy(c, h, n, cudalib.Retype[R](alpha), cudalib.Retype[R](x), incx, cudalib.Retype[R](y), incy)
		},
		scal: func(c cudaraw.CUcontext, h cublasraw.CublasHandle, n int32, alpha, x *T, incx int32) error {
			return r.scal(c, h, n, cudalib.Retype[R](alpha), cudalib.Retype[R](x), incx)
		},
		trsm: func(c cudaraw.CUcontext, h cublasraw.CublasHandle, side Side, uplo Fill, t Op, diag Diag, m, n int32, alpha, a *T, lda int32, b *T, ldb int32) error {
			return r.trsm(c, h, side, uplo, t, diag, m, n, cudalib.Retype[R](alpha), cudalib.Retype[R](a), lda, cudalib.Retype[R](b), ldb)
		},
		syrk: func(c cudaraw.CUcontext, h cublasraw.CublasHandle, uplo Fill, t Op, n, k int32, alpha, a *T, lda int32, beta, cc *T, ldc int32) error {
			return r.syrk(c, h, uplo, t, n, k, cudalib.Retype[R](alpha), cudalib.Retype[R](a), lda, cudalib.Retype[R](beta), cudalib.Retype[R](cc), ldc)
		},
		geam: func(c cudaraw.CUcontext, h cublasraw.CublasHandle, ta, tb Op, m, n int32, alpha, a *T, lda int32, beta, b *T, ldb int32, cc *T, ldc int32) error {
			return r.geam(c, h, ta, tb, m, n, cudalib.Retype[R](alpha), cudalib.Retype[R](a), lda, cudalib.Retype[R](beta), cudalib.Retype[R](b), ldb, cudalib.Retype[R](cc), ldc)
		},
		gemmBatched: func(c cudaraw.CUcontext, h cublasraw.CublasHandle, ta, tb Op, m, n, k int32, alpha *T, a **T, lda int32, b **T, ldb int32, beta *T, cc **T, ldc int32, batch int32) error {
			return r.gemmBatched(c, h, ta, tb, m, n, k, cudalib.Retype[R](alpha), (**R)(unsafe.Pointer(a)), lda, (**R)(unsafe.Pointer(b)), ldb, cudalib.Retype[R](beta), (**R)(unsafe.Pointer(cc)), ldc, batch)
		},
		herk: func(c cudaraw.CUcontext, h cublasraw.CublasHandle, uplo Fill, t Op, n, k int32, sc *scalars, alpha float64, a *T, lda int32, beta float64, cc *T, ldc int32) error {
			return r.herk(c, h, uplo, t, n, k, sc, alpha, cudalib.Retype[R](a), lda, beta, cudalib.Retype[R](cc), ldc)
		},
	}
}

// precisionOf returns T's row of blas: an error matching cuda.ErrInvalidArgument
// for a type without one, which the operations' constraints keep out.
func precisionOf[T any](op string) (*routines[T], error) {
	if r, ok := cudalib.Row[*routines[T], T](&blas); ok {
		return r, nil
	}
	return nil, noRoutines(op, reflect.TypeFor[T]())
}

// noRoutines is precisionOf's error, out of line: the operations look their row up
// at every call.
//
//go:noinline
func noRoutines(op string, t reflect.Type) error {
	return fmt.Errorf("cublas: %s: %w: no cuBLAS routines for element type %v", op, cuda.ErrInvalidArgument, t)
}
