package cublas_test

import (
	"context"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/gocuda/gocuda/cublas"
	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// setup returns the primary context and a stream of it.
func setup(t *testing.T, needs ...cudatest.Need) (*cuda.Context, *cuda.Stream) {
	t.Helper()
	return cudatest.Stream(t, needs...)
}

// Every bad argument is an error before any CUDA call: these run on the fake driver
// (CI), where cuBLAS is absent.
func TestArgumentChecks(t *testing.T) {
	_, s := setup(t)
	a, err := cuda.AllocFor[float32](s, 12) // 3×4
	require.NoError(t, err)
	defer a.Close()
	d, err := cuda.AllocFor[float64](s, 12)
	require.NoError(t, err)
	defer d.Close()
	raw, err := s.Context().Alloc(s, 48) // untyped: 12 float32
	require.NoError(t, err)
	defer raw.Close()
	var nilBuf *cuda.DeviceBuffer
	two, err := a.Slice(0, 2)
	require.NoError(t, err)

	for name, err := range map[string]error{
		"negative m":        cublas.Gemm[float32](s, cublas.NoTrans, cublas.NoTrans, -1, 1, 1, 1, a, 3, a, 3, 0, a, 3),
		"lda < rows":        cublas.Gemm[float32](s, cublas.NoTrans, cublas.NoTrans, 3, 4, 1, 1, a, 2, a, 1, 0, a, 3),
		"A too small":       cublas.Gemm[float32](s, cublas.NoTrans, cublas.NoTrans, 3, 4, 5, 1, a, 3, a, 5, 0, a, 3),
		"element type":      cublas.Gemm[float32](s, cublas.NoTrans, cublas.NoTrans, 3, 4, 1, 1, d, 3, a, 1, 0, a, 3),
		"nil memory":        cublas.Gemm[float32](s, cublas.NoTrans, cublas.NoTrans, 3, 4, 1, 1, nil, 3, a, 1, 0, a, 3),
		"nil buffer":        cublas.Gemm[float32](s, cublas.NoTrans, cublas.NoTrans, 3, 4, 1, 1, nilBuf, 3, a, 1, 0, a, 3),
		"transposition":     cublas.Gemm[float32](s, 7, cublas.NoTrans, 3, 4, 1, 1, a, 3, a, 1, 0, a, 3),
		"batched too small": cublas.GemmStridedBatched[float32](s, cublas.NoTrans, cublas.NoTrans, 3, 4, 1, 1, a, 3, 12, a, 1, 4, 0, a, 3, 12, 2),
		"negative batch":    cublas.GemmStridedBatched[float32](s, cublas.NoTrans, cublas.NoTrans, 3, 4, 1, 1, a, 3, 12, a, 1, 4, 0, a, 3, 12, -1),
		// A stride whose span wraps around int must not pass the size check.
		"stride overflow":   cublas.GemmStridedBatched[float32](s, cublas.NoTrans, cublas.NoTrans, 3, 4, 1, 1, a, 3, 1<<62, a, 1, 0, 0, a, 3, 0, 3),
		"batch past int32":  cublas.GemmStridedBatched[float32](s, cublas.NoTrans, cublas.NoTrans, 3, 4, 1, 1, a, 3, 0, a, 1, 0, 0, a, 3, 0, 1<<31),
		"gemv x":            cublas.Gemv[float32](s, cublas.NoTrans, 3, 4, 1, a, 3, nilBuf, 0, a),
		"gemv y too small":  cublas.Gemv[float32](s, cublas.NoTrans, 3, 4, 1, a, 3, a, 0, two),
		"axpy n":            cublas.Axpy[float32](s, 13, 1, a, a),
		"axpy negative n":   cublas.Axpy[float64](s, -1, 1, d, d),
		"scal type":         cublas.Scal[complex64](s, 1, 1, a),
		"dot result":        cublas.DotTo[float32](s, 12, a, a, d),
		"nrm2 n":            cublas.Nrm2To[float64](s, 13, d, d),
		"untyped too small": cublas.Axpy[float64](s, 7, 1, raw, d),
	} {
		require.ErrorIs(t, err, cuda.ErrInvalidArgument, name)
		assert.Contains(t, err.Error(), "cublas: ", name)
	}
	_, err = cublas.Dot[float32](s, 13, a, a)
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)

	// Memory of another context than the stream's.
	other, err := cuda.NewContext(0, 0)
	require.NoError(t, err)
	defer other.Close()
	os, err := other.NewStream()
	require.NoError(t, err)
	err = cublas.Axpy[float32](os, 12, 1, a, a)
	require.ErrorIs(t, err, cuda.ErrWrongContext)
}

