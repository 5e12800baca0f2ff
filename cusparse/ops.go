package cusparse

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cudalib"
	"github.com/gocuda/gocuda/cusparse/cusparseraw"
	"github.com/gocuda/gocuda/internal/errs"
	"github.com/gocuda/gocuda/resource"
)

// handle is a cached cuSPARSE handle.
type handle = cudalib.Handle[cudalib.NoKey, cusparseraw.CusparseHandle, *cusparseraw.OwnedHandle, struct{}]

// queue runs f through cuda.Enqueue on s with h bound to s and the context current,
// recording uses: for the calls that are not among headers/cusparse.toml's
// in_context functions.
func queue(s *cuda.Stream, h *handle, f func(cusparseraw.CusparseHandle) error, uses ...cuda.Use) error {
	ctx := s.Context()
	return cuda.Enqueue(s, func(c cudaraw.CUcontext, st cudaraw.CUstream) error {
		if _, err := h.Bind(c, st, cusparseraw.SetStreamIn); err != nil {
			return err
		}
		return ctx.Locked(func() error { return f(h.Raw) })
	}, uses...)
}

// workspace allocates size bytes on s from the device's pool (nil for 0) and
// returns them with their address.
func workspace(s *cuda.Stream, size uint64) (*cuda.DeviceBuffer, unsafe.Pointer, error) {
	if size == 0 {
		return nil, nil, nil
	}
	b, err := s.Context().Alloc(s, int(size))
	if err != nil {
		return nil, nil, err
	}
	return b, bufPtr[byte](b), nil
}

// bufPtr returns the address of b, a buffer of T (or untyped), for the raw layer.
func bufPtr[T any](b *cuda.DeviceBuffer) unsafe.Pointer {
	if b == nil {
		return nil
	}
	p, _ := cuda.DevicePtr[T](b) // the callers made b, of T
	return unsafe.Pointer(p)
}

// closeBuffer closes b unless it is nil.
func closeBuffer(b *cuda.DeviceBuffer) {
	if b != nil {
		b.Close()
	}
}

