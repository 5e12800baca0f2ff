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

// ExType is an element type of GemmMixed's operands: half and bfloat16 floats
// (cuda.Float16, cuda.BFloat16), float32, float64, and int8 inputs with int32 results.
type ExType interface {
	cuda.Float16 | cuda.BFloat16 | float32 | float64 | int8 | int32
}

// Compute is a compute type of GemmMixed.
type Compute = cublasraw.CublasComputeType

// Compute types of GemmMixed: the precision products are accumulated in, and for the
// FAST kinds the precision float32 inputs are rounded to for the tensor cores. The
// _PEDANTIC and emulated kinds of cublas_api.h (CUBLAS_COMPUTE_*) are accepted too.
const (
	Compute16F         Compute = cublasraw.CUBLAS_COMPUTE_16F           // half inputs and result, half accumulation
	Compute32F                 = cublasraw.CUBLAS_COMPUTE_32F           // float32 accumulation
	Compute32FFast16F          = cublasraw.CUBLAS_COMPUTE_32F_FAST_16F  // float32 data, half tensor-core inputs
	Compute32FFast16BF         = cublasraw.CUBLAS_COMPUTE_32F_FAST_16BF // float32 data, bfloat16 tensor-core inputs
	Compute32FFastTF32         = cublasraw.CUBLAS_COMPUTE_32F_FAST_TF32 // float32 data, TF32 tensor-core inputs
	Compute64F                 = cublasraw.CUBLAS_COMPUTE_64F           // float64
	Compute32I                 = cublasraw.CUBLAS_COMPUTE_32I           // int8 inputs, int32 accumulation and result
)

// exCombo is one row of cublasGemmEx's table of supported types: a compute type's
// base kind, the inputs' and the result's data types.
type exCombo struct {
	compute Compute
	in, out cudaraw.CudaDataType
}

// exCombos are the real-typed rows of cublasGemmEx's table (cuBLAS documentation,
// cublasGemmEx): anything else is refused before cuBLAS sees it.
var exCombos = map[exCombo]bool{
	{cublasraw.CUBLAS_COMPUTE_16F, cudaraw.CUDA_R_16F, cudaraw.CUDA_R_16F}:                     true,
	{cublasraw.CUBLAS_COMPUTE_32I, cudaraw.CUDA_R_8I, cudaraw.CUDA_R_32I}:                      true,
	{cublasraw.CUBLAS_COMPUTE_32F, cudaraw.CUDA_R_16BF, cudaraw.CUDA_R_16BF}:                   true,
	{cublasraw.CUBLAS_COMPUTE_32F, cudaraw.CUDA_R_16F, cudaraw.CUDA_R_16F}:                     true,
	{cublasraw.CUBLAS_COMPUTE_32F, cudaraw.CUDA_R_8I, cudaraw.CUDA_R_32F}:                      true,
	{cublasraw.CUBLAS_COMPUTE_32F, cudaraw.CUDA_R_16BF, cudaraw.CUDA_R_32F}:                    true,
	{cublasraw.CUBLAS_COMPUTE_32F, cudaraw.CUDA_R_16F, cudaraw.CUDA_R_32F}:                     true,
	{cublasraw.CUBLAS_COMPUTE_32F, cudaraw.CUDA_R_32F, cudaraw.CUDA_R_32F}:                     true,
	{cublasraw.CUBLAS_COMPUTE_32F_FAST_16F, cudaraw.CUDA_R_32F, cudaraw.CUDA_R_32F}:            true,
	{cublasraw.CUBLAS_COMPUTE_32F_FAST_16BF, cudaraw.CUDA_R_32F, cudaraw.CUDA_R_32F}:           true,
	{cublasraw.CUBLAS_COMPUTE_32F_FAST_TF32, cudaraw.CUDA_R_32F, cudaraw.CUDA_R_32F}:           true,
	{cublasraw.CUBLAS_COMPUTE_32F_EMULATED_16BFX9, cudaraw.CUDA_R_32F, cudaraw.CUDA_R_32F}:     true,
	{cublasraw.CUBLAS_COMPUTE_64F, cudaraw.CUDA_R_64F, cudaraw.CUDA_R_64F}:                     true,
	{cublasraw.CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT, cudaraw.CUDA_R_64F, cudaraw.CUDA_R_64F}: true,
}

// baseCompute maps a _PEDANTIC compute type to the kind it computes like.
func baseCompute(c Compute) Compute {
	switch c {
	case cublasraw.CUBLAS_COMPUTE_16F_PEDANTIC:
		return cublasraw.CUBLAS_COMPUTE_16F
	case cublasraw.CUBLAS_COMPUTE_32F_PEDANTIC:
		return cublasraw.CUBLAS_COMPUTE_32F
	case cublasraw.CUBLAS_COMPUTE_64F_PEDANTIC:
		return cublasraw.CUBLAS_COMPUTE_64F
	case cublasraw.CUBLAS_COMPUTE_32I_PEDANTIC:
		return cublasraw.CUBLAS_COMPUTE_32I
	}
	return c
}

