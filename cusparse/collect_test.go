package cusparse

// An internal test: the package has no export_test.go accessor for its idle handles,
// so this file reads the cache itself (handles.Idle).

import (
	"context"
	"sync"
	"testing"
	"unsafe"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/cusparse/cusparseraw"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// collectStreams is how many goroutines, each on a stream of the context's pool, run
// sparse products at once in a round of garbage: far more than MaxIdleHandles, so
// that the handle cache overflows and drops handles (non-blocking: cusparseDestroy
// returns at once, headers/cusparse.toml).
const collectStreams = 32

// collectN is the order of the round's matrix: lower bidiagonal, 4 on the diagonal
// and -1 below it (triangular and non-singular, for the triangular solve).
const collectN = 256

// collectBlockingPerRound is how many raw objects of the blocking class a round drops
// without Close: a csric02 info and a csrilu02 info (headers/cusparse.toml: their
// destroys wait for the GPU; a fresh csrilu02 info's also stalls other threads'
// launches, which this test found). The round's other analysis objects (an SpSV
// descriptor after its analysis and solve, an SpGEMM descriptor) are non-blocking
// and released during the spin.
const collectBlockingPerRound = 2

// cuda's seed test for cuSPARSE: products on many streams at once overflow the
// handle cache, and raw objects (a handle, matrix and vector descriptors, analysis
// objects) are dropped without Close; collecting all that while the GPU is busy must
// not wait for it (the analysis objects are classed blocking until measured), and
// Reclaim then destroys everything, the idle handles too.
func TestCollectWhileGPUBusy(t *testing.T) {
	ctx, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cusparseraw.Library())
	st := cudatest.CollectWhileBusy(t, ctx, collectBlockingPerRound, func(n int) {
		for range n {
			collectRound(t, ctx, s)
		}
	})
	t.Logf("%+v", st)
	assert.Zero(t, handles.Idle(ctx), "Reclaim empties the idle-handle cache")
	assert.Zero(t, handles.Kept(ctx), "and the handles streams keep")
}

// collectDevice copies host to a new device buffer of T on s, closed at the end of
// the test.
func collectDevice[T any](t *testing.T, s *cuda.Stream, host []T) *cuda.DeviceBuffer {
	t.Helper()
	b, err := cuda.AllocFor[T](s, len(host))
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	require.NoError(t, cuda.CopyToDeviceAsync(s, b, host))
	return b
}

// collectPtr returns m's address for the raw layer, checked to hold T.
func collectPtr[T any](t *testing.T, m cuda.Memory) unsafe.Pointer {
	t.Helper()
	p, err := cuda.DevicePtr[T](m)
	require.NoError(t, err)
	return unsafe.Pointer(p)
}

// collectRound runs collectStreams goroutines of SpMV with one matrix on pooled
// streams, then drops raw objects made on s: a handle, the matrix's and vectors'
// descriptors and an SpSV descriptor after analysis and one solve, an SpGEMM
// descriptor, a csrilu02 info and a csric02 info. It returns once all that work is done.
func collectRound(t *testing.T, ctx *cuda.Context, s *cuda.Stream) {
	rowPtr, colInd, vals := []int32{0}, []int32(nil), []float32(nil)
	for i := range collectN {
		if i > 0 {
			colInd, vals = append(colInd, int32(i-1)), append(vals, -1)
		}
		colInd, vals = append(colInd, int32(i)), append(vals, 4)
		rowPtr = append(rowPtr, int32(len(colInd)))
	}
	a := &CSR{Rows: collectN, Cols: collectN, NNZ: len(colInd),
		RowOffsets: collectDevice(t, s, rowPtr), ColIndices: collectDevice(t, s, colInd), Values: collectDevice(t, s, vals)}
	ones := make([]float32, collectN)
	for i := range ones {
		ones[i] = 1
	}
	x := collectDevice(t, s, ones)

	var wg sync.WaitGroup
	for range collectStreams {
		wg.Go(func() {
			err := ctx.WithStream(context.Background(), func(_ context.Context, ps *cuda.Stream) error {
				y, err := cuda.AllocFor[float32](ps, collectN)
				if err != nil {
					return err
				}
				defer y.Close()
				for range 8 {
					if err := MulVec[float32](ps, NoTrans, 1, a, x, 0, y); err != nil {
						return err
					}
				}
				return ps.Synchronize()
			})
			assert.NoError(t, err)
		})
	}
	wg.Wait()

	collectSpSV(t, ctx, s, a, x)
	require.NoError(t, ctx.Locked(func() error {
		var g cusparseraw.CusparseSpGEMMDescr
		if err := cusparseraw.SpGEMMCreateDescr(&g); err != nil {
			return err
		}
		_ = cusparseraw.OwnSpGEMM(g) // dropped without Close
		var info cusparseraw.Csrilu02Info
		if err := cusparseraw.CreateCsrilu02Info(&info); err != nil {
			return err
		}
		_ = cusparseraw.OwnCsrilu02Info(info) // dropped without Close
		var ic cusparseraw.Csric02Info
		if err := cusparseraw.CreateCsric02Info(&ic); err != nil {
			return err
		}
		_ = cusparseraw.OwnCsric02Info(ic) // dropped without Close: held for Reclaim
		return nil
	}))
}

