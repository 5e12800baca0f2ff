package cuda_test

import (
	"os"
	"testing"

	"github.com/gocuda/gocuda/cuda/cudatest"
)

// TestMain runs the tests on the strict fake driver where there is no GPU (CI): every
// test that needs no real kernel runs there, and any use of a destroyed handle or
// freed memory fails the run. On a GPU machine the tests use the real driver.
func TestMain(m *testing.M) {
	// A small fake device: the tests that fill the device write every byte they
	// allocate (the fake's device memory is host memory).
	if os.Getenv("FAKECUDA_MEMORY_BYTES") == "" {
		os.Setenv("FAKECUDA_MEMORY_BYTES", "4294967296")
	}
	os.Exit(cudatest.Main(m))
}