// checkExScalars reports alpha and beta that compute's scale type cannot hold:
// Compute32I scales by int32 values.
func checkExScalars(compute Compute, alpha, beta float64) error {
	if compute == cublasraw.CUBLAS_COMPUTE_32I && (alpha != float64(int32(alpha)) || beta != float64(int32(beta))) {
		return fmt.Errorf("%w: alpha %v and beta %v must be int32 values for Compute32I", cuda.ErrInvalidArgument, alpha, beta)
	}
	return nil
}

// exScalars stores alpha and beta in sc in the scale type of a compute kind (half
// for Compute16F, int32 for Compute32I, float64 for Compute64F, float32 otherwise)
// and returns their addresses there.
func exScalars(sc *scalars, compute Compute, alpha, beta float64) (unsafe.Pointer, unsafe.Pointer) {
	switch compute {
	case cublasraw.CUBLAS_COMPUTE_16F:
		a, b := setScalars(sc, cuda.NewFloat16(float32(alpha)), cuda.NewFloat16(float32(beta)))
		return unsafe.Pointer(a), unsafe.Pointer(b)
	case cublasraw.CUBLAS_COMPUTE_32I:
		a, b := setScalars(sc, int32(alpha), int32(beta))
		return unsafe.Pointer(a), unsafe.Pointer(b)
	case cublasraw.CUBLAS_COMPUTE_64F, cublasraw.CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT:
		a, b := setScalars(sc, alpha, beta)
		return unsafe.Pointer(a), unsafe.Pointer(b)
	}
	a, b := setScalars(sc, float32(alpha), float32(beta))
	return unsafe.Pointer(a), unsafe.Pointer(b)
}

// GemmMixed computes C = alpha·op(A)·op(B) + beta·C on s with A and B of element type
// In and C of Out, accumulated in compute: cublasGemmEx, with cuBLAS's default
// algorithm (tensor cores where the types allow). alpha and beta are converted to
// the compute kind's scale type (half for Compute16F, int32 for Compute32I, which
// requires integral values, float64 for Compute64F, float32 otherwise). The type
// combinations are those of cuBLAS's table for real types, e.g. half or bfloat16
// inputs into half, bfloat16 or float32 results with Compute32F, float32 with a
// FAST kind, int8 into int32 with Compute32I (cuBLAS's integer kernels need m, k and
// the leading dimensions multiples of 4); any other is an error matching
// cuda.ErrInvalidArgument before any CUDA call. Complex GEMMs are Gemm's.
func GemmMixed[In, Out ExType](s *cuda.Stream, transA, transB Op, m, n, k int, alpha float64, a cuda.Memory, lda int,
	b cuda.Memory, ldb int, beta float64, c cuda.Memory, ldc int, compute Compute) error {
	const op = "gemm mixed"
	base := baseCompute(compute)
	it, _ := cudalib.DataType[In]() // ExType's types all have one
	ot, _ := cudalib.DataType[Out]()
	if !exCombos[exCombo{base, it, ot}] {
		return fmt.Errorf("cublas: %s: %w: %v inputs into %v with compute type %v is not a cublasGemmEx combination",
			op, cuda.ErrInvalidArgument, reflect.TypeFor[In](), reflect.TypeFor[Out](), compute)
	}
	if err := checkExScalars(base, alpha, beta); err != nil {
		return fmt.Errorf("cublas: %s: %w", op, err)
	}
	ar, ac := dims(transA, m, k)
	br, bc := dims(transB, k, n)
	pa, okA := matrix[In](a, ar, ac, lda, 0, 1)
	pb, okB := matrix[In](b, br, bc, ldb, 0, 1)
	pc, okC := matrix[Out](c, m, n, ldc, 0, 1)
	if !okA || !okB || !okC || !validTrans(transA, transB) {
		return gemmError[In, Out](op, transA, transB, m, n, k, a, lda, 0, b, ldb, 0, c, ldc, 0, 1)
	}
	if it == cudaraw.CUDA_R_8I && (m%4 != 0 || k%4 != 0 || lda%4 != 0 || ldb%4 != 0 || ldc%4 != 0) {
		return fmt.Errorf("cublas: %s: %w: int8 inputs need m, k and the leading dimensions multiples of 4 (m %d, k %d, lda %d, ldb %d, ldc %d)",
			op, cuda.ErrInvalidArgument, m, k, lda, ldb, ldc)
	}
	return call(op, s, func(ctx cudaraw.CUcontext, h cublasraw.CublasHandle, sc *scalars) error {
		palpha, pbeta := exScalars(sc, base, alpha, beta)
		return cublasraw.GemmExIn(ctx, h, transA, transB, int32(m), int32(n), int32(k), palpha, unsafe.Pointer(pa), it, int32(lda),
			unsafe.Pointer(pb), it, int32(ldb), pbeta, unsafe.Pointer(pc), ot, int32(ldc), compute, cublasraw.CUBLAS_GEMM_DEFAULT)
	}, cuda.Reads(a), cuda.Reads(b), cuda.Writes(c))
}
