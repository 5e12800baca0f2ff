package main

import (
	"unsafe"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cusparse/cusparseraw"
)

// Probes of cuSPARSE's analysis objects (headers/cusparse.toml): the SpSV, SpSM and
// SpGEMM descriptors of the generic API and the legacy info objects. An analysis
// object that was only created holds nothing, and its destroy would measure a free of
// a small host struct; so each probe puts its object through what fills it (the
// analysis phase with its buffer, and the factorization, sort, coloring or count that
// uses it) on a small matrix, waits for the GPU, and only then hands the destroy to
// Measure. The handle, matrices and buffers are the cleanup's, released once the spin
// kernel is over.

func init() {
	for name, mk := range map[string]func(e *Env) (func() error, func(), error){
		"cusparseSpSV_destroyDescr":   probeSpSV,
		"cusparseSpSM_destroyDescr":   probeSpSM,
		"cusparseSpGEMM_destroyDescr": probeSpGEMM,
		"cusparseDestroyCsric02Info":  probeCsric02,
		"cusparseDestroyCsrilu02Info": probeCsrilu02,
		"cusparseDestroyBsric02Info":  probeBsric02,
		"cusparseDestroyBsrilu02Info": probeBsrilu02,
		"cusparseDestroyBsrsv2Info":   probeBsrsv2,
		"cusparseDestroyBsrsm2Info":   probeBsrsm2,
		"cusparseDestroyCsru2csrInfo": probeCsru2csr,
		"cusparseDestroyColorInfo":    probeColorInfo,
		"cusparseDestroyPruneInfo":    probePruneInfo,
	} {
		if _, dup := probes[name]; dup {
			panic("blockprobe: two probes for " + name + " (probes.go and probes_cusparse.go)")
		}
		probes[name] = []Probe{{Make: mk}}
	}
	probes["cusparseDestroy"] = append(probes["cusparseDestroy"], Probe{Variant: "used", Make: probeUsedHandle})
	// The analysis objects fresh too: made and released without analysis (as a
	// program that fails between the two would), which is not the same work.
	for name, mk := range map[string]func(e *Env) (func() error, func(), error){
		"cusparseSpSV_destroyDescr": fresh(func() (func() error, error) {
			var d cusparseraw.CusparseSpSVDescr
			err := cusparseraw.SpSVCreateDescr(&d)
			return func() error { return cusparseraw.SpSVDestroyDescr(d) }, err
		}),
		"cusparseSpSM_destroyDescr": fresh(func() (func() error, error) {
			var d cusparseraw.CusparseSpSMDescr
			err := cusparseraw.SpSMCreateDescr(&d)
			return func() error { return cusparseraw.SpSMDestroyDescr(d) }, err
		}),
		"cusparseSpGEMM_destroyDescr": fresh(func() (func() error, error) {
			var d cusparseraw.CusparseSpGEMMDescr
			err := cusparseraw.SpGEMMCreateDescr(&d)
			return func() error { return cusparseraw.SpGEMMDestroyDescr(d) }, err
		}),
		"cusparseDestroyCsrilu02Info": fresh(func() (func() error, error) {
			var d cusparseraw.Csrilu02Info
			err := cusparseraw.CreateCsrilu02Info(&d)
			return func() error { return cusparseraw.DestroyCsrilu02Info(d) }, err
		}),
		"cusparseDestroyBsrilu02Info": fresh(func() (func() error, error) {
			var d cusparseraw.Bsrilu02Info
			err := cusparseraw.CreateBsrilu02Info(&d)
			return func() error { return cusparseraw.DestroyBsrilu02Info(d) }, err
		}),
		"cusparseDestroyBsric02Info": fresh(func() (func() error, error) {
			var d cusparseraw.Bsric02Info
			err := cusparseraw.CreateBsric02Info(&d)
			return func() error { return cusparseraw.DestroyBsric02Info(d) }, err
		}),
		"cusparseDestroyBsrsv2Info": fresh(func() (func() error, error) {
			var d cusparseraw.Bsrsv2Info
			err := cusparseraw.CreateBsrsv2Info(&d)
			return func() error { return cusparseraw.DestroyBsrsv2Info(d) }, err
		}),
		"cusparseDestroyBsrsm2Info": fresh(func() (func() error, error) {
			var d cusparseraw.Bsrsm2Info
			err := cusparseraw.CreateBsrsm2Info(&d)
			return func() error { return cusparseraw.DestroyBsrsm2Info(d) }, err
		}),
	} {
		probes[name] = append(probes[name], Probe{Variant: "fresh", Make: mk})
	}
}