// MulSparse returns the new CSR matrix C = alpha·A·B of the CSR matrices A
// (m×k) and B (k×n) of T, computed on s: cusparseSpGEMM_workEstimation, _compute and
// _copy with an SpGEMM descriptor and two work buffers from the device's pool,
// released before it returns. Counting C's elements waits for s's work up to the
// call (cuSPARSE reads the count back). Close the result.
func MulSparse[T Float](s *cuda.Stream, alpha T, a, b *CSR) (*CSR, error) {
	const op = "spgemm"
	fail := func(err error) (*CSR, error) { return nil, fmt.Errorf("cusparse: %s: %w", op, err) }
	if a == nil || b == nil {
		return fail(fmt.Errorf("%w: nil matrix", cuda.ErrInvalidArgument))
	}
	for _, m := range []*CSR{a, b} {
		if err := checkDims(m.dims()); err != nil {
			return fail(err)
		}
		if err := checkValues[T](m); err != nil {
			return fail(err)
		}
	}
	if a.Cols != b.Rows {
		return fail(fmt.Errorf("%w: A is %d×%d, B %d×%d", cuda.ErrInvalidArgument, a.Rows, a.Cols, b.Rows, b.Cols))
	}
	elem := elemSize[T]()
	pa, ua, err := a.arrays(elem, ptrOf[T])
	if err != nil {
		return fail(fmt.Errorf("A: %w", err))
	}
	pb, ub, err := b.arrays(elem, ptrOf[T])
	if err != nil {
		return fail(fmt.Errorf("B: %w", err))
	}
	uses := append(ua, ub...)
	if err := cuda.CheckEnqueue(s, uses...); err != nil {
		return fail(err)
	}
	ctx := s.Context()
	vt := valueType[T]()
	h, err := handles.Take(ctx, s, cudalib.NoKey{})
	if err != nil {
		return fail(err)
	}
	defer handles.Put(s, h)
	offsets, err := cuda.AllocFor[int32](s, a.Rows+1)
	if err != nil {
		return fail(err)
	}
	keep := false
	defer func() {
		if !keep {
			offsets.Close()
		}
	}()
	c := &CSR{Rows: a.Rows, Cols: b.Cols}
	var da, db, dc cusparseraw.CusparseSpMatDescr
	if da, err = a.describe(ctx, vt, pa); err != nil {
		return fail(err)
	}
	defer ctx.Locked(func() error { return cusparseraw.DestroySpMat(da) })
	if db, err = b.describe(ctx, vt, pb); err != nil {
		return fail(err)
	}
	defer ctx.Locked(func() error { return cusparseraw.DestroySpMat(db) })
	if dc, err = c.describe(ctx, vt, [3]unsafe.Pointer{bufPtr[int32](offsets)}); err != nil {
		return fail(err)
	}
	defer ctx.Locked(func() error { return cusparseraw.DestroySpMat(dc) })
	var g cusparseraw.CusparseSpGEMMDescr
	if err := ctx.Locked(func() error { return cusparseraw.SpGEMMCreateDescr(&g) }); err != nil {
		return fail(err)
	}
	defer ctx.Locked(func() error { return cusparseraw.SpGEMMDestroyDescr(g) })

	nt, alg := cusparseraw.CUSPARSE_OPERATION_NON_TRANSPOSE, cusparseraw.CUSPARSE_SPGEMM_DEFAULT
	var beta T
	ap, bp := unsafe.Pointer(&alpha), unsafe.Pointer(&beta)
	uses = append(uses, cuda.Writes(offsets))
	// Each phase asks for its buffer's size (a null buffer), then runs with it.
	var size1, size2 uint64
	var ws1, ws2 *cuda.DeviceBuffer
	var wp1, wp2 unsafe.Pointer
	defer func() { closeBuffer(ws1); closeBuffer(ws2) }()
	estimate := func(h cusparseraw.CusparseHandle) error {
		return cusparseraw.SpGEMMWorkEstimation(h, nt, nt, ap, da, db, bp, dc, vt, alg, g, &size1, wp1)
	}
	compute := func(h cusparseraw.CusparseHandle) error {
		return cusparseraw.SpGEMMCompute(h, nt, nt, ap, da, db, bp, dc, vt, alg, g, &size2, wp2)
	}
	if err := queue(s, h, estimate, uses...); err != nil {
		return fail(err)
	}
	if ws1, wp1, err = workspace(s, size1); err != nil {
		return fail(err)
	}
	if ws1 != nil {
		uses = append(uses, cuda.Writes(ws1))
	}
	if err := queue(s, h, func(h cusparseraw.CusparseHandle) error {
		if err := estimate(h); err != nil {
			return err
		}
		return compute(h)
	}, uses...); err != nil {
		return fail(err)
	}
	if ws2, wp2, err = workspace(s, size2); err != nil {
		return fail(err)
	}
	if ws2 != nil {
		uses = append(uses, cuda.Writes(ws2))
	}
	if err := queue(s, h, compute, uses...); err != nil {
		return fail(err)
	}
	nnz, err := spMatNNZ(ctx, dc)
	if err != nil {
		return fail(err)
	}
	rest, err := allocArrays[T](s, 1, nnz, nnz)
	if err != nil {
		return fail(err)
	}
	rest[0].Close()
	bufs := [3]*cuda.DeviceBuffer{offsets, rest[1], rest[2]}
	err = queue(s, h, func(h cusparseraw.CusparseHandle) error {
		if err := cusparseraw.CsrSetPointers(dc, bufPtr[int32](offsets), bufPtr[int32](rest[1]), bufPtr[T](rest[2])); err != nil {
			return err
		}
		return cusparseraw.SpGEMMCopy(h, nt, nt, ap, da, db, bp, dc, vt, alg, g)
	}, append(uses, cuda.Writes(rest[1]), cuda.Writes(rest[2]))...)
	if err != nil {
		(&owned{rest[1:]}).close()
		return fail(err)
	}
	keep = true
	c.NNZ, c.RowOffsets, c.ColIndices, c.Values, c.own.bufs = nnz, bufs[0], bufs[1], bufs[2], bufs[:]
	return c, nil
}

// Fill is the triangle of a sparse matrix that a triangular solve reads: Lower or
// Upper.
type Fill = cusparseraw.CusparseFillMode

// Triangles.
const (
	Lower Fill = cusparseraw.CUSPARSE_FILL_MODE_LOWER
	Upper Fill = cusparseraw.CUSPARSE_FILL_MODE_UPPER
)

// Diag says whether a triangular matrix's diagonal is read (NonUnit) or taken as
// ones (Unit).
type Diag = cusparseraw.CusparseDiagType

