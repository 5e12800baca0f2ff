package cublas

import (
	"fmt"
	"unsafe"

	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
)

// Fill is the triangle of a triangular, symmetric or Hermitian matrix that an
// operation reads or writes: Lower or Upper.
type Fill = cublasraw.CublasFillMode

// Triangles.
const (
	Lower Fill = cublasraw.CUBLAS_FILL_MODE_LOWER // on and below the diagonal
	Upper Fill = cublasraw.CUBLAS_FILL_MODE_UPPER // on and above the diagonal
)

// Side is the side of the product a triangular matrix stands on: Left or Right.
type Side = cublasraw.CublasSideMode

// Sides.
const (
	Left  Side = cublasraw.CUBLAS_SIDE_LEFT  // op(A)·X
	Right Side = cublasraw.CUBLAS_SIDE_RIGHT // X·op(A)
)

// Diag says whether a triangular matrix has a unit diagonal, which is then not read:
// NonUnit or Unit.
type Diag = cublasraw.CublasDiagType

// Diagonals.
const (
	NonUnit Diag = cublasraw.CUBLAS_DIAG_NON_UNIT
	Unit    Diag = cublasraw.CUBLAS_DIAG_UNIT
)

// Trsm solves op(A)·X = alpha·B (side Left) or X·op(A) = alpha·B (side Right) for
// X on s, overwriting B (m×n) with X: cublas{S,D,C,Z}trsm. A is triangular, m×m
// (Left) or n×n (Right), read in its uplo triangle; with diag Unit its diagonal is
// taken as ones. Like BLAS, it does not check A for singularity.
func Trsm[T Scalar](s *cuda.Stream, side Side, uplo Fill, trans Op, diag Diag, m, n int, alpha T,
	a cuda.Memory, lda int, b cuda.Memory, ldb int) error {
	const op = "trsm"
	r, err := precisionOf[T](op)
	if err != nil {
		return err
	}
	trsm := r.trsm
	if err := checkModes(op, side, uplo, diag); err != nil {
		return err
	}
	na := m
	if side == Right {
		na = n
	}
	pa, err := batched[T](op, "A", a, na, na, lda, 0, 1)
	if err != nil {
		return err
	}
	pb, err := batched[T](op, "B", b, m, n, ldb, 0, 1)
	if err != nil {
		return err
	}
	if err := checkTrans(op, trans, NoTrans); err != nil {
		return err
	}
	M, N, LDA, LDB := int32(m), int32(n), int32(lda), int32(ldb)
	return call(op, s, func(ctx cudaraw.CUcontext, h cublasraw.CublasHandle, sc *scalars) error {
		return trsm(ctx, h, side, uplo, trans, diag, M, N, setScalar(sc, alpha), pa, LDA, pb, LDB)
	}, cuda.Reads(a), cuda.Writes(b))
}

// Syrk computes the symmetric rank-k update C = alpha·op(A)·op(A)ᵀ + beta·C on s,
// writing the uplo triangle of C (n×n) only: cublas{S,D,C,Z}syrk. op(A) is n×k:
// trans NoTrans (A is n×k) or Trans (A is k×n); complex matrices are transposed,
// not conjugated (Herk conjugates).
func Syrk[T Scalar](s *cuda.Stream, uplo Fill, trans Op, n, k int, alpha T, a cuda.Memory, lda int,
	beta T, c cuda.Memory, ldc int) error {
	const op = "syrk"
	r, err := precisionOf[T](op)
	if err != nil {
		return err
	}
	syrk := r.syrk
	pa, pc, err := rankK[T](op, uplo, trans, Trans, n, k, a, lda, c, ldc)
	if err != nil {
		return err
	}
	N, K, LDA, LDC := int32(n), int32(k), int32(lda), int32(ldc)
	return call(op, s, func(ctx cudaraw.CUcontext, h cublasraw.CublasHandle, sc *scalars) error {
		pal, pbe := setScalars(sc, alpha, beta)
		return syrk(ctx, h, uplo, trans, N, K, pal, pa, LDA, pbe, pc, LDC)
	}, cuda.Reads(a), cuda.Writes(c))
}