// spN is the order of the probes' matrices: enough rows for the analysis to find many
// levels (a bidiagonal matrix has one per row), few enough to set up in milliseconds.
// spBlock is the block size of the BSR probes.
const (
	spN     = 256
	spBlock = 2
)

// spFix is a probe's cuSPARSE state: a handle and a legacy matrix descriptor (general,
// zero-based: the defaults), and what close releases, last made first released.
type spFix struct {
	h     cusparseraw.CusparseHandle
	descr cusparseraw.CusparseMatDescr
	frees []func()
}

func spNew() (*spFix, error) {
	f := &spFix{}
	if err := cusparseraw.Create(&f.h); err != nil {
		return nil, err
	}
	f.frees = append(f.frees, func() { _ = cusparseraw.Destroy(f.h) })
	var err error
	if f.descr, err = f.matDescr(); err != nil {
		f.close()
		return nil, err
	}
	return f, nil
}

// close releases what the probe made besides the object under test.
func (f *spFix) close() {
	for i := len(f.frees) - 1; i >= 0; i-- {
		f.frees[i]()
	}
	f.frees = nil
}

// finish ends a probe's Make: once the setup (err) succeeded it waits for the GPU, so
// that the measurement starts idle, and returns release and the cleanup; on an error
// it releases the object and cleans up itself.
func (f *spFix) finish(release func() error, err error) (func() error, func(), error) {
	if err == nil {
		err = cudaraw.CtxSynchronize()
	}
	if err != nil {
		_ = release()
		f.close()
		return nil, nil, err
	}
	return release, f.close, nil
}

// matDescr makes a legacy matrix descriptor (general, zero-based), released by close.
func (f *spFix) matDescr() (cusparseraw.CusparseMatDescr, error) {
	var d cusparseraw.CusparseMatDescr
	if err := cusparseraw.CreateMatDescr(&d); err != nil {
		return 0, err
	}
	f.frees = append(f.frees, func() { _ = cusparseraw.DestroyMatDescr(d) })
	return d, nil
}

// alloc returns size bytes (at least 1) of zeroed device memory, freed by close (cuMemFree
// waits for the GPU: it runs in the cleanup, after the spin).
func (f *spFix) alloc(size uint64) (unsafe.Pointer, error) {
	size = max(size, 1)
	var d cudaraw.CUdeviceptr
	if err := cudaraw.MemAlloc(&d, size); err != nil {
		return nil, err
	}
	f.frees = append(f.frees, func() { _ = cudaraw.MemFree(d) })
	if err := cudaraw.MemsetD8(d, 0, size); err != nil {
		return nil, err
	}
	// Device memory is never Go memory: the address as a pointer, vet-clean.
	return *(*unsafe.Pointer)(unsafe.Pointer(&d)), nil
}

// spUpload copies host into new device memory (freed by close).
func spUpload[T int32 | float32](f *spFix, host []T) (unsafe.Pointer, error) {
	size := uint64(len(host)) * uint64(unsafe.Sizeof(host[0]))
	p, err := f.alloc(size)
	if err != nil || len(host) == 0 {
		return p, err
	}
	return p, cudaraw.MemcpyHtoD(*(*cudaraw.CUdeviceptr)(unsafe.Pointer(&p)), unsafe.Pointer(&host[0]), size)
}

// spMat is a CSR (or BSR) matrix in device memory: rows (block rows) and nnz (blocks).
type spMat struct {
	rows, nnz           int32
	rowPtr, colInd, val unsafe.Pointer
}

func (m spMat) rp() *int32  { return (*int32)(m.rowPtr) }
func (m spMat) ci() *int32  { return (*int32)(m.colInd) }
func (m spMat) v() *float32 { return (*float32)(m.val) }

// upload copies a CSR or BSR matrix's arrays to the device.
func (f *spFix) upload(rowPtr, colInd []int32, val []float32) (spMat, error) {
	m := spMat{rows: int32(len(rowPtr) - 1), nnz: int32(len(colInd))}
	var err error
	if m.rowPtr, err = spUpload(f, rowPtr); err != nil {
		return m, err
	}
	if m.colInd, err = spUpload(f, colInd); err != nil {
		return m, err
	}
	m.val, err = spUpload(f, val)
	return m, err
}

