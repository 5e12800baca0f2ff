package cusparse_test

import (
	"math/rand/v2"
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/cusparse"
	"github.com/gocuda/gocuda/cusparse/cusparseraw"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/mat"
)

// Matrices from Go slices are checked on the host (before any CUDA call), copied to
// the device as given, and Close frees what they own (on the fake driver, in CI).
func TestNewFromSlices(t *testing.T) {
	_, s := cudatest.Stream(t)
	m := randSparse(rand.New(rand.NewPCG(1, 2)), 9, 7, 0.3)
	csr, err := cusparse.NewCSR(s, m.rows, m.cols, m.rowOffsets, m.colI, m.values)
	require.NoError(t, err)
	assert.Equal(t, m.rowOffsets, cudatest.Read[int32](t, csr.RowOffsets.(*cuda.DeviceBuffer), m.rows+1))
	assert.Equal(t, m.colI, cudatest.Read[int32](t, csr.ColIndices.(*cuda.DeviceBuffer), len(m.values)))
	assert.Equal(t, m.values, cudatest.Read[float64](t, csr.Values.(*cuda.DeviceBuffer), len(m.values)))
	require.NoError(t, csr.Close())
	require.ErrorIs(t, csr.Close(), cuda.ErrClosed, "its buffers are closed")

	coo, err := cusparse.NewCOO(s, m.rows, m.cols, m.rowI, m.colI, m.values)
	require.NoError(t, err)
	assert.Equal(t, m.rowI, cudatest.Read[int32](t, coo.RowIndices.(*cuda.DeviceBuffer), len(m.values)))
	require.NoError(t, coo.Close())

	// CSC of the same matrix, from its dense form.
	var colOff, rowI []int32
	var vals []float32
	colOff = append(colOff, 0)
	for j := range m.cols {
		for i := range m.rows {
			if v := m.dense[i+j*m.rows]; v != 0 {
				rowI, vals = append(rowI, int32(i)), append(vals, float32(v))
			}
		}
		colOff = append(colOff, int32(len(vals)))
	}
	csc, err := cusparse.NewCSC(s, m.rows, m.cols, colOff, rowI, vals)
	require.NoError(t, err)
	assert.Equal(t, colOff, cudatest.Read[int32](t, csc.ColOffsets.(*cuda.DeviceBuffer), m.cols+1))
	require.NoError(t, csc.Close())

	user := &cusparse.CSR{Rows: 1, Cols: 1, NNZ: 1, RowOffsets: csr.RowOffsets}
	assert.NoError(t, user.Close(), "a matrix over the caller's memory owns nothing")

	for name, err := range map[string]error{
		"offsets length": errOf(cusparse.NewCSR(s, 2, 2, []int32{0, 1}, []int32{0}, []float64{1})),
		"offsets start":  errOf(cusparse.NewCSR(s, 2, 2, []int32{1, 1, 1}, []int32{0}, []float64{1})),
		"offsets end":    errOf(cusparse.NewCSR(s, 2, 2, []int32{0, 1, 2}, []int32{0}, []float64{1})),
		"decreasing":     errOf(cusparse.NewCSR(s, 2, 2, []int32{0, 2, 1, 2}[:3], []int32{0, 1}, []float64{1, 2})),
		"column range":   errOf(cusparse.NewCSR(s, 2, 2, []int32{0, 1, 1}, []int32{2}, []float64{1})),
		"too many":       errOf(cusparse.NewCSR(s, 1, 1, []int32{0, 2}, []int32{0, 0}, []float64{1, 2})),
		"coo lengths":    errOf(cusparse.NewCOO(s, 2, 2, []int32{0}, []int32{0, 1}, []float64{1, 2})),
		"coo unsorted":   errOf(cusparse.NewCOO(s, 2, 2, []int32{1, 0}, []int32{0, 1}, []float64{1, 2})),
		"csc row range":  errOf(cusparse.NewCSC(s, 2, 2, []int32{0, 1, 1}, []int32{-1}, []float32{1})),
	} {
		require.ErrorIs(t, err, cuda.ErrInvalidArgument, name)
		assert.Contains(t, err.Error(), "cusparse: ", name)
	}
}