// Herk computes the Hermitian rank-k update C = alpha·op(A)·op(A)ᴴ + beta·C on s,
// writing the uplo triangle of C (n×n) only, whose diagonal comes out real:
// cublas{C,Z}herk. op(A) is n×k: trans NoTrans (A is n×k) or ConjTrans (A is k×n).
// alpha and beta are real, as in BLAS; complex64 computes with them in float32.
func Herk[T complex64 | complex128](s *cuda.Stream, uplo Fill, trans Op, n, k int, alpha float64, a cuda.Memory, lda int,
	beta float64, c cuda.Memory, ldc int) error {
	const op = "herk"
	r, err := precisionOf[T](op)
	if err != nil {
		return err
	}
	herk := r.herk
	pa, pc, err := rankK[T](op, uplo, trans, ConjTrans, n, k, a, lda, c, ldc)
	if err != nil {
		return err
	}
	N, K, LDA, LDC := int32(n), int32(k), int32(lda), int32(ldc)
	return call(op, s, func(ctx cudaraw.CUcontext, h cublasraw.CublasHandle, sc *scalars) error {
		return herk(ctx, h, uplo, trans, N, K, sc, alpha, pa, LDA, beta, pc, LDC)
	}, cuda.Reads(a), cuda.Writes(c))
}

// rankK checks the operands of Syrk and Herk: the triangle, trans NoTrans or
// the one transposition the routine takes (other), A holding op(A) (n×k) and C n×n.
func rankK[T any](op string, uplo Fill, trans, other Op, n, k int, a cuda.Memory, lda int, c cuda.Memory, ldc int) (*T, *T, error) {
	if uplo != Lower && uplo != Upper {
		return nil, nil, fmt.Errorf("cublas: %s: %w: triangle %d", op, cuda.ErrInvalidArgument, int(uplo))
	}
	if trans != NoTrans && trans != other {
		return nil, nil, fmt.Errorf("cublas: %s: %w: transposition %d (%s takes %d or %d)", op, cuda.ErrInvalidArgument, int(trans), op, int(NoTrans), int(other))
	}
	ar, ac := dims(trans, n, k)
	pa, err := batched[T](op, "A", a, ar, ac, lda, 0, 1)
	if err != nil {
		return nil, nil, err
	}
	pc, err := batched[T](op, "C", c, n, n, ldc, 0, 1)
	if err != nil {
		return nil, nil, err
	}
	return pa, pc, nil
}

// Geam computes C = alpha·op(A) + beta·op(B) on s, with C m×n: cublas{S,D,C,Z}geam,
// the transposition and addition of matrices (with alpha 1 and beta 0 it
// transposes A into C). C may be A (then transA must be NoTrans and lda ldc) or B
// likewise; otherwise it must overlap neither.
func Geam[T Scalar](s *cuda.Stream, transA, transB Op, m, n int, alpha T, a cuda.Memory, lda int,
	beta T, b cuda.Memory, ldb int, c cuda.Memory, ldc int) error {
	const op = "geam"
	r, err := precisionOf[T](op)
	if err != nil {
		return err
	}
	geam := r.geam
	ar, ac := dims(transA, m, n)
	br, bc := dims(transB, m, n)
	pa, err := batched[T](op, "A", a, ar, ac, lda, 0, 1)
	if err != nil {
		return err
	}
	pb, err := batched[T](op, "B", b, br, bc, ldb, 0, 1)
	if err != nil {
		return err
	}
	pc, err := batched[T](op, "C", c, m, n, ldc, 0, 1)
	if err != nil {
		return err
	}
	if err := checkTrans(op, transA, transB); err != nil {
		return err
	}
	if pc == pa && (transA != NoTrans || lda != ldc) || pc == pb && (transB != NoTrans || ldb != ldc) {
		return fmt.Errorf("cublas: %s: %w: C in place of an operand needs it untransposed with C's leading dimension", op, cuda.ErrInvalidArgument)
	}
	M, N, LDA, LDB, LDC := int32(m), int32(n), int32(lda), int32(ldb), int32(ldc)
	uses := []cuda.Use{cuda.Reads(a), cuda.Reads(b), cuda.Writes(c)}
	if pc == pa || pc == pb {
		uses = uses[2:] // the memory is written; the hand-off takes one use of it
		if pc != pa {
			uses = append(uses, cuda.Reads(a))
		} else if pc != pb {
			uses = append(uses, cuda.Reads(b))
		}
	}
	return call(op, s, func(ctx cudaraw.CUcontext, h cublasraw.CublasHandle, sc *scalars) error {
		pal, pbe := setScalars(sc, alpha, beta)
		return geam(ctx, h, transA, transB, M, N, pal, pa, LDA, pbe, pb, LDB, pc, LDC)
	}, uses...)
}

