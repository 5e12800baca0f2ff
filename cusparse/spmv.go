package cusparse

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cudalib"
	"github.com/gocuda/gocuda/cusparse/cusparseraw"
)

// The idiomatic API: sparse matrix products on the cuda package's memory, queued on
// a stream (cuSPARSE's generic API: MulVec is cusparseSpMV, MulMat cusparseSpMM),
// with handles from a per-context cache and the work buffer cuSPARSE asks for from
// the device's pool.

// Float is an element type of the products: float32 or float64.
type Float interface {
	float32 | float64
}

// Matrix is a sparse matrix of Rows×Cols with NNZ stored elements: a *CSR, *COO or
// *CSC.
type Matrix interface {
	dims() (rows, cols, nnz int)
	// arrays checks the matrix's memory (values of elem bytes, whose address ptr
	// returns after checking their type) and returns its three arrays' addresses
	// and uses.
	arrays(elem int, ptr func(cuda.Memory) (unsafe.Pointer, error)) ([3]unsafe.Pointer, []cuda.Use, error)
	// describe makes the matrix's descriptor over the addresses of arrays.
	describe(ctx *cuda.Context, vt cudaraw.CudaDataType, p [3]unsafe.Pointer) (cusparseraw.CusparseSpMatDescr, error)
	// values returns the memory of the matrix's values.
	values() cuda.Memory
}

// CSR is a sparse matrix in compressed sparse row format with 0-based int32
// indices: row i holds the elements RowOffsets[i] to RowOffsets[i+1]-1 of ColIndices
// (their columns) and Values.
type CSR struct {
	Rows, Cols, NNZ int
	RowOffsets      cuda.Memory // Rows+1 int32
	ColIndices      cuda.Memory // NNZ int32
	Values          cuda.Memory // NNZ elements

	own owned // the buffers NewCSR, DenseToCSR or MulSparse made
}

// COO is a sparse matrix in coordinate format with 0-based int32 indices, sorted by
// row: element i is at (RowIndices[i], ColIndices[i]).
type COO struct {
	Rows, Cols, NNZ int
	RowIndices      cuda.Memory // NNZ int32
	ColIndices      cuda.Memory // NNZ int32
	Values          cuda.Memory // NNZ elements

	own owned // the buffers NewCOO or DenseToCOO made
}

func (m *CSR) dims() (int, int, int) { return m.Rows, m.Cols, m.NNZ }
func (m *COO) dims() (int, int, int) { return m.Rows, m.Cols, m.NNZ }

func (m *CSR) arrays(elem int, ptr func(cuda.Memory) (unsafe.Pointer, error)) ([3]unsafe.Pointer, []cuda.Use, error) {
	return arrays3(elem, ptr, "row offsets", m.RowOffsets, m.Rows+1, m.ColIndices, m.Values, m.NNZ)
}

func (m *COO) arrays(elem int, ptr func(cuda.Memory) (unsafe.Pointer, error)) ([3]unsafe.Pointer, []cuda.Use, error) {
	return arrays3(elem, ptr, "row indices", m.RowIndices, m.NNZ, m.ColIndices, m.Values, m.NNZ)
}

// arrays3 checks a sparse matrix's index arrays (int32) and values.
func arrays3(elem int, ptr func(cuda.Memory) (unsafe.Pointer, error), rowName string, rows cuda.Memory, nrows int,
	cols, vals cuda.Memory, nnz int) ([3]unsafe.Pointer, []cuda.Use, error) {
	var p [3]unsafe.Pointer
	var err error
	if p[0], err = array(rowName, rows, nrows, 4, ptrOf[int32]); err != nil {
		return p, nil, err
	}
	if p[1], err = array("column indices", cols, nnz, 4, ptrOf[int32]); err != nil {
		return p, nil, err
	}
	if p[2], err = array("values", vals, nnz, elem, ptr); err != nil {
		return p, nil, err
	}
	return p, []cuda.Use{cuda.Reads(rows), cuda.Reads(cols), cuda.Reads(vals)}, nil
}

func (m *CSR) values() cuda.Memory { return m.Values }
func (m *COO) values() cuda.Memory { return m.Values }

func (m *CSR) describe(ctx *cuda.Context, vt cudaraw.CudaDataType, p [3]unsafe.Pointer) (cusparseraw.CusparseSpMatDescr, error) {
	var d cusparseraw.CusparseSpMatDescr
	err := cusparseraw.CreateCsrIn(ctx.Handle(), &d, int64(m.Rows), int64(m.Cols), int64(m.NNZ), p[0], p[1], p[2],
		cusparseraw.CUSPARSE_INDEX_32I, cusparseraw.CUSPARSE_INDEX_32I, cusparseraw.CUSPARSE_INDEX_BASE_ZERO, vt)
	return d, err
}