func errOf[M any](_ M, err error) error { return err }

// Bad shapes and types of the new operations fail before any cuSPARSE call (on the
// fake driver, in CI).
func TestOperationArgumentChecks(t *testing.T) {
	_, s := cudatest.Stream(t)
	a, err := cusparse.NewCSR(s, 2, 2, []int32{0, 1, 2}, []int32{0, 1}, []float64{2, 4})
	require.NoError(t, err)
	defer a.Close()
	r, err := cusparse.NewCSR(s, 2, 3, []int32{0, 1, 2}, []int32{0, 2}, []float64{2, 4})
	require.NoError(t, err)
	defer r.Close()
	d := cudatest.AllocFrom(t, s, []float64{1, 2, 3, 4})
	f := cudatest.AllocFrom(t, s, []float32{1, 2, 3, 4})
	csc := &cusparse.CSC{Rows: 2, Cols: 2, NNZ: 2, ColOffsets: a.RowOffsets, RowIndices: a.ColIndices, Values: a.Values}
	for name, err := range map[string]error{
		"dense lda":        errOf(cusparse.DenseToCSR[float64](s, 2, 2, d, 1)),
		"dense short":      errOf(cusparse.DenseToCOO[float64](s, 2, 3, d, 2)),
		"dense type":       errOf(cusparse.DenseToCSC[float64](s, 2, 2, f, 2)),
		"to dense type":    cusparse.ToDense[float32](s, a, f, 2),
		"to dense short":   cusparse.ToDense[float64](s, r, d, 2),
		"to dense nil":     cusparse.ToDense[float64](s, nil, d, 2),
		"spgemm shapes":    errOf(cusparse.MulSparse(s, 1.0, r, r)),
		"spgemm nil":       errOf(cusparse.MulSparse(s, 1.0, nil, a)),
		"spgemm type":      errOf(cusparse.MulSparse[float32](s, 1, a, a)),
		"spsv square":      errOf(cusparse.NewTriangularSolve[float64](s, cusparse.NoTrans, r, cusparse.Lower, cusparse.NonUnit)),
		"spsv csc":         errOf(cusparse.NewTriangularSolve[float64](s, cusparse.NoTrans, csc, cusparse.Lower, cusparse.NonUnit)),
		"spsv fill":        errOf(cusparse.NewTriangularSolve[float64](s, cusparse.NoTrans, a, 7, cusparse.NonUnit)),
		"spsv op":          errOf(cusparse.NewTriangularSolve[float64](s, cusparse.ConjTrans, a, cusparse.Lower, cusparse.NonUnit)),
		"spsv type":        errOf(cusparse.NewTriangularSolve[float32](s, cusparse.NoTrans, a, cusparse.Lower, cusparse.NonUnit)),
		"spsm columns":     errOf(cusparse.NewTriangularSolveMat[float64](s, cusparse.NoTrans, a, cusparse.Lower, cusparse.NonUnit, 0)),
		"spsm nil":         errOf(cusparse.NewTriangularSolveMat[float64](s, cusparse.NoTrans, nil, cusparse.Lower, cusparse.NonUnit, 1)),
		"nil solve":        (*cusparse.TriangularSolve[float64])(nil).Solve(s, d, d),
		"nil solve matrix": (*cusparse.TriangularSolveMat[float64])(nil).Solve(s, d, d),
	} {
		require.ErrorIs(t, err, cuda.ErrInvalidArgument, name)
		assert.Contains(t, err.Error(), "cusparse: ", name)
	}
	require.ErrorIs(t, (*cusparse.TriangularSolve[float64])(nil).Close(), cuda.ErrClosed)
}