// generic makes the generic API's descriptor of a CSR matrix with cols columns
// (released by close).
func (f *spFix) generic(m spMat, cols int) (cusparseraw.CusparseSpMatDescr, error) {
	var d cusparseraw.CusparseSpMatDescr
	if err := cusparseraw.CreateCsr(&d, int64(m.rows), int64(cols), int64(m.nnz), m.rowPtr, m.colInd, m.val,
		cusparseraw.CUSPARSE_INDEX_32I, cusparseraw.CUSPARSE_INDEX_32I, cusparseraw.CUSPARSE_INDEX_BASE_ZERO, cudaraw.CUDA_R_32F); err != nil {
		return 0, err
	}
	f.frees = append(f.frees, func() { _ = cusparseraw.DestroySpMat(d) })
	return d, nil
}

// lowerTriangular marks a generic matrix descriptor lower triangular with a non-unit
// diagonal (the defaults, set all the same), for the triangular solves.
func lowerTriangular(m cusparseraw.CusparseSpMatDescr) error {
	fill, diag := cusparseraw.CUSPARSE_FILL_MODE_LOWER, cusparseraw.CUSPARSE_DIAG_TYPE_NON_UNIT
	if err := cusparseraw.SpMatSetAttribute(m, cusparseraw.CUSPARSE_SPMAT_FILL_MODE, unsafe.Pointer(&fill), uint64(unsafe.Sizeof(fill))); err != nil {
		return err
	}
	return cusparseraw.SpMatSetAttribute(m, cusparseraw.CUSPARSE_SPMAT_DIAG_TYPE, unsafe.Pointer(&diag), uint64(unsafe.Sizeof(diag)))
}

// dense makes the generic API's descriptor of a dense rows×cols column-major matrix
// of zeros (released by close).
func (f *spFix) dense(rows, cols int) (cusparseraw.CusparseDnMatDescr, error) {
	p, err := f.alloc(uint64(rows * cols * 4))
	if err != nil {
		return 0, err
	}
	var d cusparseraw.CusparseDnMatDescr
	if err := cusparseraw.CreateDnMat(&d, int64(rows), int64(cols), int64(rows), p, cudaraw.CUDA_R_32F, cusparseraw.CUSPARSE_ORDER_COL); err != nil {
		return 0, err
	}
	f.frees = append(f.frees, func() { _ = cusparseraw.DestroyDnMat(d) })
	return d, nil
}

// vector makes the generic API's descriptor of a dense vector of n zeros (released by
// close).
func (f *spFix) vector(n int) (cusparseraw.CusparseDnVecDescr, error) {
	p, err := f.alloc(uint64(n * 4))
	if err != nil {
		return 0, err
	}
	var d cusparseraw.CusparseDnVecDescr
	if err := cusparseraw.CreateDnVec(&d, int64(n), p, cudaraw.CUDA_R_32F); err != nil {
		return 0, err
	}
	f.frees = append(f.frees, func() { _ = cusparseraw.DestroyDnVec(d) })
	return d, nil
}

// spDense returns the n×n row-major matrix with 4 on the diagonal and -1 just below
// it and, with sym, just above it: lower bidiagonal (triangular and non-singular, for
// the triangular solves) or tridiagonal (symmetric positive definite, for the
// incomplete factorizations, the coloring and the pruning).
func spDense(n int, sym bool) [][]float32 {
	a := make([][]float32, n)
	for i := range a {
		a[i] = make([]float32, n)
		a[i][i] = 4
		if i > 0 {
			a[i][i-1] = -1
		}
		if sym && i+1 < n {
			a[i][i+1] = -1
		}
	}
	return a
}

// spCSR returns a's nonzeros in CSR; with reversed, each row's columns are in
// descending order (an unsorted CSR, as csru2csr takes).
func spCSR(a [][]float32, reversed bool) (rowPtr, colInd []int32, val []float32) {
	rowPtr = append(rowPtr, 0)
	for i := range a {
		start := len(colInd)
		for j, x := range a[i] {
			if x != 0 {
				colInd = append(colInd, int32(j))
				val = append(val, x)
			}
		}
		if reversed {
			for l, r := start, len(colInd)-1; l < r; l, r = l+1, r-1 {
				colInd[l], colInd[r] = colInd[r], colInd[l]
				val[l], val[r] = val[r], val[l]
			}
		}
		rowPtr = append(rowPtr, int32(len(colInd)))
	}
	return rowPtr, colInd, val
}