// Diagonals.
const (
	NonUnit Diag = cusparseraw.CUSPARSE_DIAG_TYPE_NON_UNIT
	Unit    Diag = cusparseraw.CUSPARSE_DIAG_TYPE_UNIT
)

// analysis is what a triangular solve keeps from its analysis: the matrix's
// descriptor (over its arrays), cuSPARSE's descriptor of the solve (SpSV or SpSM),
// and the work buffer that the analysis filled and every solve reads.
type analysis struct {
	ctx    *cuda.Context
	a      Matrix
	op     Op
	n      int        // the matrix's order
	uses   []cuda.Use // the matrix's arrays, read
	mu     sync.Mutex // held while a solve is queued; Close waits for it
	mat    *cusparseraw.OwnedSpMat
	descr  interface{ Close() error } // *OwnedSpSV or *OwnedSpSM
	work   *cuda.DeviceBuffer
	closed bool
	reg    *resource.Registration
}

// analyse checks a (square, CSR or COO, values of T) and makes its descriptor with
// fill and diag, a solve descriptor (newDescr), and runs the analysis on s with a
// work buffer of the size that size reports; scratch is the dense memory of rows
// elements the analysis's dense descriptors point at.
func analyse[T Float](op string, s *cuda.Stream, trans Op, a Matrix, fill Fill, diag Diag, scratchElems int,
	newDescr func() (interface{ Close() error }, error),
	run func(h cusparseraw.CusparseHandle, mat cusparseraw.CusparseSpMatDescr, descr any, scratch unsafe.Pointer, size *uint64, work unsafe.Pointer) error) (*analysis, error) {
	fail := func(err error) (*analysis, error) { return nil, fmt.Errorf("cusparse: %s: %w", op, err) }
	switch a.(type) {
	case *CSR, *COO:
	case nil:
		return fail(fmt.Errorf("%w: nil matrix", cuda.ErrInvalidArgument))
	default:
		return fail(fmt.Errorf("%w: %T: a triangular solve takes a CSR or COO matrix", cuda.ErrInvalidArgument, a))
	}
	rows, cols, nnz := a.dims()
	if err := checkDims(rows, cols, nnz); err != nil {
		return fail(err)
	}
	if rows != cols {
		return fail(fmt.Errorf("%w: %d×%d matrix is not square", cuda.ErrInvalidArgument, rows, cols))
	}
	if trans != NoTrans && trans != Trans {
		return fail(fmt.Errorf("%w: operation %d", cuda.ErrInvalidArgument, int(trans)))
	}
	if fill != Lower && fill != Upper || diag != NonUnit && diag != Unit {
		return fail(fmt.Errorf("%w: fill %d, diag %d", cuda.ErrInvalidArgument, int(fill), int(diag)))
	}
	if err := checkValues[T](a); err != nil {
		return fail(err)
	}
	ptrs, uses, err := a.arrays(elemSize[T](), ptrOf[T])
	if err != nil {
		return fail(err)
	}
	if err := cuda.CheckEnqueue(s, uses...); err != nil {
		return fail(err)
	}
	ctx := s.Context()
	h, err := handles.Take(ctx, s, cudalib.NoKey{})
	if err != nil {
		return fail(err)
	}
	defer handles.Put(s, h)
	d, err := a.describe(ctx, valueType[T](), ptrs)
	if err != nil {
		return fail(err)
	}
	an := &analysis{ctx: ctx, a: a, op: trans, n: rows, uses: uses, mat: cusparseraw.OwnSpMat(d)}
	ok := false
	defer func() {
		if !ok {
			an.release()
		}
	}()
	err = ctx.Locked(func() error {
		if err := cusparseraw.SpMatSetAttribute(d, cusparseraw.CUSPARSE_SPMAT_FILL_MODE, unsafe.Pointer(&fill), uint64(unsafe.Sizeof(fill))); err != nil {
			return err
		}
		if err := cusparseraw.SpMatSetAttribute(d, cusparseraw.CUSPARSE_SPMAT_DIAG_TYPE, unsafe.Pointer(&diag), uint64(unsafe.Sizeof(diag))); err != nil {
			return err
		}
		an.descr, err = newDescr()
		return err
	})
	if err != nil {
		return fail(err)
	}
	scratch, err := cuda.AllocFor[T](s, max(scratchElems, 1))
	if err != nil {
		return fail(err)
	}
	defer scratch.Close()
	var size uint64
	if err := ctx.Locked(func() error { return run(h.Raw, d, an.descr, bufPtr[T](scratch), &size, nil) }); err != nil {
		return fail(err)
	}
	var wp unsafe.Pointer
	if an.work, wp, err = workspace(s, max(size, 1)); err != nil {
		return fail(err)
	}
	err = queue(s, h, func(h cusparseraw.CusparseHandle) error {
		return run(h, d, an.descr, bufPtr[T](scratch), nil, wp)
	}, append(uses[:len(uses):len(uses)], cuda.Writes(scratch), cuda.Writes(an.work))...)
	if err != nil {
		return fail(err)
	}
	ok = true
	return an, nil
}

