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

// Building sparse matrices: from Go slices (NewCSR, NewCOO, NewCSC), from a dense
// matrix on the GPU (DenseToCSR, DenseToCOO, DenseToCSC: cusparseDenseToSparse) and
// back (ToDense: cusparseSparseToDense). A matrix made here owns its three buffers
// (device memory from the stream's pool) and Close frees them; a matrix written as a
// struct literal over the caller's memory owns nothing, and its Close does nothing.

// CSC is a sparse matrix in compressed sparse column format with 0-based int32
// indices: column j holds the elements ColOffsets[j] to ColOffsets[j+1]-1 of
// RowIndices (their rows) and Values.
type CSC struct {
	Rows, Cols, NNZ int
	ColOffsets      cuda.Memory // Cols+1 int32
	RowIndices      cuda.Memory // NNZ int32
	Values          cuda.Memory // NNZ elements

	own owned // the buffers NewCSC or DenseToCSC made
}

func (m *CSC) dims() (int, int, int) { return m.Rows, m.Cols, m.NNZ }
func (m *CSC) values() cuda.Memory   { return m.Values }

func (m *CSC) arrays(elem int, ptr func(cuda.Memory) (unsafe.Pointer, error)) ([3]unsafe.Pointer, []cuda.Use, error) {
	return arrays3(elem, ptr, "column offsets", m.ColOffsets, m.Cols+1, m.RowIndices, m.Values, m.NNZ)
}

// describe makes the descriptor with the context current: cusparseCreateCsc is not
// among the functions with a context argument (headers/cusparse.toml's in_context).
func (m *CSC) describe(ctx *cuda.Context, vt cudaraw.CudaDataType, p [3]unsafe.Pointer) (cusparseraw.CusparseSpMatDescr, error) {
	var d cusparseraw.CusparseSpMatDescr
	err := ctx.Locked(func() error {
		return cusparseraw.CreateCsc(&d, int64(m.Rows), int64(m.Cols), int64(m.NNZ), p[0], p[1], p[2],
			cusparseraw.CUSPARSE_INDEX_32I, cusparseraw.CUSPARSE_INDEX_32I, cusparseraw.CUSPARSE_INDEX_BASE_ZERO, vt)
	})
	return d, err
}

// owned is the device buffers a matrix made by this package holds.
type owned struct {
	bufs []*cuda.DeviceBuffer
}

// Close frees the buffers of a matrix that NewCSR, DenseToCSR or MulSparse made
// (after the work already queued that uses them: the cuda package's memory rules); a
// matrix over the caller's memory owns nothing and Close does nothing. A buffer
// dropped without Close is freed by its own finalizer. Closing twice returns an error
// matching cuda.ErrClosed.
func (m *CSR) Close() error { return m.own.close() }

// Close is CSR.Close, for NewCOO's and DenseToCOO's matrices.
func (m *COO) Close() error { return m.own.close() }

// Close is CSR.Close, for NewCSC's and DenseToCSC's matrices.
func (m *CSC) Close() error { return m.own.close() }

// close closes the buffers.
func (o *owned) close() error {
	var errs []error
	for _, b := range o.bufs {
		errs = append(errs, b.Close())
	}
	return errors.Join(errs...)
}

// NewCSR copies a CSR matrix from Go slices into new device memory on s: rowOffsets
// (rows+1, from 0 to len(values), not decreasing), colIndices (len(values), each in
// [0, cols)) and values. The slices are checked before any CUDA call; they may be
// reused once NewCSR returns.
func NewCSR[T Float](s *cuda.Stream, rows, cols int, rowOffsets, colIndices []int32, values []T) (*CSR, error) {
	b, err := fromSlices(s, "csr", rows, cols, "row", rowOffsets, "column", colIndices, values)
	if err != nil {
		return nil, err
	}
	return &CSR{Rows: rows, Cols: cols, NNZ: len(values), RowOffsets: b[0], ColIndices: b[1], Values: b[2], own: owned{b[:]}}, nil
}