// spBSR returns a (of an order divisible by bs) in BSR with bs×bs blocks, each stored
// row by row (CUSPARSE_DIRECTION_ROW); a block is stored when it has a nonzero.
func spBSR(a [][]float32, bs int) (rowPtr, colInd []int32, val []float32) {
	mb := len(a) / bs
	rowPtr = append(rowPtr, 0)
	for bi := 0; bi < mb; bi++ {
		for bj := 0; bj < mb; bj++ {
			var block []float32
			nonzero := false
			for r := 0; r < bs; r++ {
				for c := 0; c < bs; c++ {
					x := a[bi*bs+r][bj*bs+c]
					block = append(block, x)
					nonzero = nonzero || x != 0
				}
			}
			if nonzero {
				colInd = append(colInd, int32(bj))
				val = append(val, block...)
			}
		}
		rowPtr = append(rowPtr, int32(len(colInd)))
	}
	return rowPtr, colInd, val
}

func (f *spFix) csr(sym, reversed bool) (spMat, error) {
	return f.upload(spCSR(spDense(spN, sym), reversed))
}

func (f *spFix) bsr(sym bool) (spMat, error) {
	return f.upload(spBSR(spDense(spN, sym), spBlock))
}

// probeSpSV: an SpSV descriptor after cusparseSpSV_analysis of a lower bidiagonal CSR
// matrix, with its buffer, and one solve.
func probeSpSV(e *Env) (func() error, func(), error) {
	f, err := spNew()
	if err != nil {
		return nil, nil, err
	}
	var d cusparseraw.CusparseSpSVDescr
	if err := cusparseraw.SpSVCreateDescr(&d); err != nil {
		f.close()
		return nil, nil, err
	}
	return f.finish(func() error { return cusparseraw.SpSVDestroyDescr(d) }, f.spsv(d))
}

// spsv runs cusparseSpSV_analysis and cusparseSpSV_solve with d on a lower bidiagonal
// CSR matrix, with the analysis buffer.
func (f *spFix) spsv(d cusparseraw.CusparseSpSVDescr) error {
	a, err := f.csr(false, false)
	if err != nil {
		return err
	}
	m, err := f.generic(a, spN)
	if err != nil {
		return err
	}
	if err := lowerTriangular(m); err != nil {
		return err
	}
	x, err := f.vector(spN)
	if err != nil {
		return err
	}
	y, err := f.vector(spN)
	if err != nil {
		return err
	}
	alpha := float32(1)
	op, alg := cusparseraw.CUSPARSE_OPERATION_NON_TRANSPOSE, cusparseraw.CUSPARSE_SPSV_ALG_DEFAULT
	var size uint64
	if err := cusparseraw.SpSVBufferSize(f.h, op, unsafe.Pointer(&alpha), m, x, y, cudaraw.CUDA_R_32F, alg, d, &size); err != nil {
		return err
	}
	buf, err := f.alloc(size)
	if err != nil {
		return err
	}
	if err := cusparseraw.SpSVAnalysis(f.h, op, unsafe.Pointer(&alpha), m, x, y, cudaraw.CUDA_R_32F, alg, d, buf); err != nil {
		return err
	}
	if err := cusparseraw.SpSVSolve(f.h, op, unsafe.Pointer(&alpha), m, x, y, cudaraw.CUDA_R_32F, alg, d); err != nil {
		return err
	}
	return nil
}

// spmv runs an SpMV with its external buffer on a general CSR matrix, as the
// idiomatic layer's handles do.
func (f *spFix) spmv() error {
	a, err := f.csr(false, false)
	if err != nil {
		return err
	}
	m, err := f.generic(a, spN)
	if err != nil {
		return err
	}
	x, err := f.vector(spN)
	if err != nil {
		return err
	}
	y, err := f.vector(spN)
	if err != nil {
		return err
	}
	alpha, beta := float32(1), float32(0)
	op := cusparseraw.CUSPARSE_OPERATION_NON_TRANSPOSE
	var size uint64
	if err := cusparseraw.SpMVBufferSize(f.h, op, unsafe.Pointer(&alpha), m, x, unsafe.Pointer(&beta), y, cudaraw.CUDA_R_32F,
		cusparseraw.CUSPARSE_SPMV_ALG_DEFAULT, &size); err != nil {
		return err
	}
	buf, err := f.alloc(size)
	if err != nil {
		return err
	}
	return cusparseraw.SpMV(f.h, op, unsafe.Pointer(&alpha), m, x, unsafe.Pointer(&beta), y, cudaraw.CUDA_R_32F,
		cusparseraw.CUSPARSE_SPMV_ALG_DEFAULT, buf)
}