// gemmRef is C = alpha·op(A)·op(B) + beta·C in complex128, column-major.
func gemmRef(ta, tb cublasraw.CublasOperation, m, n, k int, alpha complex128, a []complex128, lda int,
	b []complex128, ldb int, beta complex128, c []complex128, ldc int) []complex128 {
	at := func(x []complex128, ld int, t cublasraw.CublasOperation, i, j int) complex128 {
		switch t {
		case cublas.Trans:
			return x[j+i*ld]
		case cublas.ConjTrans:
			return cmplx.Conj(x[j+i*ld])
		}
		return x[i+j*ld]
	}
	out := append([]complex128(nil), c...)
	for i := range m {
		for j := range n {
			var sum complex128
			for p := range k {
				sum += at(a, lda, ta, i, p) * at(b, ldb, tb, p, j)
			}
			out[i+j*ldc] = alpha*sum + beta*c[i+j*ldc]
		}
	}
	return out
}

func randOf[T cublas.Scalar](r *rand.Rand, n int) ([]T, []complex128) {
	v, ref := make([]T, n), make([]complex128, n)
	for i := range v {
		re, im := r.Float64()*2-1, r.Float64()*2-1
		switch p := any(&v[i]).(type) {
		case *float32:
			*p = float32(re)
			ref[i] = complex(float64(*p), 0)
		case *float64:
			*p = re
			ref[i] = complex(re, 0)
		case *complex64:
			*p = complex64(complex(re, im))
			ref[i] = complex128(*p)
		case *complex128:
			*p = complex(re, im)
			ref[i] = *p
		}
	}
	return v, ref
}

func toC128[T cublas.Scalar](v []T) []complex128 {
	out := make([]complex128, len(v))
	for i, x := range v {
		switch y := any(x).(type) {
		case float32:
			out[i] = complex(float64(y), 0)
		case float64:
			out[i] = complex(y, 0)
		case complex64:
			out[i] = complex128(y)
		case complex128:
			out[i] = y
		}
	}
	return out
}

func scalarOf[T cublas.Scalar](re, im float64) T {
	var z T
	switch p := any(&z).(type) {
	case *float32:
		*p = float32(re)
	case *float64:
		*p = re
	case *complex64:
		*p = complex64(complex(re, im))
	case *complex128:
		*p = complex(re, im)
	}
	return z
}

// tol is the tolerance of a T result of k-term sums of products in [-1, 1].
func tol[T cublas.Scalar](k int) float64 {
	var z T
	switch any(z).(type) {
	case float32, complex64:
		return 1e-5 * float64(k+1) * 4
	}
	return 1e-13 * float64(k+1) * 4
}

