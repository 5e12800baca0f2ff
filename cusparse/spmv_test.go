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
)

// sparse is a random rows×cols matrix with about density of its elements stored, as
// a dense column-major array and as CSR and COO arrays.
type sparse struct {
	rows, cols       int
	dense            []float64
	rowOffsets, rowI []int32
	colI             []int32
	values           []float64
}

func randSparse(r *rand.Rand, rows, cols int, density float64) sparse {
	m := sparse{rows: rows, cols: cols, dense: make([]float64, rows*cols)}
	m.rowOffsets = append(m.rowOffsets, 0)
	for i := range rows {
		for j := range cols {
			if r.Float64() < density {
				v := r.Float64()*2 - 1
				m.dense[i+j*rows] = v
				m.rowI = append(m.rowI, int32(i))
				m.colI = append(m.colI, int32(j))
				m.values = append(m.values, v)
			}
		}
		m.rowOffsets = append(m.rowOffsets, int32(len(m.values)))
	}
	return m
}

// Bad arguments fail before any CUDA call (on the fake driver, in CI).
func TestArgumentChecks(t *testing.T) {
	_, s := cudatest.Stream(t)
	ro := cudatest.AllocFrom(t, s, []int32{0, 1, 2})
	ci := cudatest.AllocFrom(t, s, []int32{0, 1})
	v := cudatest.AllocFrom(t, s, []float64{1, 2})
	x := cudatest.AllocFrom(t, s, []float64{1, 2})
	f := cudatest.AllocFrom(t, s, []float32{1, 2})
	a := &cusparse.CSR{Rows: 2, Cols: 2, NNZ: 2, RowOffsets: ro, ColIndices: ci, Values: v}
	for name, err := range map[string]error{
		"nil matrix":   cusparse.MulVec[float64](s, cusparse.NoTrans, 1, nil, x, 0, x),
		"value type":   cusparse.MulVec[float32](s, cusparse.NoTrans, 1, a, f, 0, f),
		"x type":       cusparse.MulVec[float64](s, cusparse.NoTrans, 1, a, f, 0, x),
		"operation":    cusparse.MulVec[float64](s, 9, 1, a, x, 0, x),
		"nnz":          cusparse.MulVec[float64](s, cusparse.NoTrans, 1, &cusparse.CSR{Rows: 2, Cols: 2, NNZ: 5, RowOffsets: ro, ColIndices: ci, Values: v}, x, 0, x),
		"short values": cusparse.MulVec[float64](s, cusparse.NoTrans, 1, &cusparse.CSR{Rows: 2, Cols: 3, NNZ: 3, RowOffsets: ro, ColIndices: ci, Values: v}, x, 0, x),
		"index type":   cusparse.MulVec[float64](s, cusparse.NoTrans, 1, &cusparse.COO{Rows: 2, Cols: 2, NNZ: 2, RowIndices: v, ColIndices: ci, Values: v}, x, 0, x),
		"short y":      cusparse.MulVec[float64](s, cusparse.NoTrans, 1, &cusparse.CSR{Rows: 3, Cols: 2, NNZ: 2, RowOffsets: cudatest.AllocFrom(t, s, []int32{0, 1, 2, 2}), ColIndices: ci, Values: v}, x, 0, x),
		"spmm ldc":     cusparse.MulMat[float64](s, 1, a, 1, x, 2, 0, x, 1),
		"spmm short B": cusparse.MulMat[float64](s, 1, a, 2, x, 2, 0, x, 2),
	} {
		require.ErrorIs(t, err, cuda.ErrInvalidArgument, name)
		assert.Contains(t, err.Error(), "cusparse: ", name)
	}
}

// SpMV and SpMM with CSR and COO matrices, plain and transposed, against dense CPU
// products.
func TestProducts(t *testing.T) {
	_, s := cudatest.Stream(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cusparseraw.Library())
	r := rand.New(rand.NewPCG(11, 12))
	m := randSparse(r, 57, 43, 0.1)
	csr := &cusparse.CSR{Rows: m.rows, Cols: m.cols, NNZ: len(m.values),
		RowOffsets: cudatest.AllocFrom(t, s, m.rowOffsets), ColIndices: cudatest.AllocFrom(t, s, m.colI), Values: cudatest.AllocFrom(t, s, m.values)}
	coo := &cusparse.COO{Rows: m.rows, Cols: m.cols, NNZ: len(m.values),
		RowIndices: cudatest.AllocFrom(t, s, m.rowI), ColIndices: cudatest.AllocFrom(t, s, m.colI), Values: cudatest.AllocFrom(t, s, m.values)}
	for name, a := range map[string]cusparse.Matrix{"csr": csr, "coo": coo} {
		for _, trans := range []cusparse.Op{cusparse.NoTrans, cusparse.Trans} {
			xl, yl := m.cols, m.rows
			if trans == cusparse.Trans {
				xl, yl = m.rows, m.cols
			}
			x, y := make([]float64, xl), make([]float64, yl)
			for i := range x {
				x[i] = r.Float64()
			}
			for i := range y {
				y[i] = r.Float64()
			}
			dx, dy := cudatest.AllocFrom(t, s, x), cudatest.AllocFrom(t, s, y)
			require.NoError(t, cusparse.MulVec(s, trans, 2.0, a, dx, 0.5, dy))
			got := make([]float64, yl)
			require.NoError(t, cuda.CopyFromDevice(got, dy))
			for i := range yl {
				want := 0.5 * y[i]
				for k := range xl {
					if trans == cusparse.Trans {
						want += 2 * m.dense[k+i*m.rows] * x[k]
					} else {
						want += 2 * m.dense[i+k*m.rows] * x[k]
					}
				}
				require.InDelta(t, want, got[i], 1e-12, "%s trans=%v element %d", name, trans, i)
			}
		}
		// SpMM: C (rows×n) = A·B with B (cols×n), padded leading dimensions.
		const n = 5
		ldb, ldc := m.cols+2, m.rows+3
		b := make([]float64, ldb*n)
		for i := range b {
			b[i] = r.Float64()
		}
		c := make([]float64, ldc*n)
		db, dc := cudatest.AllocFrom(t, s, b), cudatest.AllocFrom(t, s, c)
		require.NoError(t, cusparse.MulMat(s, 1.0, a, n, db, ldb, 0.0, dc, ldc))
		got := make([]float64, len(c))
		require.NoError(t, cuda.CopyFromDevice(got, dc))
		for j := range n {
			for i := range m.rows {
				var want float64
				for k := range m.cols {
					want += m.dense[i+k*m.rows] * b[k+j*ldb]
				}
				require.InDelta(t, want, got[i+j*ldc], 1e-12, "%s spmm (%d,%d)", name, i, j)
			}
		}
	}
}