// probeUsedHandle: a cuSPARSE handle after it ran an SpSV analysis and solve and an
// SpMV (a used handle may hold device memory that a fresh one does not).
func probeUsedHandle(e *Env) (func() error, func(), error) {
	f, err := spNew()
	if err != nil {
		return nil, nil, err
	}
	h := f.h
	f.frees[0] = func() {} // the handle is the object under test
	var d cusparseraw.CusparseSpSVDescr
	if err := cusparseraw.SpSVCreateDescr(&d); err != nil {
		_ = cusparseraw.Destroy(h)
		f.close()
		return nil, nil, err
	}
	f.frees = append(f.frees, func() { _ = cusparseraw.SpSVDestroyDescr(d) })
	err = f.spsv(d)
	if err == nil {
		err = f.spmv()
	}
	return f.finish(func() error { return cusparseraw.Destroy(h) }, err)
}

// probeSpSM: an SpSM descriptor after cusparseSpSM_analysis of a lower bidiagonal CSR
// matrix with two right-hand sides, with its buffer.
func probeSpSM(e *Env) (func() error, func(), error) {
	f, err := spNew()
	if err != nil {
		return nil, nil, err
	}
	var d cusparseraw.CusparseSpSMDescr
	if err := cusparseraw.SpSMCreateDescr(&d); err != nil {
		f.close()
		return nil, nil, err
	}
	return f.finish(func() error { return cusparseraw.SpSMDestroyDescr(d) }, func() error {
		a, err := f.csr(false, false)
		if err != nil {
			return err
		}
		m, err := f.generic(a, spN)
		if err != nil {
			return err
		}
		if err := lowerTriangular(m); err != nil {
			return err
		}
		b, err := f.dense(spN, 2)
		if err != nil {
			return err
		}
		c, err := f.dense(spN, 2)
		if err != nil {
			return err
		}
		alpha := float32(1)
		op, alg := cusparseraw.CUSPARSE_OPERATION_NON_TRANSPOSE, cusparseraw.CUSPARSE_SPSM_ALG_DEFAULT
		var size uint64
		if err := cusparseraw.SpSMBufferSize(f.h, op, op, unsafe.Pointer(&alpha), m, b, c, cudaraw.CUDA_R_32F, alg, d, &size); err != nil {
			return err
		}
		buf, err := f.alloc(size)
		if err != nil {
			return err
		}
		return cusparseraw.SpSMAnalysis(f.h, op, op, unsafe.Pointer(&alpha), m, b, c, cudaraw.CUDA_R_32F, alg, d, buf)
	}())
}

// probeSpGEMM: an SpGEMM descriptor after the work estimation and the compute phase of
// A·A (A tridiagonal CSR), each with its buffer: the descriptor holds the product
// that cusparseSpGEMM_copy would copy out.
func probeSpGEMM(e *Env) (func() error, func(), error) {
	f, err := spNew()
	if err != nil {
		return nil, nil, err
	}
	var d cusparseraw.CusparseSpGEMMDescr
	if err := cusparseraw.SpGEMMCreateDescr(&d); err != nil {
		f.close()
		return nil, nil, err
	}
	return f.finish(func() error { return cusparseraw.SpGEMMDestroyDescr(d) }, func() error {
		a, err := f.csr(true, false)
		if err != nil {
			return err
		}
		ma, err := f.generic(a, spN)
		if err != nil {
			return err
		}
		mc, err := f.generic(spMat{rows: spN}, spN) // C: no arrays yet, as cuSPARSE's SpGEMM example
		if err != nil {
			return err
		}
		alpha, beta := float32(1), float32(0)
		op, alg := cusparseraw.CUSPARSE_OPERATION_NON_TRANSPOSE, cusparseraw.CUSPARSE_SPGEMM_DEFAULT
		ap, bp := unsafe.Pointer(&alpha), unsafe.Pointer(&beta)
		var size1, size2 uint64
		if err := cusparseraw.SpGEMMWorkEstimation(f.h, op, op, ap, ma, ma, bp, mc, cudaraw.CUDA_R_32F, alg, d, &size1, nil); err != nil {
			return err
		}
		buf1, err := f.alloc(size1)
		if err != nil {
			return err
		}
		if err := cusparseraw.SpGEMMWorkEstimation(f.h, op, op, ap, ma, ma, bp, mc, cudaraw.CUDA_R_32F, alg, d, &size1, buf1); err != nil {
			return err
		}
		if err := cusparseraw.SpGEMMCompute(f.h, op, op, ap, ma, ma, bp, mc, cudaraw.CUDA_R_32F, alg, d, &size2, nil); err != nil {
			return err
		}
		buf2, err := f.alloc(size2)
		if err != nil {
			return err
		}
		return cusparseraw.SpGEMMCompute(f.h, op, op, ap, ma, ma, bp, mc, cudaraw.CUDA_R_32F, alg, d, &size2, buf2)
	}())
}