// NewCSC copies a CSC matrix from Go slices into new device memory on s: colOffsets
// (cols+1, from 0 to len(values), not decreasing), rowIndices (len(values), each in
// [0, rows)) and values.
func NewCSC[T Float](s *cuda.Stream, rows, cols int, colOffsets, rowIndices []int32, values []T) (*CSC, error) {
	b, err := fromSlices(s, "csc", cols, rows, "column", colOffsets, "row", rowIndices, values)
	if err != nil {
		return nil, err
	}
	return &CSC{Rows: rows, Cols: cols, NNZ: len(values), ColOffsets: b[0], RowIndices: b[1], Values: b[2], own: owned{b[:]}}, nil
}

// NewCOO copies a COO matrix from Go slices into new device memory on s: rowIndices
// (sorted, each in [0, rows)), colIndices (each in [0, cols)) and values, all of one
// length.
func NewCOO[T Float](s *cuda.Stream, rows, cols int, rowIndices, colIndices []int32, values []T) (*COO, error) {
	const op = "coo"
	if err := checkDims(rows, cols, len(values)); err != nil {
		return nil, fmt.Errorf("cusparse: %s: %w", op, err)
	}
	if len(rowIndices) != len(values) || len(colIndices) != len(values) {
		return nil, fmt.Errorf("cusparse: %s: %w: %d row and %d column indices for %d values", op, cuda.ErrInvalidArgument, len(rowIndices), len(colIndices), len(values))
	}
	if err := checkIndices("row", rowIndices, rows, true); err != nil {
		return nil, fmt.Errorf("cusparse: %s: %w", op, err)
	}
	if err := checkIndices("column", colIndices, cols, false); err != nil {
		return nil, fmt.Errorf("cusparse: %s: %w", op, err)
	}
	b, err := upload(s, rowIndices, colIndices, values)
	if err != nil {
		return nil, fmt.Errorf("cusparse: %s: %w", op, err)
	}
	return &COO{Rows: rows, Cols: cols, NNZ: len(values), RowIndices: b[0], ColIndices: b[1], Values: b[2], own: owned{b[:]}}, nil
}

// fromSlices checks a compressed matrix (CSR: major rows, minor columns; CSC the
// other way) and copies it to the device.
func fromSlices[T Float](s *cuda.Stream, op string, major, minor int, majorName string, offsets []int32, minorName string, indices []int32, values []T) ([3]*cuda.DeviceBuffer, error) {
	fail := func(err error) ([3]*cuda.DeviceBuffer, error) {
		return [3]*cuda.DeviceBuffer{}, fmt.Errorf("cusparse: %s: %w", op, err)
	}
	if err := checkDims(major, minor, len(values)); err != nil {
		return fail(err)
	}
	if len(offsets) != major+1 || len(indices) != len(values) {
		return fail(fmt.Errorf("%w: %d %s offsets for %d %ss, %d %s indices for %d values",
			cuda.ErrInvalidArgument, len(offsets), majorName, major, majorName, len(indices), minorName, len(values)))
	}
	if offsets[0] != 0 || int(offsets[major]) != len(values) {
		return fail(fmt.Errorf("%w: %s offsets run from %d to %d, not from 0 to %d", cuda.ErrInvalidArgument, majorName, offsets[0], offsets[major], len(values)))
	}
	if err := checkIndices(majorName+" offset", offsets, len(values)+1, true); err != nil {
		return fail(err)
	}
	if err := checkIndices(minorName, indices, minor, false); err != nil {
		return fail(err)
	}
	b, err := upload(s, offsets, indices, values)
	if err != nil {
		return fail(err)
	}
	return b, nil
}

