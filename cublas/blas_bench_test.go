package cublas_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/gocuda/gocuda/cublas"
	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cuda"
	"github.com/stretchr/testify/require"
)

// BenchmarkGemmSmall submits a 256×256×16 SGEMM (the small GEMM): through
// Gemm ("go"), through the raw layer on a locked thread with a handle bound to the
// stream once ("raw"), and the two alternated in chunks from an empty queue ("pair":
// x-raw-ns is Gemm's cost over the raw call). Submission only: chunks of 32 GEMMs
// stay short of the GPU's pace (a long run measures the GPU, not the call), and the
// stream is synchronized off the clock after each chunk.
func BenchmarkGemmSmall(b *testing.B) {
	const m, n, k = 256, 256, 16
	s, ops := cublas.GemmSetupForTest(b, m*k, k*n, m*n)
	a, bb, c := ops[0], ops[1], ops[2]
	ctx := s.Context()

	goLoop := func(iters int) time.Duration {
		start := time.Now()
		for range iters {
			if err := cublas.Gemm[float32](s, cublas.NoTrans, cublas.NoTrans, m, n, k, 1, a, m, bb, k, 0, c, m); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	var h cublasraw.CublasHandle
	pa, _ := cuda.DevicePtr[float32](a)
	pb, _ := cuda.DevicePtr[float32](bb)
	pc, _ := cuda.DevicePtr[float32](c)
	rawLoop := func(iters int) time.Duration {
		var d time.Duration
		err := ctx.Locked(func() error {
			if h == 0 {
				if err := cublasraw.Create(&h); err != nil {
					return err
				}
				if err := cublasraw.SetStream(h, s.Handle()); err != nil {
					return err
				}
			}
			alpha, beta := float32(1), float32(0)
			start := time.Now()
			for range iters {
				if err := cublasraw.Sgemm(h, cublas.NoTrans, cublas.NoTrans, m, n, k, &alpha, pa, m, pb, k, &beta, pc, m); err != nil {
					return err
				}
			}
			d = time.Since(start)
			return nil
		})
		require.NoError(b, err)
		return d
	}
	defer func() {
		if h != 0 {
			_ = ctx.Locked(func() error { return cublasraw.Destroy(h) })
		}
	}()
	settle := func() { require.NoError(b, s.Synchronize()) }
	b.Run("go", func(b *testing.B) { chunked(b, settle, goLoop) })
	b.Run("raw", func(b *testing.B) { chunked(b, settle, rawLoop) })
	b.Run("pair", func(b *testing.B) {
		b.ResetTimer()
		var xt, yt time.Duration
		for done, i := 0, 0; done < b.N; done, i = done+chunk, i+1 {
			iters := min(chunk, b.N-done)
			if i%2 == 0 {
				xt += goLoop(iters)
				settle()
				yt += rawLoop(iters)
			} else {
				yt += rawLoop(iters)
				settle()
				xt += goLoop(iters)
			}
			settle()
		}
		x, y := float64(xt.Nanoseconds())/float64(b.N), float64(yt.Nanoseconds())/float64(b.N)
		b.ReportMetric(x, "go-ns/gemm")
		b.ReportMetric(y, "raw-ns/gemm")
		b.ReportMetric(x-y, "x-raw-ns")
	})
	runtime.KeepAlive(a)
}

// chunk is the GEMMs submitted between two synchronizations.
const chunk = 32

// chunked runs loop b.N times in chunks, settling off the clock after each.
func chunked(b *testing.B, settle func(), loop func(int) time.Duration) {
	b.ResetTimer()
	for done := 0; done < b.N; done += chunk {
		iters := min(chunk, b.N-done)
		loop(iters)
		b.StopTimer()
		settle()
		b.StartTimer()
	}
}