// The legacy solve policy: keep the level information (the analysis's work product).
const spPolicy = cusparseraw.CUSPARSE_SOLVE_POLICY_USE_LEVEL

// probeCsric02: a csric02 info after cusparseScsric02_analysis and the incomplete
// Cholesky factorization of a tridiagonal CSR matrix.
func probeCsric02(e *Env) (func() error, func(), error) {
	f, err := spNew()
	if err != nil {
		return nil, nil, err
	}
	var info cusparseraw.Csric02Info
	if err := cusparseraw.CreateCsric02Info(&info); err != nil {
		f.close()
		return nil, nil, err
	}
	return f.finish(func() error { return cusparseraw.DestroyCsric02Info(info) }, func() error {
		a, err := f.csr(true, false)
		if err != nil {
			return err
		}
		var size int32
		if err := cusparseraw.Scsric02BufferSize(f.h, a.rows, a.nnz, f.descr, a.v(), a.rp(), a.ci(), info, &size); err != nil {
			return err
		}
		buf, err := f.alloc(uint64(size))
		if err != nil {
			return err
		}
		if err := cusparseraw.Scsric02Analysis(f.h, a.rows, a.nnz, f.descr, a.v(), a.rp(), a.ci(), info, spPolicy, buf); err != nil {
			return err
		}
		return cusparseraw.Scsric02(f.h, a.rows, a.nnz, f.descr, a.v(), a.rp(), a.ci(), info, spPolicy, buf)
	}())
}

// probeCsrilu02: a csrilu02 info after cusparseScsrilu02_analysis and the incomplete
// LU factorization of a tridiagonal CSR matrix.
func probeCsrilu02(e *Env) (func() error, func(), error) {
	f, err := spNew()
	if err != nil {
		return nil, nil, err
	}
	var info cusparseraw.Csrilu02Info
	if err := cusparseraw.CreateCsrilu02Info(&info); err != nil {
		f.close()
		return nil, nil, err
	}
	return f.finish(func() error { return cusparseraw.DestroyCsrilu02Info(info) }, func() error {
		a, err := f.csr(true, false)
		if err != nil {
			return err
		}
		var size int32
		if err := cusparseraw.Scsrilu02BufferSize(f.h, a.rows, a.nnz, f.descr, a.v(), a.rp(), a.ci(), info, &size); err != nil {
			return err
		}
		buf, err := f.alloc(uint64(size))
		if err != nil {
			return err
		}
		if err := cusparseraw.Scsrilu02Analysis(f.h, a.rows, a.nnz, f.descr, a.v(), a.rp(), a.ci(), info, spPolicy, buf); err != nil {
			return err
		}
		return cusparseraw.Scsrilu02(f.h, a.rows, a.nnz, f.descr, a.v(), a.rp(), a.ci(), info, spPolicy, buf)
	}())
}

// probeBsric02: a bsric02 info after cusparseSbsric02_analysis and the incomplete
// Cholesky factorization of a block-tridiagonal BSR matrix.
func probeBsric02(e *Env) (func() error, func(), error) {
	f, err := spNew()
	if err != nil {
		return nil, nil, err
	}
	var info cusparseraw.Bsric02Info
	if err := cusparseraw.CreateBsric02Info(&info); err != nil {
		f.close()
		return nil, nil, err
	}
	return f.finish(func() error { return cusparseraw.DestroyBsric02Info(info) }, func() error {
		a, err := f.bsr(true)
		if err != nil {
			return err
		}
		dir := cusparseraw.CUSPARSE_DIRECTION_ROW
		var size int32
		if err := cusparseraw.Sbsric02BufferSize(f.h, dir, a.rows, a.nnz, f.descr, a.v(), a.rp(), a.ci(), spBlock, info, &size); err != nil {
			return err
		}
		buf, err := f.alloc(uint64(size))
		if err != nil {
			return err
		}
		if err := cusparseraw.Sbsric02Analysis(f.h, dir, a.rows, a.nnz, f.descr, a.v(), a.rp(), a.ci(), spBlock, info, spPolicy, buf); err != nil {
			return err
		}
		return cusparseraw.Sbsric02(f.h, dir, a.rows, a.nnz, f.descr, a.v(), a.rp(), a.ci(), spBlock, info, spPolicy, buf)
	}())
}