// upload copies host to a new device buffer of T on s, closed at the end of the test.
func upload[T any](t *testing.T, s *cuda.Stream, host []T) *cuda.DeviceBuffer {
	return cudatest.AllocFrom(t, s, host)
}

// A dense matrix to CSR, CSC and COO and back to dense gives it back; the counts and
// arrays are those of the CPU's conversion.
func TestGPUDenseConversions(t *testing.T) {
	_, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cusparseraw.Library())
	m := randSparse(rand.New(rand.NewPCG(5, 6)), 37, 29, 0.15)
	lda := m.rows + 3
	padded := make([]float64, lda*m.cols)
	for j := range m.cols {
		copy(padded[j*lda:], m.dense[j*m.rows:(j+1)*m.rows])
	}
	d := upload(t, s, padded)
	csr, err := cusparse.DenseToCSR[float64](s, m.rows, m.cols, d, lda)
	require.NoError(t, err)
	defer csr.Close()
	require.Equal(t, len(m.values), csr.NNZ)
	assert.Equal(t, m.rowOffsets, cudatest.Read[int32](t, csr.RowOffsets.(*cuda.DeviceBuffer), m.rows+1))
	assert.Equal(t, m.colI, cudatest.Read[int32](t, csr.ColIndices.(*cuda.DeviceBuffer), csr.NNZ))
	assert.Equal(t, m.values, cudatest.Read[float64](t, csr.Values.(*cuda.DeviceBuffer), csr.NNZ))
	coo, err := cusparse.DenseToCOO[float64](s, m.rows, m.cols, d, lda)
	require.NoError(t, err)
	defer coo.Close()
	assert.Equal(t, m.rowI, cudatest.Read[int32](t, coo.RowIndices.(*cuda.DeviceBuffer), coo.NNZ))
	csc, err := cusparse.DenseToCSC[float64](s, m.rows, m.cols, d, lda)
	require.NoError(t, err)
	defer csc.Close()
	require.Equal(t, len(m.values), csc.NNZ)
	for name, a := range map[string]cusparse.Matrix{"csr": csr, "coo": coo, "csc": csc} {
		out := upload(t, s, make([]float64, lda*m.cols))
		require.NoError(t, cusparse.ToDense[float64](s, a, out, lda), name)
		assert.Equal(t, padded, cudatest.Read[float64](t, out, lda*m.cols), name)
	}
}

// SpGEMM against gonum's dense product.
func TestGPUMulSparse(t *testing.T) {
	_, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cusparseraw.Library())
	r := rand.New(rand.NewPCG(7, 8))
	ma, mb := randSparse(r, 41, 33, 0.1), randSparse(r, 33, 27, 0.12)
	a, err := cusparse.NewCSR(s, ma.rows, ma.cols, ma.rowOffsets, ma.colI, ma.values)
	require.NoError(t, err)
	defer a.Close()
	b, err := cusparse.NewCSR(s, mb.rows, mb.cols, mb.rowOffsets, mb.colI, mb.values)
	require.NoError(t, err)
	defer b.Close()
	c, err := cusparse.MulSparse(s, 2.0, a, b)
	require.NoError(t, err)
	defer c.Close()
	out := upload(t, s, make([]float64, c.Rows*c.Cols))
	require.NoError(t, cusparse.ToDense[float64](s, c, out, c.Rows))
	got := cudatest.Read[float64](t, out, c.Rows*c.Cols)

	// gonum is row-major: the column-major arrays are Bᵀ and Aᵀ, whose product is
	// (AB)ᵀ, read transposed below.
	var want mat.Dense
	want.Mul(mat.NewDense(mb.cols, mb.rows, mb.dense), mat.NewDense(ma.cols, ma.rows, ma.dense))
	for i := range c.Rows {
		for j := range c.Cols {
			require.InDelta(t, 2*want.At(j, i), got[i+j*c.Rows], 1e-12, "C(%d,%d)", i, j)
		}
	}
}