func (m *COO) describe(ctx *cuda.Context, vt cudaraw.CudaDataType, p [3]unsafe.Pointer) (cusparseraw.CusparseSpMatDescr, error) {
	var d cusparseraw.CusparseSpMatDescr
	err := cusparseraw.CreateCooIn(ctx.Handle(), &d, int64(m.Rows), int64(m.Cols), int64(m.NNZ), p[0], p[1], p[2],
		cusparseraw.CUSPARSE_INDEX_32I, cusparseraw.CUSPARSE_INDEX_BASE_ZERO, vt)
	return d, err
}

// array checks that m holds n elements of elem bytes (ptr checks their type) and
// returns its address.
func array(name string, m cuda.Memory, n, elem int, ptr func(cuda.Memory) (unsafe.Pointer, error)) (unsafe.Pointer, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: %s: nil memory", cuda.ErrInvalidArgument, name)
	}
	p, err := ptr(m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if m.Size()/elem < n {
		return nil, fmt.Errorf("%w: %s needs %d elements, the memory holds %d", cuda.ErrInvalidArgument, name, n, m.Size()/elem)
	}
	return p, nil
}

// ptrOf is DevicePtr[T] as an unsafe.Pointer, for the descriptors.
func ptrOf[T any](m cuda.Memory) (unsafe.Pointer, error) {
	p, err := cuda.DevicePtr[T](m)
	return unsafe.Pointer(p), err
}

// Op is the transposition of a sparse matrix operand: NoTrans, Trans or ConjTrans.
type Op = cusparseraw.CusparseOperation

// Transpositions of a sparse matrix operand.
const (
	NoTrans   Op = cusparseraw.CUSPARSE_OPERATION_NON_TRANSPOSE       // op(A) = A
	Trans     Op = cusparseraw.CUSPARSE_OPERATION_TRANSPOSE           // op(A) = Aᵀ
	ConjTrans Op = cusparseraw.CUSPARSE_OPERATION_CONJUGATE_TRANSPOSE // op(A) = Aᴴ
)

// MulVec computes y = alpha·op(A)·x + beta·y on s (trans: CUSPARSE_OPERATION_NON_TRANSPOSE
// or CUSPARSE_OPERATION_TRANSPOSE): cusparseSpMV. A's values, x and y hold T.
func MulVec[T Float](s *cuda.Stream, trans Op, alpha T, a Matrix, x cuda.Memory, beta T, y cuda.Memory) error {
	const op = "spmv"
	if a == nil {
		return fmt.Errorf("cusparse: %s: %w: nil matrix", op, cuda.ErrInvalidArgument)
	}
	rows, cols, nnz := a.dims()
	if err := checkDims(rows, cols, nnz); err != nil {
		return fmt.Errorf("cusparse: %s: %w", op, err)
	}
	xl, yl := cols, rows
	if trans == cusparseraw.CUSPARSE_OPERATION_TRANSPOSE {
		xl, yl = rows, cols
	} else if trans != cusparseraw.CUSPARSE_OPERATION_NON_TRANSPOSE {
		return fmt.Errorf("cusparse: %s: %w: operation %d", op, cuda.ErrInvalidArgument, int(trans))
	}
	if err := checkValues[T](a); err != nil {
		return fmt.Errorf("cusparse: %s: %w", op, err)
	}
	px, err := vector[T]("x", x, xl)
	if err != nil {
		return fmt.Errorf("cusparse: %s: %w", op, err)
	}
	py, err := vector[T]("y", y, yl)
	if err != nil {
		return fmt.Errorf("cusparse: %s: %w", op, err)
	}
	vt := valueType[T]()
	io := []cuda.Use{cuda.Reads(x), cuda.Writes(y)}
	return run(op, s, a, vt, elemSize[T](), ptrOf[T], io, func(ctx cudaraw.CUcontext, h cusparseraw.CusparseHandle, m cusparseraw.CusparseSpMatDescr) (work func(unsafe.Pointer) error, size uint64, cleanup func(), err error) {
		var dx, dy cusparseraw.CusparseDnVecDescr
		if err := cusparseraw.CreateDnVecIn(ctx, &dx, int64(xl), px, vt); err != nil {
			return nil, 0, nil, err
		}
		if err := cusparseraw.CreateDnVecIn(ctx, &dy, int64(yl), py, vt); err != nil {
			_ = cusparseraw.DestroyDnVecIn(ctx, dx)
			return nil, 0, nil, err
		}
		cleanup = func() { _ = errors.Join(cusparseraw.DestroyDnVecIn(ctx, dx), cusparseraw.DestroyDnVecIn(ctx, dy)) }
		ap, bp := unsafe.Pointer(&alpha), unsafe.Pointer(&beta)
		if err := cusparseraw.SpMVBufferSizeIn(ctx, h, trans, ap, m, dx, bp, dy, vt, cusparseraw.CUSPARSE_SPMV_ALG_DEFAULT, &size); err != nil {
			cleanup()
			return nil, 0, nil, err
		}
		work = func(ws unsafe.Pointer) error {
			return cusparseraw.SpMVIn(ctx, h, trans, ap, m, dx, bp, dy, vt, cusparseraw.CUSPARSE_SPMV_ALG_DEFAULT, ws)
		}
		return work, size, cleanup, nil
	})
}