func checkGemm[T cublas.Scalar](t *testing.T, s *cuda.Stream, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 1))
	for _, ta := range []cublasraw.CublasOperation{cublas.NoTrans, cublas.Trans, cublas.ConjTrans} {
		for _, tb := range []cublasraw.CublasOperation{cublas.NoTrans, cublas.Trans} {
			m, n, k := 37+r.IntN(40), 29+r.IntN(40), 17+r.IntN(60)
			ar, ac := m, k
			if ta != cublas.NoTrans {
				ar, ac = k, m
			}
			br, bc := k, n
			if tb != cublas.NoTrans {
				br, bc = n, k
			}
			lda, ldb, ldc := ar+3, br+1, m+2
			a, aRef := randOf[T](r, lda*ac)
			b, bRef := randOf[T](r, ldb*bc)
			c, cRef := randOf[T](r, ldc*n)
			alpha, beta := scalarOf[T](1.25, 0.5), scalarOf[T](-0.5, 0.25)
			dA, dB, dC := cudatest.AllocFrom(t, s, a), cudatest.AllocFrom(t, s, b), cudatest.AllocFrom(t, s, c)
			require.NoError(t, cublas.Gemm(s, ta, tb, m, n, k, alpha, dA, lda, dB, ldb, beta, dC, ldc))
			got := toC128(cudatest.Read[T](t, dC, len(c)))
			want := gemmRef(ta, tb, m, n, k, toC128([]T{alpha})[0], aRef, lda, bRef, ldb, toC128([]T{beta})[0], cRef, ldc)
			for i := range want {
				if cmplx.Abs(got[i]-want[i]) > tol[T](k) {
					t.Fatalf("%T gemm %v/%v %d×%d×%d: element %d = %v, want %v", alpha, ta, tb, m, n, k, i, got[i], want[i])
				}
			}
		}
	}
}

// GEMM of every element type and transposition against a complex128 CPU product.
func TestGemm(t *testing.T) {
	_, s := setup(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cublasraw.Library())
	checkGemm[float32](t, s, 1)
	checkGemm[float64](t, s, 2)
	checkGemm[complex64](t, s, 3)
	checkGemm[complex128](t, s, 4)
}

// Row-major GEMM, strided-batched GEMM, GEMV, AXPY, SCAL, DOT and NRM2 against the
// CPU.
func TestLevel1And2AndBatched(t *testing.T) {
	_, s := setup(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cublasraw.Library())
	r := rand.New(rand.NewPCG(9, 9))

	// Row-major: C (m×n) = A (m×k) · B (k×n), rows stored contiguously.
	m, n, k := 5, 7, 3
	a, _ := randOf[float64](r, m*k)
	b, _ := randOf[float64](r, k*n)
	c := make([]float64, m*n)
	dA, dB, dC := cudatest.AllocFrom(t, s, a), cudatest.AllocFrom(t, s, b), cudatest.AllocFrom(t, s, c)
	require.NoError(t, cublas.GemmRowMajor(s, cublas.NoTrans, cublas.NoTrans, m, n, k, 1.0, dA, k, dB, n, 0.0, dC, n))
	got := cudatest.Read[float64](t, dC, m*n)
	for i := range m {
		for j := range n {
			var want float64
			for p := range k {
				want += a[i*k+p] * b[p*n+j]
			}
			assert.InDelta(t, want, got[i*n+j], 1e-12, "row-major (%d,%d)", i, j)
		}
	}

	// Strided batched: 3 products of 4×5×6.
	const bm, bn, bk, batch = 4, 5, 6, 3
	sa, sb, sc := bm*bk+2, bk*bn+1, bm*bn
	ba, baRef := randOf[float32](r, sa*batch)
	bb, bbRef := randOf[float32](r, sb*batch)
	bc := make([]float32, sc*batch)
	dBA, dBB, dBC := cudatest.AllocFrom(t, s, ba), cudatest.AllocFrom(t, s, bb), cudatest.AllocFrom(t, s, bc)
	require.NoError(t, cublas.GemmStridedBatched[float32](s, cublas.NoTrans, cublas.NoTrans, bm, bn, bk, 1, dBA, bm, sa, dBB, bk, sb, 0, dBC, bm, sc, batch))
	gotB := toC128(cudatest.Read[float32](t, dBC, len(bc)))
	for i := range batch {
		want := gemmRef(cublas.NoTrans, cublas.NoTrans, bm, bn, bk, 1, baRef[i*sa:], bm, bbRef[i*sb:], bk, 0, make([]complex128, sc), bm)
		for j := range want {
			assert.InDelta(t, real(want[j]), real(gotB[i*sc+j]), 1e-4, "batch %d element %d", i, j)
		}
	}

	// GEMV (transposed): y = 2·Aᵀx + 0.5·y, A 6×4.
	ga, _ := randOf[float64](r, 24)
	gx, _ := randOf[float64](r, 6)
	gy, _ := randOf[float64](r, 4)
	dGA, dGX, dGY := cudatest.AllocFrom(t, s, ga), cudatest.AllocFrom(t, s, gx), cudatest.AllocFrom(t, s, gy)
	require.NoError(t, cublas.Gemv(s, cublas.Trans, 6, 4, 2.0, dGA, 6, dGX, 0.5, dGY))
	gotY := cudatest.Read[float64](t, dGY, 4)
	for j := range 4 {
		want := 0.5 * gy[j]
		for i := range 6 {
			want += 2 * ga[i+6*j] * gx[i]
		}
		assert.InDelta(t, want, gotY[j], 1e-12)
	}

	// AXPY, SCAL, DOT, NRM2 on float32 and complex.
	x, _ := randOf[float32](r, 1000)
	y, _ := randOf[float32](r, 1000)
	dX, dY := cudatest.AllocFrom(t, s, x), cudatest.AllocFrom(t, s, y)
	require.NoError(t, cublas.Axpy[float32](s, 1000, 3, dX, dY))
	require.NoError(t, cublas.Scal[float32](s, 1000, 0.5, dY))
	gotAxpy := cudatest.Read[float32](t, dY, 1000)
	var dot, nrm float64
	for i := range x {
		want := 0.5 * (3*float64(x[i]) + float64(y[i]))
		assert.InDelta(t, want, float64(gotAxpy[i]), 1e-5)
		dot += float64(x[i]) * float64(gotAxpy[i])
		nrm += float64(x[i]) * float64(x[i])
	}
	gotDot, err := cublas.Dot[float32](s, 1000, dX, dY)
	require.NoError(t, err)
	assert.InDelta(t, dot, float64(gotDot), 1e-3)
	gotNrm, err := cublas.Nrm2[float32](s, 1000, dX)
	require.NoError(t, err)
	assert.InDelta(t, math.Sqrt(nrm), float64(gotNrm), 1e-3)

	zx, _ := randOf[complex128](r, 10)
	zy, _ := randOf[complex128](r, 10)
	dZX, dZY := cudatest.AllocFrom(t, s, zx), cudatest.AllocFrom(t, s, zy)
	alpha := complex(0.5, -2)
	require.NoError(t, cublas.Axpy(s, 10, alpha, dZX, dZY))
	gotZ := cudatest.Read[complex128](t, dZY, 10)
	for i := range zx {
		assert.InDelta(t, 0.0, cmplx.Abs(alpha*zx[i]+zy[i]-gotZ[i]), 1e-12)
	}
}