// release destroys the descriptors and frees the work buffer (Close, or a dropped
// solve's finalizer: cusparseSpSV_destroyDescr, cusparseSpSM_destroyDescr and
// cusparseDestroySpMat return at once, headers/cusparse.toml).
func (an *analysis) release() error {
	an.mu.Lock()
	defer an.mu.Unlock()
	if an.closed {
		return nil
	}
	an.closed = true
	err := an.mat.Close()
	if an.descr != nil {
		err = errors.Join(err, an.descr.Close())
	}
	if an.work != nil {
		err = errors.Join(err, an.work.Close())
	}
	return err
}

// solve queues f (the solve with a handle bound to s and the context current) on s,
// unless the analysis is closed; io are the dense operands' uses.
func (an *analysis) solve(op string, s *cuda.Stream, io []cuda.Use, f func(h cusparseraw.CusparseHandle, mat cusparseraw.CusparseSpMatDescr, descr any) error) error {
	fail := func(err error) error { return fmt.Errorf("cusparse: %s: %w", op, err) }
	uses := append(append(io, an.uses...), cuda.Writes(an.work))
	an.mu.Lock()
	defer an.mu.Unlock()
	if an.closed {
		return fail(cuda.ErrClosed)
	}
	if err := cuda.CheckEnqueue(s, uses...); err != nil {
		return fail(err)
	}
	h, err := handles.Take(s.Context(), s, cudalib.NoKey{})
	if err != nil {
		return fail(err)
	}
	defer handles.Put(s, h)
	err = queue(s, h, func(h cusparseraw.CusparseHandle) error { return f(h, an.mat.Handle(), an.descr) }, uses...)
	if err != nil {
		return fail(err)
	}
	return nil
}

// closeAnalysis is the Close of the solve types.
func closeAnalysis(what string, reg *resource.Registration) error {
	if reg == nil || reg.Release() != nil {
		return errs.Closed("cusparse: " + what)
	}
	return nil
}

// TriangularSolve solves op(A)·y = x for a sparse triangular matrix A (CSR or COO,
// values of T) with one right-hand side x: cusparseSpSV. NewTriangularSolve runs the
// analysis once (cusparseSpSV_analysis); each Solve reuses it. The solve keeps A's
// descriptor, its SpSV descriptor and the analysis's work buffer (from the device's
// pool) until Close; A's memory must stay open and unchanged meanwhile (its arrays
// take part in every Solve's hand-off, read).
//
// A TriangularSolve is safe for concurrent use: Solves are queued one at a time;
// Close waits for a Solve being queued, and a Solve after Close fails with
// cuda.ErrClosed. One dropped without Close is released through
// resource.ResourceFinalizer (its descriptors' destroys return at once).
type TriangularSolve[T Float] struct {
	an  *analysis
	reg *resource.Registration
}

// NewTriangularSolve analyses the triangle fill of the square matrix a (with its
// diagonal read or taken as ones: diag) for solving op(A)·y = x on s (trans: NoTrans
// or Trans).
func NewTriangularSolve[T Float](s *cuda.Stream, trans Op, a Matrix, fill Fill, diag Diag) (*TriangularSolve[T], error) {
	vt := valueType[T]()
	alg := cusparseraw.CUSPARSE_SPSV_ALG_DEFAULT
	one := T(1)
	an, err := analyse[T]("spsv", s, trans, a, fill, diag, 0, func() (interface{ Close() error }, error) {
		return cusparseraw.NewOwnedSpSV()
	}, func(h cusparseraw.CusparseHandle, mat cusparseraw.CusparseSpMatDescr, descr any, scratch unsafe.Pointer, size *uint64, work unsafe.Pointer) error {
		n, _, _ := a.dims()
		return withVecs(vt, n, scratch, scratch, func(x, y cusparseraw.CusparseDnVecDescr) error {
			sv := descr.(*cusparseraw.OwnedSpSV).Handle()
			if size != nil {
				return cusparseraw.SpSVBufferSize(h, trans, unsafe.Pointer(&one), mat, x, y, vt, alg, sv, size)
			}
			return cusparseraw.SpSVAnalysis(h, trans, unsafe.Pointer(&one), mat, x, y, vt, alg, sv, work)
		})
	})
	if err != nil {
		return nil, err
	}
	t := &TriangularSolve[T]{an: an}
	t.reg = resource.ResourceFinalizer((*TriangularSolve[T]).release, t, false, resource.Kind("cusparse triangular solve"))
	return t, nil
}