// checkIndices checks that each index is in [0, n), and not decreasing if sorted.
func checkIndices(name string, ix []int32, n int, sorted bool) error {
	for i, v := range ix {
		if v < 0 || int(v) >= n || sorted && i > 0 && v < ix[i-1] {
			return fmt.Errorf("%w: %s index %d is %d (of %d; sorted: %v)", cuda.ErrInvalidArgument, name, i, v, n, sorted)
		}
	}
	return nil
}

// upload copies a sparse matrix's three arrays into new buffers on s.
func upload[T Float](s *cuda.Stream, a, b []int32, v []T) ([3]*cuda.DeviceBuffer, error) {
	var out [3]*cuda.DeviceBuffer
	bufs, err := allocArrays[T](s, len(a), len(b), len(v))
	if err != nil {
		return out, err
	}
	errs := []error{cuda.CopyToDeviceAsync(s, bufs[0], a), cuda.CopyToDeviceAsync(s, bufs[1], b)}
	if len(v) > 0 {
		errs = append(errs, cuda.CopyToDeviceAsync(s, bufs[2], v))
	}
	if err := errors.Join(errs...); err != nil {
		(&owned{bufs[:]}).close()
		return out, err
	}
	return bufs, nil
}

// allocArrays allocates a sparse matrix's arrays on s: two of int32 and one of T (at
// least one element each, so that an empty matrix has addresses too).
func allocArrays[T Float](s *cuda.Stream, a, b, v int) ([3]*cuda.DeviceBuffer, error) {
	var out [3]*cuda.DeviceBuffer
	var err error
	if out[0], err = cuda.AllocFor[int32](s, max(a, 1)); err != nil {
		return out, err
	}
	if out[1], err = cuda.AllocFor[int32](s, max(b, 1)); err != nil {
		out[0].Close()
		return out, err
	}
	if out[2], err = cuda.AllocFor[T](s, max(v, 1)); err != nil {
		out[0].Close()
		out[1].Close()
		return out, err
	}
	return out, nil
}

// dense checks a column-major rows×cols matrix of T with leading dimension ld.
func dense[T Float](name string, m cuda.Memory, rows, cols, ld int) (unsafe.Pointer, error) {
	if rows < 0 || cols < 0 || ld < max(1, rows) {
		return nil, fmt.Errorf("%w: %s: %d×%d with leading dimension %d", cuda.ErrInvalidArgument, name, rows, cols, ld)
	}
	n := 0
	if cols > 0 {
		n = ld*(cols-1) + rows
	}
	return vector[T](name, m, n)
}

