package nvml_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/nvml/nvmltest"
)

// TestMain runs the tests on the fake NVML (nvml/nvmltest) and the strict
// fake CUDA driver where there is no GPU (CI); on the GPU machine
// (GOCUDA_GPU_TESTS=require) on the real ones.
func TestMain(m *testing.M) {
	cleanup, _, err := nvmltest.Install()
	if err != nil {
		fmt.Fprintf(os.Stderr, "nvml: %v; running the tests without NVML\n", err)
	}
	code := cudatest.Main(m)
	cleanup()
	os.Exit(code)
}