// triangle returns a well-conditioned lower or upper triangular n×n matrix (about
// density of its off-diagonal elements stored) as CSR arrays and a gonum TriDense.
func triangle(r *rand.Rand, n int, density float64, upper bool) (sparse, *mat.TriDense) {
	kind := mat.Lower
	if upper {
		kind = mat.Upper
	}
	tri := mat.NewTriDense(n, kind, nil)
	m := sparse{rows: n, cols: n, dense: make([]float64, n*n)}
	m.rowOffsets = append(m.rowOffsets, 0)
	for i := range n {
		for j := range n {
			v := 0.0
			switch {
			case i == j:
				v = 4 + r.Float64()
			case (j < i) != upper && r.Float64() < density:
				v = r.Float64() - 0.5
			}
			if v != 0 {
				tri.SetTri(i, j, v)
				m.dense[i+j*n] = v
				m.rowI, m.colI, m.values = append(m.rowI, int32(i)), append(m.colI, int32(j)), append(m.values, v)
			}
		}
		m.rowOffsets = append(m.rowOffsets, int32(len(m.values)))
	}
	return m, tri
}

// SpSV and SpSM, lower and upper, plain and transposed, against gonum's triangular
// solves; one analysis serves several right-hand sides, and Close ends the solve.
func TestGPUTriangularSolve(t *testing.T) {
	_, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cusparseraw.Library())
	r := rand.New(rand.NewPCG(9, 10))
	const n, k = 64, 3
	for _, upper := range []bool{false, true} {
		m, tri := triangle(r, n, 0.2, upper)
		a, err := cusparse.NewCSR(s, n, n, m.rowOffsets, m.colI, m.values)
		require.NoError(t, err)
		fill := cusparse.Lower
		if upper {
			fill = cusparse.Upper
		}
		for _, trans := range []cusparse.Op{cusparse.NoTrans, cusparse.Trans} {
			var op mat.Matrix = tri
			if trans == cusparse.Trans {
				op = tri.T()
			}
			sv, err := cusparse.NewTriangularSolve[float64](s, trans, a, fill, cusparse.NonUnit)
			require.NoError(t, err)
			for round := range 2 {
				x := make([]float64, n)
				for i := range x {
					x[i] = r.Float64()
				}
				dy := upload(t, s, make([]float64, n))
				require.NoError(t, sv.Solve(s, upload(t, s, x), dy))
				var want mat.VecDense
				require.NoError(t, want.SolveVec(op, mat.NewVecDense(n, x)))
				got := cudatest.Read[float64](t, dy, n)
				for i := range n {
					require.InDelta(t, want.AtVec(i), got[i], 1e-12, "spsv upper=%v trans=%v round %d y[%d]", upper, trans, round, i)
				}
			}
			require.NoError(t, sv.Close())
			require.ErrorIs(t, sv.Solve(s, upload(t, s, make([]float64, n)), upload(t, s, make([]float64, n))), cuda.ErrClosed)
			require.ErrorIs(t, sv.Close(), cuda.ErrClosed)

			sm, err := cusparse.NewTriangularSolveMat[float64](s, trans, a, fill, cusparse.NonUnit, k)
			require.NoError(t, err)
			b := make([]float64, n*k)
			for i := range b {
				b[i] = r.Float64()
			}
			dc := upload(t, s, make([]float64, n*k))
			require.NoError(t, sm.Solve(s, upload(t, s, b), dc))
			got := cudatest.Read[float64](t, dc, n*k)
			var want mat.Dense
			require.NoError(t, want.Solve(op, mat.NewDense(k, n, b).T()))
			for i := range n {
				for j := range k {
					require.InDelta(t, want.At(i, j), got[i+j*n], 1e-12, "spsm upper=%v trans=%v C(%d,%d)", upper, trans, i, j)
				}
			}
			require.NoError(t, sm.Close())
		}
		require.NoError(t, a.Close())
	}
}