func (t *TriangularSolve[T]) release() error { return t.an.release() }

// Close destroys the solve's descriptors and frees its work buffer (after the work
// queued with it). Closing again, or a nil TriangularSolve, returns an error matching
// cuda.ErrClosed.
func (t *TriangularSolve[T]) Close() error {
	if t == nil {
		return errs.Closed("cusparse: triangular solve")
	}
	err := closeAnalysis("triangular solve", t.reg)
	runtime.KeepAlive(t)
	return err
}

// Solve writes the solution y of op(A)·y = x on s (x and y: A.Rows elements of T; they
// may be the same memory): cusparseSpSV_solve.
func (t *TriangularSolve[T]) Solve(s *cuda.Stream, x, y cuda.Memory) error {
	const op = "spsv"
	if t == nil {
		return fmt.Errorf("cusparse: %s: %w: nil solve", op, cuda.ErrInvalidArgument)
	}
	n := t.an.n
	px, err := vector[T]("x", x, n)
	if err != nil {
		return fmt.Errorf("cusparse: %s: %w", op, err)
	}
	py, err := vector[T]("y", y, n)
	if err != nil {
		return fmt.Errorf("cusparse: %s: %w", op, err)
	}
	vt, trans, one := valueType[T](), t.an.op, T(1)
	err = t.an.solve(op, s, []cuda.Use{cuda.Reads(x), cuda.Writes(y)}, func(h cusparseraw.CusparseHandle, mat cusparseraw.CusparseSpMatDescr, descr any) error {
		return withVecs(vt, n, px, py, func(dx, dy cusparseraw.CusparseDnVecDescr) error {
			return cusparseraw.SpSVSolve(h, trans, unsafe.Pointer(&one), mat, dx, dy, vt, cusparseraw.CUSPARSE_SPSV_ALG_DEFAULT, descr.(*cusparseraw.OwnedSpSV).Handle())
		})
	})
	runtime.KeepAlive(t)
	return err
}

// withVecs runs f with dense vector descriptors of n elements at x and y (the
// context current).
func withVecs(vt cudaraw.CudaDataType, n int, x, y unsafe.Pointer, f func(x, y cusparseraw.CusparseDnVecDescr) error) error {
	var dx, dy cusparseraw.CusparseDnVecDescr
	if err := cusparseraw.CreateDnVec(&dx, int64(n), x, vt); err != nil {
		return err
	}
	defer cusparseraw.DestroyDnVec(dx)
	if err := cusparseraw.CreateDnVec(&dy, int64(n), y, vt); err != nil {
		return err
	}
	defer cusparseraw.DestroyDnVec(dy)
	return f(dx, dy)
}

// withMats runs f with dense column-major n×k matrix descriptors (leading dimension
// n) at b and c (the context current).
func withMats(vt cudaraw.CudaDataType, n, k int, b, c unsafe.Pointer, f func(b, c cusparseraw.CusparseDnMatDescr) error) error {
	var db, dc cusparseraw.CusparseDnMatDescr
	ld := int64(max(n, 1))
	if err := cusparseraw.CreateDnMat(&db, int64(n), int64(k), ld, b, vt, cusparseraw.CUSPARSE_ORDER_COL); err != nil {
		return err
	}
	defer cusparseraw.DestroyDnMat(db)
	if err := cusparseraw.CreateDnMat(&dc, int64(n), int64(k), ld, c, vt, cusparseraw.CUSPARSE_ORDER_COL); err != nil {
		return err
	}
	defer cusparseraw.DestroyDnMat(dc)
	return f(db, dc)
}

