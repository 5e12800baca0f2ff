package cublas_test

import (
	"errors"
	"fmt"

	"github.com/gocuda/gocuda/cublas"
	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
)

// Multiply two row-major matrices on the GPU: C (2×3) = A (2×2) · B (2×3). (It needs
// a GPU and cuBLAS, so it is compiled but not run by go test.)
func Example() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		fmt.Println("no GPU:", err)
		return
	}
	s, err := ctx.NewStream()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	a, err := cuda.AllocFrom(s, []float32{1, 2, 3, 4})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()
	b, err := cuda.AllocFrom(s, []float32{1, 0, 1, 0, 1, 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	c, err := cuda.AllocFrom(s, make([]float32, 6))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	// Rows of A are 2 long, rows of B and C 3 long.
	if err := cublas.GemmRowMajor[float32](s, cublas.NoTrans, cublas.NoTrans, 2, 3, 2, 1, a, 2, b, 3, 0, c, 3); err != nil {
		fmt.Println(err)
		return
	}
	out := make([]float32, 6)
	if err := cuda.CopyFromDevice(out, c); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out) // [1 2 3 3 4 7]
}

// The raw layer, for what the typed operations do not cover: a context current on a
// locked thread, typed pointers without unsafe, and Enqueue to order the call with
// the memory's other uses. (Compiled, not run: it needs a GPU.)
func Example_raw() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		fmt.Println("no GPU:", err)
		return
	}
	s, _ := ctx.NewStream()
	defer s.Close()
	x, err := cuda.AllocFor[float32](s, 4)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer x.Close()
	px, _ := cuda.DevicePtr[float32](x)
	var handle cublasraw.CublasHandle
	if err := ctx.Locked(func() error { return cublasraw.Create(&handle) }); err != nil {
		fmt.Println(err)
		return
	}
	owned := cublasraw.OwnHandle(handle)
	defer owned.Close() // cublasDestroy waits for the GPU: outside Enqueue
	err = cuda.Enqueue(s, func(_ cudaraw.CUcontext, h cudaraw.CUstream) error {
		// Only queue work here: Enqueue holds the stream and x meanwhile.
		return ctx.Locked(func() error {
			if err := cublasraw.SetStream(handle, h); err != nil {
				return err
			}
			alpha := float32(2)
			return cublasraw.Sscal(handle, 4, &alpha, px, 1)
		})
	}, cuda.Writes(x))
	fmt.Println(err)
}

// Statuses are errors that work without the library loaded.
func Example_errors() {
	var err error = cublasraw.CUBLAS_STATUS_NOT_INITIALIZED
	fmt.Println(err)
	fmt.Println(errors.Is(fmt.Errorf("gemm: %w", err), cublasraw.ErrNotInitialized))
	// Output:
	// cublas: CUBLAS_STATUS_NOT_INITIALIZED (1): not initialized
	// true
}