// 64 goroutines run GEMMs at once on pooled streams, each checking its result; the
// handle cache keeps at most MaxIdleHandles afterwards, and each stream one.
func TestConcurrentGemm(t *testing.T) {
	ctx, _ := setup(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cublasraw.Library())
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			err := ctx.WithStream(context.Background(), func(_ context.Context, s *cuda.Stream) error {
				r := rand.New(rand.NewPCG(uint64(g), 5))
				const m, n, k = 48, 40, 32
				a, aRef := randOf[float32](r, m*k)
				b, bRef := randOf[float32](r, k*n)
				for range 4 {
					dA, dB := cudatest.AllocFrom(t, s, a), cudatest.AllocFrom(t, s, b)
					dC, err := cuda.AllocFor[float32](s, m*n)
					if err != nil {
						return err
					}
					defer dC.Close()
					if err := cublas.Gemm[float32](s, cublas.NoTrans, cublas.NoTrans, m, n, k, 1, dA, m, dB, k, 0, dC, m); err != nil {
						return err
					}
					got := toC128(cudatest.Read[float32](t, dC, m*n))
					want := gemmRef(cublas.NoTrans, cublas.NoTrans, m, n, k, 1, aRef, m, bRef, k, 0, make([]complex128, m*n), m)
					for i := range want {
						if cmplx.Abs(got[i]-want[i]) > 1e-4 {
							t.Errorf("goroutine %d: element %d = %v, want %v", g, i, got[i], want[i])
							return nil
						}
					}
				}
				return nil
			})
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, cublas.IdleHandlesForTest(ctx), cublas.MaxIdleHandles)
	kept := cublas.KeptHandlesForTest(ctx)
	assert.Positive(t, kept, "the pooled streams keep their handles")
	assert.LessOrEqual(t, kept, ctx.StreamLimit(), "one per stream at most")
}