// MulMat computes C = alpha·A·B + beta·C on s, where B is a dense A.Cols×n matrix and C
// a dense A.Rows×n matrix, column-major with leading dimensions ldb and ldc:
// cusparseSpMM. A's values, B and C hold T.
func MulMat[T Float](s *cuda.Stream, alpha T, a Matrix, n int, b cuda.Memory, ldb int, beta T, c cuda.Memory, ldc int) error {
	const op = "spmm"
	if a == nil {
		return fmt.Errorf("cusparse: %s: %w: nil matrix", op, cuda.ErrInvalidArgument)
	}
	rows, cols, nnz := a.dims()
	if err := checkDims(rows, cols, nnz); err != nil {
		return fmt.Errorf("cusparse: %s: %w", op, err)
	}
	if n < 0 || ldb < max(1, cols) || ldc < max(1, rows) {
		return fmt.Errorf("cusparse: %s: %w: n %d, ldb %d, ldc %d", op, cuda.ErrInvalidArgument, n, ldb, ldc)
	}
	if err := checkValues[T](a); err != nil {
		return fmt.Errorf("cusparse: %s: %w", op, err)
	}
	nb, nc := 0, 0
	if n > 0 {
		nb, nc = ldb*(n-1)+cols, ldc*(n-1)+rows
	}
	pb, err := vector[T]("B", b, nb)
	if err != nil {
		return fmt.Errorf("cusparse: %s: %w", op, err)
	}
	pc, err := vector[T]("C", c, nc)
	if err != nil {
		return fmt.Errorf("cusparse: %s: %w", op, err)
	}
	vt := valueType[T]()
	io := []cuda.Use{cuda.Reads(b), cuda.Writes(c)}
	return run(op, s, a, vt, elemSize[T](), ptrOf[T], io, func(ctx cudaraw.CUcontext, h cusparseraw.CusparseHandle, m cusparseraw.CusparseSpMatDescr) (work func(unsafe.Pointer) error, size uint64, cleanup func(), err error) {
		var db, dc cusparseraw.CusparseDnMatDescr
		if err := cusparseraw.CreateDnMatIn(ctx, &db, int64(cols), int64(n), int64(ldb), pb, vt, cusparseraw.CUSPARSE_ORDER_COL); err != nil {
			return nil, 0, nil, err
		}
		if err := cusparseraw.CreateDnMatIn(ctx, &dc, int64(rows), int64(n), int64(ldc), pc, vt, cusparseraw.CUSPARSE_ORDER_COL); err != nil {
			_ = cusparseraw.DestroyDnMatIn(ctx, db)
			return nil, 0, nil, err
		}
		cleanup = func() { _ = errors.Join(cusparseraw.DestroyDnMatIn(ctx, db), cusparseraw.DestroyDnMatIn(ctx, dc)) }
		ap, bp := unsafe.Pointer(&alpha), unsafe.Pointer(&beta)
		nt := cusparseraw.CUSPARSE_OPERATION_NON_TRANSPOSE
		if err := cusparseraw.SpMMBufferSizeIn(ctx, h, nt, nt, ap, m, db, bp, dc, vt, cusparseraw.CUSPARSE_SPMM_ALG_DEFAULT, &size); err != nil {
			cleanup()
			return nil, 0, nil, err
		}
		work = func(ws unsafe.Pointer) error {
			return cusparseraw.SpMMIn(ctx, h, nt, nt, ap, m, db, bp, dc, vt, cusparseraw.CUSPARSE_SPMM_ALG_DEFAULT, ws)
		}
		return work, size, cleanup, nil
	})
}

