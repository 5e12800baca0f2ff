package cublas_test

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/gocuda/gocuda/cublas"
	"github.com/gocuda/gocuda/cuda"
)

// Multiply two 2×2 matrices already on the device (column-major): C = A·B.
func Example() {
	h, err := cublas.NewOwnedHandle()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()
	var a, b, c cuda.CUdeviceptr // from cuda.MemAlloc and cuda.MemcpyHtoD
	alpha, beta := float32(1), float32(0)
	err = cublas.Sgemm(h.Handle(), cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_N, 2, 2, 2,
		&alpha, devicePtr(a), 2, devicePtr(b), 2, &beta, devicePtr(c), 2)
	fmt.Println(err)
}

// devicePtr views a device address as the *float32 the raw layer takes.
func devicePtr(p cuda.CUdeviceptr) *float32 { return *(**float32)(unsafe.Pointer(&p)) }

// Statuses are errors that work without the library loaded.
func Example_errors() {
	var err error = cublas.CUBLAS_STATUS_NOT_INITIALIZED
	fmt.Println(err)
	fmt.Println(errors.Is(fmt.Errorf("gemm: %w", err), cublas.ErrNotInitialized))
	// Output:
	// cublas: CUBLAS_STATUS_NOT_INITIALIZED (1): not initialized
	// true
}
