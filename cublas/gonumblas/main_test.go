package gonumblas_test

import (
	"os"
	"testing"

	"github.com/gocuda/gocuda/cuda/cudatest"
)

// TestMain runs the tests on the strict fake driver where there is no GPU (CI): the
// routing, argument checks and staging run there, on a host stand-in for cuBLAS;
// what needs cuBLAS skips without it.
func TestMain(m *testing.M) { os.Exit(cudatest.Main(m)) }
