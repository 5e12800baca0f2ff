package nvjitlink_test

import (
	"os"
	"testing"

	"github.com/gocuda/gocuda/cuda/cudatest"
)

// TestMain runs the tests on the strict fake driver where there is no GPU (CI): the
// argument checks run there (they fail before nvJitLink is loaded); what needs nvJitLink
// skips without it, and what launches kernels skips on the fake driver.
func TestMain(m *testing.M) { os.Exit(cudatest.Main(m)) }