// run makes the matrix's and the operation's descriptors (prepare), allocates the
// work buffer cuSPARSE asks for on s from the device's pool, and queues the
// operation with cuda.Enqueue (the matrix's arrays read, the dense operands as io
// says, the work buffer written); the buffer is freed after it on s. The stream and
// memory are checked (cuda.CheckEnqueue) before a handle is taken (and made), so that
// a bad argument is reported before cuSPARSE is loaded.
func run(op string, s *cuda.Stream, a Matrix, vt cudaraw.CudaDataType, elem int, values func(cuda.Memory) (unsafe.Pointer, error),
	io []cuda.Use, prepare func(ctx cudaraw.CUcontext, h cusparseraw.CusparseHandle, m cusparseraw.CusparseSpMatDescr) (func(unsafe.Pointer) error, uint64, func(), error)) error {
	fail := func(err error) error { return fmt.Errorf("cusparse: %s: %w", op, err) }
	ptrs, uses, err := a.arrays(elem, values)
	if err != nil {
		return fail(err)
	}
	uses = append(uses, io...)
	// Checked here even with an idle handle: descriptors and the buffer-size query
	// take the operands' addresses before cuda.Enqueue would check them.
	if err := cuda.CheckEnqueue(s, uses...); err != nil {
		return fail(err)
	}
	ctx := s.Context()
	h, err := handles.Take(ctx, s, cudalib.NoKey{})
	if err != nil {
		return fail(err)
	}
	defer handles.Put(s, h)
	c := ctx.Handle()
	m, err := a.describe(ctx, vt, ptrs)
	if err != nil {
		return fail(err)
	}
	defer cusparseraw.DestroySpMatIn(c, m)
	work, size, cleanup, err := prepare(c, h.Raw, m)
	if err != nil {
		return fail(err)
	}
	defer cleanup()
	var ws *cuda.DeviceBuffer
	var wp unsafe.Pointer
	if size > 0 {
		if ws, err = ctx.Alloc(s, int(size)); err != nil {
			return fail(err)
		}
		defer ws.Close()
		p, _ := cuda.DevicePtr[byte](ws)
		wp = unsafe.Pointer(p)
		uses = append(uses, cuda.Writes(ws))
	}
	err = cuda.Enqueue(s, func(cc cudaraw.CUcontext, st cudaraw.CUstream) error {
		if _, err := h.Bind(cc, st, cusparseraw.SetStreamIn); err != nil {
			return err
		}
		return work(wp)
	}, uses...)
	if err != nil {
		return fail(err)
	}
	return nil
}

func checkDims(rows, cols, nnz int) error {
	if rows < 0 || cols < 0 || nnz < 0 || nnz > rows*cols {
		return fmt.Errorf("%w: %d×%d matrix with %d elements", cuda.ErrInvalidArgument, rows, cols, nnz)
	}
	return nil
}

// checkValues checks the matrix's values against T where their memory is typed.
func checkValues[T Float](a Matrix) error {
	v := a.values()
	if v == nil {
		return fmt.Errorf("%w: nil values", cuda.ErrInvalidArgument)
	}
	if _, err := cuda.DevicePtr[T](v); err != nil {
		return fmt.Errorf("values: %w", err)
	}
	return nil
}

func vector[T Float](name string, m cuda.Memory, n int) (unsafe.Pointer, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: %s is nil", cuda.ErrInvalidArgument, name)
	}
	p, err := cuda.DevicePtr[T](m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if m.Size()/elemSize[T]() < n {
		return nil, fmt.Errorf("%w: %s needs %d elements, the memory holds %d", cuda.ErrInvalidArgument, name, n, m.Size()/elemSize[T]())
	}
	return unsafe.Pointer(p), nil
}

func elemSize[T Float]() int { return int(unsafe.Sizeof(*new(T))) }

// valueType is T's CUDA data type, the value type of cuSPARSE's descriptors.
func valueType[T Float]() cudaraw.CudaDataType {
	dt, _ := cudalib.DataType[T]() // float32 and float64 have one
	return dt
}

// Handles: one kept per stream and a per-context cache, as cublas's (cusparseDestroy does not wait for the
// GPU, measured: a dropped handle's OwnedHandle is released promptly).

// MaxIdleHandles is how many idle cuSPARSE handles a context's cache keeps, besides
// the one each stream keeps.
const MaxIdleHandles = 4

// handles are the idle handles, per context.
var handles = cudalib.NewPool[cusparseraw.CusparseHandle, *cusparseraw.OwnedHandle, struct{}](MaxIdleHandles, cusparseraw.Create, cusparseraw.OwnHandle, false)