// GemmBatched computes C[i] = alpha·op(A[i])·op(B[i]) + beta·C[i] on s for every i
// of the three slices (of one length, the batch), each C[i] m×n, op(A[i]) m×k and
// op(B[i]) k×n, the matrices anywhere in memory: cublas{S,D,C,Z}gemmBatched over
// arrays of pointers. The pointer arrays are copied to the device's pool memory on
// s, which frees them after the call. GemmStridedBatched serves matrices evenly
// spaced in one buffer without the copy.
func GemmBatched[T Scalar](s *cuda.Stream, transA, transB Op, m, n, k int, alpha T, a []cuda.Memory, lda int,
	b []cuda.Memory, ldb int, beta T, c []cuda.Memory, ldc int) error {
	const op = "gemm batched"
	r, err := precisionOf[T](op)
	if err != nil {
		return err
	}
	gemm := r.gemmBatched
	batch := len(a)
	if len(b) != batch || len(c) != batch || batch > maxInt32 {
		return fmt.Errorf("cublas: %s: %w: %d A, %d B and %d C matrices", op, cuda.ErrInvalidArgument, len(a), len(b), len(c))
	}
	ar, ac := dims(transA, m, k)
	br, bc := dims(transB, k, n)
	ptrs := make([]uint64, 3*batch)
	uses := make([]cuda.Use, 0, 3*batch+1)
	for i := range batch {
		for j, o := range [3]struct {
			name   string
			m      cuda.Memory
			r, c   int
			ld     int
			writes bool
		}{{"A", a[i], ar, ac, lda, false}, {"B", b[i], br, bc, ldb, false}, {"C", c[i], m, n, ldc, true}} {
			p, err := batched[T](op, fmt.Sprintf("%s[%d]", o.name, i), o.m, o.r, o.c, o.ld, 0, 1)
			if err != nil {
				return err
			}
			ptrs[j*batch+i] = uint64(uintptr(unsafe.Pointer(p)))
			if o.writes {
				uses = append(uses, cuda.Writes(o.m))
			} else {
				uses = append(uses, cuda.Reads(o.m))
			}
		}
	}
	if err := checkTrans(op, transA, transB); err != nil {
		return err
	}
	if batch == 0 {
		return nil
	}
	ctx := s.Context()
	if ctx == nil {
		return opError(op, cuda.CheckEnqueue(s))
	}
	arrays, err := cuda.AllocFor[uint64](s, len(ptrs))
	if err != nil {
		return opError(op, err)
	}
	defer arrays.Close() // ordered after the call by the hand-off
	if err := cuda.CopyToDeviceAsync(s, arrays, ptrs); err != nil {
		return opError(op, err)
	}
	pp, err := cuda.DevicePtr[uint64](arrays)
	if err != nil {
		return opError(op, err)
	}
	// The arrays hold device addresses of *T: cuBLAS reads them on the GPU.
	pA := (**T)(unsafe.Pointer(pp))
	pB := (**T)(unsafe.Add(unsafe.Pointer(pp), 8*batch))
	pC := (**T)(unsafe.Add(unsafe.Pointer(pp), 16*batch))
	M, N, K, LDA, LDB, LDC, B := int32(m), int32(n), int32(k), int32(lda), int32(ldb), int32(ldc), int32(batch)
	return call(op, s, func(ctx cudaraw.CUcontext, h cublasraw.CublasHandle, sc *scalars) error {
		pal, pbe := setScalars(sc, alpha, beta)
		return gemm(ctx, h, transA, transB, M, N, K, pal, pA, LDA, pB, LDB, pbe, pC, LDC, B)
	}, append(uses, cuda.Reads(arrays))...)
}

// checkModes checks a triangular operand's side, triangle and diagonal.
func checkModes(op string, side Side, uplo Fill, diag Diag) error {
	if (side != Left && side != Right) || (uplo != Lower && uplo != Upper) || (diag != NonUnit && diag != Unit) {
		return fmt.Errorf("cublas: %s: %w: side %d, triangle %d, diagonal %d", op, cuda.ErrInvalidArgument, int(side), int(uplo), int(diag))
	}
	return nil
}