// A GEMM captured into a graph (Context.Capture) replays with the scalars of the
// capture and the matrices as they are at each replay; the handle's workspace is
// leased by the graph.
func TestGemmInCapture(t *testing.T) {
	_, s := setup(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cublasraw.Library())
	r := rand.New(rand.NewPCG(13, 13))
	const m, n, k = 64, 16, 32
	a, _ := randOf[float64](r, m*k)
	b, _ := randOf[float64](r, k*n)
	dA, dB, dC := cudatest.AllocFrom(t, s, a), cudatest.AllocFrom(t, s, b), cudatest.AllocFrom(t, s, make([]float64, m*n))
	g, err := s.Context().Capture(func(cs *cuda.Stream) error {
		return cublas.Gemm(cs, cublas.NoTrans, cublas.NoTrans, m, n, k, 2.0, dA, m, dB, k, 0.0, dC, m)
	})
	require.NoError(t, err)
	defer g.Close()
	assert.GreaterOrEqual(t, g.Buffers(), 3, "A, B, C (and the workspace, if any)")
	e, err := g.Instantiate()
	require.NoError(t, err)
	defer e.Close()
	for round := range 2 {
		require.NoError(t, e.Launch(s))
		got := cudatest.Read[float64](t, dC, m*n)
		for i := range m {
			for j := range n {
				var want float64
				for p := range k {
					want += a[p*m+i] * b[j*k+p]
				}
				assert.InDelta(t, 2*want, got[j*m+i], 1e-12, "round %d (%d,%d)", round, i, j)
			}
		}
		// The second replay reads A as it is then.
		for i := range a {
			a[i] = -a[i]
		}
		require.NoError(t, cuda.CopyToDevice(dA, a))
	}
}

// TestCallsDoNotAllocate: once a handle is cached, Gemm, Gemv, Axpy, Scal and
// GemmMixed allocate nothing per call: their host scalars live in the handle.
func TestCallsDoNotAllocate(t *testing.T) {
	_, s := setup(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cublasraw.Library())
	const n = 16
	a := cudatest.AllocFrom(t, s, make([]float32, n*n))
	c := cudatest.AllocFrom(t, s, make([]float32, n*n))
	x := cudatest.AllocFrom(t, s, make([]float32, n))
	y := cudatest.AllocFrom(t, s, make([]float32, n))
	h := cudatest.AllocFrom(t, s, make([]cuda.Float16, n*n))
	hc := cudatest.AllocFrom(t, s, make([]cuda.Float16, n*n))
	calls := map[string]func() error{
		"gemm": func() error {
			return cublas.Gemm(s, cublas.NoTrans, cublas.NoTrans, n, n, n, float32(1), a, n, a, n, float32(0), c, n)
		},
		"gemv": func() error { return cublas.Gemv(s, cublas.NoTrans, n, n, float32(1), a, n, x, float32(0), y) },
		"axpy": func() error { return cublas.Axpy(s, n, float32(2), x, y) },
		"scal": func() error { return cublas.Scal(s, n, float32(0.5), y) },
		"gemm mixed": func() error {
			return cublas.GemmMixed[cuda.Float16, cuda.Float16](s, cublas.NoTrans, cublas.NoTrans, n, n, n, 1, h, n, h, n, 0, hc, n, cublas.Compute16F)
		},
	}
	for name, call := range calls {
		require.NoError(t, call(), name) // makes and caches the handle
		allocs := testing.AllocsPerRun(50, func() {
			if err := call(); err != nil {
				t.Fatal(name, err)
			}
		})
		assert.Zero(t, allocs, "%s: allocations per call", name)
	}
	require.NoError(t, s.Synchronize())
}
