package nccl_test

import (
	"os"
	"testing"

	"github.com/gocuda/gocuda/internal/fakecuda"
)

// TestMain runs the tests on the strict fake driver where there is no GPU (CI): there
// NCCL is absent, so the no-library tests run and the ones that need NCCL skip.
func TestMain(m *testing.M) { os.Exit(fakecuda.Main(m)) }