// probeBsrilu02: a bsrilu02 info after cusparseSbsrilu02_analysis and the incomplete
// LU factorization of a block-tridiagonal BSR matrix.
func probeBsrilu02(e *Env) (func() error, func(), error) {
	f, err := spNew()
	if err != nil {
		return nil, nil, err
	}
	var info cusparseraw.Bsrilu02Info
	if err := cusparseraw.CreateBsrilu02Info(&info); err != nil {
		f.close()
		return nil, nil, err
	}
	return f.finish(func() error { return cusparseraw.DestroyBsrilu02Info(info) }, func() error {
		a, err := f.bsr(true)
		if err != nil {
			return err
		}
		dir := cusparseraw.CUSPARSE_DIRECTION_ROW
		var size int32
		if err := cusparseraw.Sbsrilu02BufferSize(f.h, dir, a.rows, a.nnz, f.descr, a.v(), a.rp(), a.ci(), spBlock, info, &size); err != nil {
			return err
		}
		buf, err := f.alloc(uint64(size))
		if err != nil {
			return err
		}
		if err := cusparseraw.Sbsrilu02Analysis(f.h, dir, a.rows, a.nnz, f.descr, a.v(), a.rp(), a.ci(), spBlock, info, spPolicy, buf); err != nil {
			return err
		}
		return cusparseraw.Sbsrilu02(f.h, dir, a.rows, a.nnz, f.descr, a.v(), a.rp(), a.ci(), spBlock, info, spPolicy, buf)
	}())
}

// triangularDescr sets the legacy descriptor to a lower triangle with a non-unit
// diagonal (the defaults, set all the same), for the legacy triangular solves.
func (f *spFix) triangularDescr() error {
	if err := cusparseraw.SetMatFillMode(f.descr, cusparseraw.CUSPARSE_FILL_MODE_LOWER); err != nil {
		return err
	}
	return cusparseraw.SetMatDiagType(f.descr, cusparseraw.CUSPARSE_DIAG_TYPE_NON_UNIT)
}

// probeBsrsv2: a bsrsv2 info after cusparseSbsrsv2_analysis of a block lower
// bidiagonal BSR matrix, with its buffer.
func probeBsrsv2(e *Env) (func() error, func(), error) {
	f, err := spNew()
	if err != nil {
		return nil, nil, err
	}
	var info cusparseraw.Bsrsv2Info
	if err := cusparseraw.CreateBsrsv2Info(&info); err != nil {
		f.close()
		return nil, nil, err
	}
	return f.finish(func() error { return cusparseraw.DestroyBsrsv2Info(info) }, func() error {
		if err := f.triangularDescr(); err != nil {
			return err
		}
		a, err := f.bsr(false)
		if err != nil {
			return err
		}
		dir, op := cusparseraw.CUSPARSE_DIRECTION_ROW, cusparseraw.CUSPARSE_OPERATION_NON_TRANSPOSE
		var size int32
		if err := cusparseraw.Sbsrsv2BufferSize(f.h, dir, op, a.rows, a.nnz, f.descr, a.v(), a.rp(), a.ci(), spBlock, info, &size); err != nil {
			return err
		}
		buf, err := f.alloc(uint64(size))
		if err != nil {
			return err
		}
		return cusparseraw.Sbsrsv2Analysis(f.h, dir, op, a.rows, a.nnz, f.descr, a.v(), a.rp(), a.ci(), spBlock, info, spPolicy, buf)
	}())
}

// probeBsrsm2: a bsrsm2 info after cusparseSbsrsm2_analysis of a block lower
// bidiagonal BSR matrix for two right-hand sides, with its buffer.
func probeBsrsm2(e *Env) (func() error, func(), error) {
	f, err := spNew()
	if err != nil {
		return nil, nil, err
	}
	var info cusparseraw.Bsrsm2Info
	if err := cusparseraw.CreateBsrsm2Info(&info); err != nil {
		f.close()
		return nil, nil, err
	}
	return f.finish(func() error { return cusparseraw.DestroyBsrsm2Info(info) }, func() error {
		if err := f.triangularDescr(); err != nil {
			return err
		}
		a, err := f.bsr(false)
		if err != nil {
			return err
		}
		dir, op := cusparseraw.CUSPARSE_DIRECTION_ROW, cusparseraw.CUSPARSE_OPERATION_NON_TRANSPOSE
		var size int32
		if err := cusparseraw.Sbsrsm2BufferSize(f.h, dir, op, op, a.rows, 2, a.nnz, f.descr, a.v(), a.rp(), a.ci(), spBlock, info, &size); err != nil {
			return err
		}
		buf, err := f.alloc(uint64(size))
		if err != nil {
			return err
		}
		return cusparseraw.Sbsrsm2Analysis(f.h, dir, op, op, a.rows, 2, a.nnz, f.descr, a.v(), a.rp(), a.ci(), spBlock, info, spPolicy, buf)
	}())
}

