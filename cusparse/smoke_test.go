package cusparse_test

import (
	"math"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/cusparse/cusparseraw"
)

// TestSmokeSpMV multiplies a random 100x80 CSR matrix (about 10% full) by a
// random vector with cusparseSpMV, y = alpha*A*x + beta*y, and compares with
// the CPU.
func TestSmokeSpMV(t *testing.T) {
	g := cudatest.Require(t)
	cudatest.RequireLibrary(t, cusparseraw.Library())
	h, err := cusparseraw.NewOwnedHandle()
	require.NoError(t, err)
	defer func() { assert.NoError(t, h.Close()) }()

	var ver int32
	require.NoError(t, cusparseraw.GetVersion(h.Handle(), &ver))
	t.Logf("cuSPARSE version %d", ver)

	const rows, cols = 100, 80
	r := cudatest.Rand(4)
	rowPtr := make([]int32, 0, rows+1)
	var colInd []int32
	var vals []float32
	rowPtr = append(rowPtr, 0)
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			if r.Float64() < 0.1 {
				colInd = append(colInd, int32(j))
				vals = append(vals, 2*r.Float32()-1)
			}
		}
		rowPtr = append(rowPtr, int32(len(colInd)))
	}
	nnz := len(vals)
	require.Positive(t, nnz)
	x := cudatest.RandFloat32s(r, cols)
	y := cudatest.RandFloat32s(r, rows)
	alpha, beta := float32(0.75), float32(2)

	dRow := cudatest.ToDevice(t, g, rowPtr)
	dCol := cudatest.ToDevice(t, g, colInd)
	dVal := cudatest.ToDevice(t, g, vals)
	dX := cudatest.ToDevice(t, g, x)
	dY := cudatest.ToDevice(t, g, y)

	var a cusparseraw.CusparseSpMatDescr
	require.NoError(t, cusparseraw.CreateCsr(&a, rows, cols, int64(nnz),
		cudatest.DevUnsafe(dRow), cudatest.DevUnsafe(dCol), cudatest.DevUnsafe(dVal),
		cusparseraw.CUSPARSE_INDEX_32I, cusparseraw.CUSPARSE_INDEX_32I, cusparseraw.CUSPARSE_INDEX_BASE_ZERO, cudaraw.CUDA_R_32F))
	mat := cusparseraw.OwnSpMat(a)
	defer func() { assert.NoError(t, mat.Close()) }()
	var vx, vy cusparseraw.CusparseDnVecDescr
	require.NoError(t, cusparseraw.CreateDnVec(&vx, cols, cudatest.DevUnsafe(dX), cudaraw.CUDA_R_32F))
	vecX := cusparseraw.OwnDnVec(vx)
	defer func() { assert.NoError(t, vecX.Close()) }()
	require.NoError(t, cusparseraw.CreateDnVec(&vy, rows, cudatest.DevUnsafe(dY), cudaraw.CUDA_R_32F))
	vecY := cusparseraw.OwnDnVec(vy)
	defer func() { assert.NoError(t, vecY.Close()) }()

	var bufSize uint64
	require.NoError(t, cusparseraw.SpMVBufferSize(h.Handle(), cusparseraw.CUSPARSE_OPERATION_NON_TRANSPOSE,
		unsafe.Pointer(&alpha), mat.Handle(), vecX.Handle(), unsafe.Pointer(&beta), vecY.Handle(),
		cudaraw.CUDA_R_32F, cusparseraw.CUSPARSE_SPMV_ALG_DEFAULT, &bufSize))
	buf := cudatest.Alloc[byte](t, g, int(bufSize))
	require.NoError(t, cusparseraw.SpMV(h.Handle(), cusparseraw.CUSPARSE_OPERATION_NON_TRANSPOSE,
		unsafe.Pointer(&alpha), mat.Handle(), vecX.Handle(), unsafe.Pointer(&beta), vecY.Handle(),
		cudaraw.CUDA_R_32F, cusparseraw.CUSPARSE_SPMV_ALG_DEFAULT, cudatest.DevUnsafe(buf)))
	got := cudatest.Float32sFromDevice(t, dY, rows)

	var maxErr, maxAbs float64
	for i := 0; i < rows; i++ {
		var s float64
		for q := rowPtr[i]; q < rowPtr[i+1]; q++ {
			s += float64(vals[q]) * float64(x[colInd[q]])
		}
		want := float64(alpha)*s + float64(beta)*float64(y[i])
		maxErr = math.Max(maxErr, math.Abs(float64(got[i])-want))
		maxAbs = math.Max(maxAbs, math.Abs(want))
	}
	t.Logf("SpMV CSR %dx%d nnz=%d (buffer %d bytes): max abs error %.3g (max |y| %.3g)", rows, cols, nnz, bufSize, maxErr, maxAbs)
	assert.Less(t, maxErr/maxAbs, 1e-5)
}
