package gonumblas_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/blas"

	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cublas/gonumblas"
	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
)

// BenchmarkDgemm4096 times C = A·B for n×n float64 matrices, n = 4096, 1024, 256,
// 128 and 64, in gonum's native code ("native", no GPU needed) and through the
// adapter on the GPU: Go slices copied in and out ("staged"), registered managed
// memory used in place, which stays on the GPU between iterations ("managed"), and
// the adapter with its default thresholds ("default", native below order 128).
// GFLOP/s is 2n³ per call. Where staged overtakes native is the staged Level 3
// threshold; managed against native, the managed one:
//
//	go test ./cublas/gonumblas -run '^$' -bench Dgemm4096
func BenchmarkDgemm4096(b *testing.B) {
	for _, n := range []int{4096, 1024, 256, 128, 64} {
		r := cudatest.Rand(uint64(n))
		fill := func(s []float64) []float64 {
			for i := range s {
				s[i] = 2*r.Float64() - 1
			}
			return s
		}
		a, bb, c := fill(make([]float64, n*n)), fill(make([]float64, n*n)), make([]float64, n*n)
		run := func(name string, gemm func(a, b, c []float64), a, bb, c []float64) {
			b.Run(fmt.Sprintf("n=%d/%s", n, name), func(b *testing.B) {
				gemm(a, bb, c) // warm up: handles, pools, page migration
				for b.Loop() {
					gemm(a, bb, c)
				}
				b.ReportMetric(2*float64(n)*float64(n)*float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
		dgemm := func(impl blas.Float64) func(a, b, c []float64) {
			return func(a, bb, c []float64) { impl.Dgemm(blas.NoTrans, blas.NoTrans, n, n, n, 1, a, n, bb, n, 0, c, n) }
		}
		run("native", dgemm(native), a, bb, c)

		b.Run(fmt.Sprintf("n=%d/gpu", n), func(b *testing.B) {
			ctx, _ := cudatest.Stream(b, cudatest.Kernels)
			cudatest.RequireLibrary(b, cublasraw.Library())
			always := gonumblas.Thresholds{}
			impl, err := gonumblas.New(ctx, gonumblas.WithStaged(always), gonumblas.WithManaged(always))
			require.NoError(b, err)
			auto, err := gonumblas.New(ctx)
			require.NoError(b, err)
			managed := func(src []float64) []float64 {
				buf, err := ctx.AllocManaged(8 * len(src))
				require.NoError(b, err)
				b.Cleanup(func() { buf.Close() })
				require.NoError(b, impl.Register(buf))
				return append(cuda.HostSlice[float64](buf)[:0], src...)
			}
			run("staged", dgemm(impl), a, bb, c)
			run("managed", dgemm(impl), managed(a), managed(bb), managed(c))
			run("default", dgemm(auto), a, bb, c)
			require.NoError(b, impl.Err())
		})
	}
}