// probeCsru2csr: a csru2csr info after cusparseScsru2csr sorted an unsorted
// tridiagonal CSR matrix: the info keeps the permutation (for csr2csru).
func probeCsru2csr(e *Env) (func() error, func(), error) {
	f, err := spNew()
	if err != nil {
		return nil, nil, err
	}
	var info cusparseraw.Csru2csrInfo
	if err := cusparseraw.CreateCsru2csrInfo(&info); err != nil {
		f.close()
		return nil, nil, err
	}
	return f.finish(func() error { return cusparseraw.DestroyCsru2csrInfo(info) }, func() error {
		a, err := f.csr(true, true)
		if err != nil {
			return err
		}
		var size uint64
		if err := cusparseraw.Scsru2csrBufferSizeExt(f.h, a.rows, spN, a.nnz, a.v(), a.rp(), a.ci(), info, &size); err != nil {
			return err
		}
		buf, err := f.alloc(size)
		if err != nil {
			return err
		}
		return cusparseraw.Scsru2csr(f.h, a.rows, spN, a.nnz, f.descr, a.v(), a.rp(), a.ci(), info, buf)
	}())
}

// probeColorInfo: a color info after cusparseScsrcolor colored a tridiagonal CSR
// matrix (with the reordering).
func probeColorInfo(e *Env) (func() error, func(), error) {
	f, err := spNew()
	if err != nil {
		return nil, nil, err
	}
	var info cusparseraw.CusparseColorInfo
	if err := cusparseraw.CreateColorInfo(&info); err != nil {
		f.close()
		return nil, nil, err
	}
	return f.finish(func() error { return cusparseraw.DestroyColorInfo(info) }, func() error {
		a, err := f.csr(true, false)
		if err != nil {
			return err
		}
		coloring, err := f.alloc(spN * 4)
		if err != nil {
			return err
		}
		reordering, err := f.alloc(spN * 4)
		if err != nil {
			return err
		}
		fraction, ncolors := float32(1), int32(0) // host pointers (the default pointer mode)
		return cusparseraw.Scsrcolor(f.h, a.rows, a.nnz, f.descr, a.v(), a.rp(), a.ci(), &fraction, &ncolors,
			(*int32)(coloring), (*int32)(reordering), info)
	}())
}

// probePruneInfo: a prune info after cusparseSpruneCsr2csrNnzByPercentage counted
// what pruning half of a tridiagonal CSR matrix keeps.
func probePruneInfo(e *Env) (func() error, func(), error) {
	f, err := spNew()
	if err != nil {
		return nil, nil, err
	}
	var info cusparseraw.PruneInfo
	if err := cusparseraw.CreatePruneInfo(&info); err != nil {
		f.close()
		return nil, nil, err
	}
	return f.finish(func() error { return cusparseraw.DestroyPruneInfo(info) }, func() error {
		a, err := f.csr(true, false)
		if err != nil {
			return err
		}
		descrC, err := f.matDescr()
		if err != nil {
			return err
		}
		rowPtrC, err := f.alloc((spN + 1) * 4)
		if err != nil {
			return err
		}
		const percentage = 50
		var size uint64
		if err := cusparseraw.SpruneCsr2csrByPercentageBufferSizeExt(f.h, a.rows, spN, a.nnz, f.descr, a.v(), a.rp(), a.ci(),
			percentage, descrC, nil, (*int32)(rowPtrC), nil, info, &size); err != nil {
			return err
		}
		buf, err := f.alloc(size)
		if err != nil {
			return err
		}
		nnzC := int32(0) // a host pointer (the default pointer mode)
		return cusparseraw.SpruneCsr2csrNnzByPercentage(f.h, a.rows, spN, a.nnz, f.descr, a.v(), a.rp(), a.ci(),
			percentage, descrC, (*int32)(rowPtrC), &nnzC, info, buf)
	}())
}

// fresh is a probe of an object made by mk and released untouched.
func fresh(mk func() (func() error, error)) func(e *Env) (func() error, func(), error) {
	return func(e *Env) (func() error, func(), error) {
		release, err := mk()
		if err != nil {
			return nil, nil, err
		}
		return release, noCleanup, nil
	}
}
