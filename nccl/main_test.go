package nccl_test

import (
	"os"
	"testing"

	"github.com/gocuda/gocuda/cuda/cudatest"
)

// TestMain runs the tests on the strict fake driver where there is no GPU (CI): there
// NCCL is absent, so the no-library tests run and the ones that need NCCL skip.
func TestMain(m *testing.M) { os.Exit(cudatest.Main(m)) }