// DenseToCSR converts the column-major rows×cols matrix a of T (leading dimension
// lda) into a new CSR matrix of its non-zero elements, on s:
// cusparseDenseToSparse_bufferSize, _analysis (which counts them: the call waits for
// s's work up to it) and _convert. Close the result.
func DenseToCSR[T Float](s *cuda.Stream, rows, cols int, a cuda.Memory, lda int) (*CSR, error) {
	m := &CSR{Rows: rows, Cols: cols}
	err := fromDense[T](s, "dense to csr", m, rows+1, a, lda, func(b [3]*cuda.DeviceBuffer, nnz int) {
		m.NNZ, m.RowOffsets, m.ColIndices, m.Values, m.own.bufs = nnz, b[0], b[1], b[2], b[:]
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// DenseToCSC is DenseToCSR for a CSC matrix.
func DenseToCSC[T Float](s *cuda.Stream, rows, cols int, a cuda.Memory, lda int) (*CSC, error) {
	m := &CSC{Rows: rows, Cols: cols}
	err := fromDense[T](s, "dense to csc", m, cols+1, a, lda, func(b [3]*cuda.DeviceBuffer, nnz int) {
		m.NNZ, m.ColOffsets, m.RowIndices, m.Values, m.own.bufs = nnz, b[0], b[1], b[2], b[:]
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// DenseToCOO is DenseToCSR for a COO matrix (sorted by row).
func DenseToCOO[T Float](s *cuda.Stream, rows, cols int, a cuda.Memory, lda int) (*COO, error) {
	m := &COO{Rows: rows, Cols: cols}
	err := fromDense[T](s, "dense to coo", m, -1, a, lda, func(b [3]*cuda.DeviceBuffer, nnz int) {
		m.NNZ, m.RowIndices, m.ColIndices, m.Values, m.own.bufs = nnz, b[0], b[1], b[2], b[:]
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// fromDense converts a into m (whose dimensions are set) and gives set its buffers
// and count: offsets is the length of its first array (-1: nnz, COO).
func fromDense[T Float](s *cuda.Stream, op string, m Matrix, offsets int, a cuda.Memory, lda int, set func([3]*cuda.DeviceBuffer, int)) error {
	fail := func(err error) error { return fmt.Errorf("cusparse: %s: %w", op, err) }
	rows, cols, _ := m.dims()
	if err := checkDims(rows, cols, 0); err != nil {
		return fail(err)
	}
	pa, err := dense[T]("A", a, rows, cols, lda)
	if err != nil {
		return fail(err)
	}
	if err := cuda.CheckEnqueue(s, cuda.Reads(a)); err != nil {
		return fail(err)
	}
	ctx := s.Context()
	vt := valueType[T]()
	h, err := handles.Take(ctx, s, cudalib.NoKey{})
	if err != nil {
		return fail(err)
	}
	defer handles.Put(s, h)
	// The descriptor first has no index and value arrays (cuSPARSE's sample): their
	// sizes depend on the count. A CSR or CSC matrix has its offsets from the start:
	// the analysis may write them.
	var first *cuda.DeviceBuffer
	var p [3]unsafe.Pointer
	if offsets >= 0 {
		if first, err = cuda.AllocFor[int32](s, offsets); err != nil {
			return fail(err)
		}
		p[0] = bufPtr[int32](first)
	}
	keep := false
	defer func() {
		if !keep && first != nil {
			first.Close()
		}
	}()
	var d cusparseraw.CusparseSpMatDescr
	if d, err = m.describe(ctx, vt, p); err != nil {
		return fail(err)
	}
	var da cusparseraw.CusparseDnMatDescr
	var size uint64
	alg := cusparseraw.CUSPARSE_DENSETOSPARSE_ALG_DEFAULT
	err = ctx.Locked(func() error {
		if err := cusparseraw.CreateDnMat(&da, int64(rows), int64(cols), int64(lda), pa, vt, cusparseraw.CUSPARSE_ORDER_COL); err != nil {
			return err
		}
		return cusparseraw.DenseToSparseBufferSize(h.Raw, da, d, alg, &size)
	})
	defer ctx.Locked(func() error {
		return errors.Join(cusparseraw.DestroySpMat(d), cusparseraw.DestroyDnMat(da))
	})
	if err != nil {
		return fail(err)
	}
	ws, wp, err := workspace(s, size)
	if err != nil {
		return fail(err)
	}
	defer closeBuffer(ws)
	uses := []cuda.Use{cuda.Reads(a)}
	if ws != nil {
		uses = append(uses, cuda.Writes(ws))
	}
	if first != nil {
		uses = append(uses, cuda.Writes(first))
	}
	if err := queue(s, h, func(h cusparseraw.CusparseHandle) error {
		return cusparseraw.DenseToSparseAnalysis(h, da, d, alg, wp)
	}, uses...); err != nil {
		return fail(err)
	}
	nnz, err := spMatNNZ(ctx, d)
	if err != nil {
		return fail(err)
	}
	var bufs [3]*cuda.DeviceBuffer
	if first == nil {
		if bufs, err = allocArrays[T](s, nnz, nnz, nnz); err != nil {
			return fail(err)
		}
	} else {
		var rest [3]*cuda.DeviceBuffer
		if rest, err = allocArrays[T](s, 1, nnz, nnz); err != nil {
			return fail(err)
		}
		rest[0].Close()
		bufs = [3]*cuda.DeviceBuffer{first, rest[1], rest[2]}
	}
	p = [3]unsafe.Pointer{bufPtr[int32](bufs[0]), bufPtr[int32](bufs[1]), bufPtr[T](bufs[2])}
	err = queue(s, h, func(h cusparseraw.CusparseHandle) error {
		if err := setPointers(m, d, p); err != nil {
			return err
		}
		return cusparseraw.DenseToSparseConvert(h, da, d, alg, wp)
	}, append(uses, cuda.Writes(bufs[0]), cuda.Writes(bufs[1]), cuda.Writes(bufs[2]))...)
	if err != nil {
		(&owned{bufs[1:]}).close()
		return fail(err)
	}
	keep = true
	set(bufs, nnz)
	return nil
}

// setPointers gives the descriptor d of a matrix of m's format the arrays p (with
// the context current).
func setPointers(m Matrix, d cusparseraw.CusparseSpMatDescr, p [3]unsafe.Pointer) error {
	switch m.(type) {
	case *CSR:
		return cusparseraw.CsrSetPointers(d, p[0], p[1], p[2])
	case *CSC:
		return cusparseraw.CscSetPointers(d, p[0], p[1], p[2])
	default:
		return cusparseraw.CooSetPointers(d, p[0], p[1], p[2])
	}
}

// spMatNNZ returns the stored elements of the matrix that d describes.
func spMatNNZ(ctx *cuda.Context, d cusparseraw.CusparseSpMatDescr) (int, error) {
	var r, c, n int64
	err := ctx.Locked(func() error { return cusparseraw.SpMatGetSize(d, &r, &c, &n) })
	return int(n), err
}

// ToDense writes the sparse matrix a (values of T) into the column-major
// a.Rows×a.Cols matrix out (leading dimension ld), zeros included, on s:
// cusparseSparseToDense.
func ToDense[T Float](s *cuda.Stream, a Matrix, out cuda.Memory, ld int) error {
	const op = "sparse to dense"
	if a == nil {
		return fmt.Errorf("cusparse: %s: %w: nil matrix", op, cuda.ErrInvalidArgument)
	}
	rows, cols, nnz := a.dims()
	if err := checkDims(rows, cols, nnz); err != nil {
		return fmt.Errorf("cusparse: %s: %w", op, err)
	}
	if err := checkValues[T](a); err != nil {
		return fmt.Errorf("cusparse: %s: %w", op, err)
	}
	po, err := dense[T]("out", out, rows, cols, ld)
	if err != nil {
		return fmt.Errorf("cusparse: %s: %w", op, err)
	}
	vt := valueType[T]()
	alg := cusparseraw.CUSPARSE_SPARSETODENSE_ALG_DEFAULT
	cctx := s.Context()
	return run(op, s, a, vt, elemSize[T](), ptrOf[T], []cuda.Use{cuda.Writes(out)}, func(ctx cudaraw.CUcontext, h cusparseraw.CusparseHandle, m cusparseraw.CusparseSpMatDescr) (func(unsafe.Pointer) error, uint64, func(), error) {
		var db cusparseraw.CusparseDnMatDescr
		if err := cusparseraw.CreateDnMatIn(ctx, &db, int64(rows), int64(cols), int64(ld), po, vt, cusparseraw.CUSPARSE_ORDER_COL); err != nil {
			return nil, 0, nil, err
		}
		cleanup := func() { _ = cusparseraw.DestroyDnMatIn(ctx, db) }
		var size uint64
		if err := cctx.Locked(func() error { return cusparseraw.SparseToDenseBufferSize(h, m, db, alg, &size) }); err != nil {
			cleanup()
			return nil, 0, nil, err
		}
		work := func(ws unsafe.Pointer) error {
			return cctx.Locked(func() error { return cusparseraw.SparseToDense(h, m, db, alg, ws) })
		}
		return work, size, cleanup, nil
	})
}