// collectSpSV solves a·y = x on s through the raw layer (a new handle, the
// descriptors, cusparseSpSV_analysis with its buffer, cusparseSpSV_solve) and drops
// every object it made without Close.
func collectSpSV(t *testing.T, ctx *cuda.Context, s *cuda.Stream, a *CSR, x *cuda.DeviceBuffer) {
	y, err := cuda.AllocFor[float32](s, collectN)
	require.NoError(t, err)
	defer y.Close()
	rp, ci := collectPtr[int32](t, a.RowOffsets), collectPtr[int32](t, a.ColIndices)
	v, px, py := collectPtr[float32](t, a.Values), collectPtr[float32](t, x), collectPtr[float32](t, y)

	var (
		h      *cusparseraw.OwnedHandle
		m      *cusparseraw.OwnedSpMat
		vx, vy *cusparseraw.OwnedDnVec
		sv     *cusparseraw.OwnedSpSV
		size   uint64
	)
	alpha := float32(1)
	op, alg := cusparseraw.CUSPARSE_OPERATION_NON_TRANSPOSE, cusparseraw.CUSPARSE_SPSV_ALG_DEFAULT
	require.NoError(t, ctx.Locked(func() error {
		var err error
		if h, err = cusparseraw.NewOwnedHandle(); err != nil {
			return err
		}
		var md cusparseraw.CusparseSpMatDescr
		if err := cusparseraw.CreateCsr(&md, collectN, collectN, int64(a.NNZ), rp, ci, v,
			cusparseraw.CUSPARSE_INDEX_32I, cusparseraw.CUSPARSE_INDEX_32I, cusparseraw.CUSPARSE_INDEX_BASE_ZERO, cudaraw.CUDA_R_32F); err != nil {
			return err
		}
		m = cusparseraw.OwnSpMat(md)
		var dx, dy cusparseraw.CusparseDnVecDescr
		if err := cusparseraw.CreateDnVec(&dx, collectN, px, cudaraw.CUDA_R_32F); err != nil {
			return err
		}
		vx = cusparseraw.OwnDnVec(dx)
		if err := cusparseraw.CreateDnVec(&dy, collectN, py, cudaraw.CUDA_R_32F); err != nil {
			return err
		}
		vy = cusparseraw.OwnDnVec(dy)
		if sv, err = cusparseraw.NewOwnedSpSV(); err != nil {
			return err
		}
		return cusparseraw.SpSVBufferSize(h.Handle(), op, unsafe.Pointer(&alpha), m.Handle(), vx.Handle(), vy.Handle(), cudaraw.CUDA_R_32F, alg, sv.Handle(), &size)
	}))
	buf, err := ctx.Alloc(s, max(int(size), 1))
	require.NoError(t, err)
	defer buf.Close()
	pb := collectPtr[byte](t, buf)
	require.NoError(t, cuda.Enqueue(s, func(_ cudaraw.CUcontext, st cudaraw.CUstream) error {
		return ctx.Locked(func() error {
			if err := cusparseraw.SetStream(h.Handle(), st); err != nil {
				return err
			}
			if err := cusparseraw.SpSVAnalysis(h.Handle(), op, unsafe.Pointer(&alpha), m.Handle(), vx.Handle(), vy.Handle(), cudaraw.CUDA_R_32F, alg, sv.Handle(), pb); err != nil {
				return err
			}
			return cusparseraw.SpSVSolve(h.Handle(), op, unsafe.Pointer(&alpha), m.Handle(), vx.Handle(), vy.Handle(), cudaraw.CUDA_R_32F, alg, sv.Handle())
		})
	}, cuda.Reads(a.RowOffsets), cuda.Reads(a.ColIndices), cuda.Reads(a.Values), cuda.Reads(x), cuda.Writes(y), cuda.Writes(buf)))
	// Done before the buffers close and the objects are dropped: the collector may
	// destroy the handle and descriptors as soon as this returns.
	require.NoError(t, s.Synchronize())
}