// TriangularSolveMat solves op(A)·C = B for a sparse triangular matrix A (CSR or
// COO, values of T) with k right-hand sides, the columns of the dense column-major
// A.Rows×k matrices B and C (leading dimension A.Rows): cusparseSpSM.
// NewTriangularSolveMat runs the analysis once (cusparseSpSM_analysis) for k
// columns; each Solve reuses it. What it keeps, and its concurrency contract, are
// TriangularSolve's.
type TriangularSolveMat[T Float] struct {
	an  *analysis
	k   int
	reg *resource.Registration
}

// NewTriangularSolveMat analyses the triangle fill of the square matrix a (diag: its
// diagonal read or taken as ones) for solving op(A)·C = B with k columns on s.
func NewTriangularSolveMat[T Float](s *cuda.Stream, trans Op, a Matrix, fill Fill, diag Diag, k int) (*TriangularSolveMat[T], error) {
	if k < 1 {
		return nil, fmt.Errorf("cusparse: spsm: %w: %d columns", cuda.ErrInvalidArgument, k)
	}
	vt := valueType[T]()
	alg := cusparseraw.CUSPARSE_SPSM_ALG_DEFAULT
	nt := cusparseraw.CUSPARSE_OPERATION_NON_TRANSPOSE
	one := T(1)
	n := 0
	if a != nil {
		n, _, _ = a.dims()
	}
	an, err := analyse[T]("spsm", s, trans, a, fill, diag, max(n, 0)*k, func() (interface{ Close() error }, error) {
		return cusparseraw.NewOwnedSpSM()
	}, func(h cusparseraw.CusparseHandle, mat cusparseraw.CusparseSpMatDescr, descr any, scratch unsafe.Pointer, size *uint64, work unsafe.Pointer) error {
		return withMats(vt, n, k, scratch, scratch, func(b, c cusparseraw.CusparseDnMatDescr) error {
			sm := descr.(*cusparseraw.OwnedSpSM).Handle()
			if size != nil {
				return cusparseraw.SpSMBufferSize(h, trans, nt, unsafe.Pointer(&one), mat, b, c, vt, alg, sm, size)
			}
			return cusparseraw.SpSMAnalysis(h, trans, nt, unsafe.Pointer(&one), mat, b, c, vt, alg, sm, work)
		})
	})
	if err != nil {
		return nil, err
	}
	t := &TriangularSolveMat[T]{an: an, k: k}
	t.reg = resource.ResourceFinalizer((*TriangularSolveMat[T]).release, t, false, resource.Kind("cusparse triangular solve (matrix)"))
	return t, nil
}

func (t *TriangularSolveMat[T]) release() error { return t.an.release() }

// Close is TriangularSolve.Close.
func (t *TriangularSolveMat[T]) Close() error {
	if t == nil {
		return errs.Closed("cusparse: triangular solve")
	}
	err := closeAnalysis("triangular solve", t.reg)
	runtime.KeepAlive(t)
	return err
}

// Solve writes the solution C of op(A)·C = B on s (B and C: A.Rows×k elements of T,
// column-major; distinct memory): cusparseSpSM_solve.
func (t *TriangularSolveMat[T]) Solve(s *cuda.Stream, b, c cuda.Memory) error {
	const op = "spsm"
	if t == nil {
		return fmt.Errorf("cusparse: %s: %w: nil solve", op, cuda.ErrInvalidArgument)
	}
	n, k := t.an.n, t.k
	pb, err := vector[T]("B", b, n*k)
	if err != nil {
		return fmt.Errorf("cusparse: %s: %w", op, err)
	}
	pc, err := vector[T]("C", c, n*k)
	if err != nil {
		return fmt.Errorf("cusparse: %s: %w", op, err)
	}
	vt, trans, one := valueType[T](), t.an.op, T(1)
	nt := cusparseraw.CUSPARSE_OPERATION_NON_TRANSPOSE
	err = t.an.solve(op, s, []cuda.Use{cuda.Reads(b), cuda.Writes(c)}, func(h cusparseraw.CusparseHandle, mat cusparseraw.CusparseSpMatDescr, descr any) error {
		return withMats(vt, n, k, pb, pc, func(db, dc cusparseraw.CusparseDnMatDescr) error {
			return cusparseraw.SpSMSolve(h, trans, nt, unsafe.Pointer(&one), mat, db, dc, vt, cusparseraw.CUSPARSE_SPSM_ALG_DEFAULT, descr.(*cusparseraw.OwnedSpSM).Handle())
		})
	})
	runtime.KeepAlive(t)
	return err
}
