package cufft_test

import (
	"os"
	"testing"

	"github.com/gocuda/gocuda/cuda/cudatest"
)

// TestMain runs the tests on the strict fake driver where there is no GPU (CI): the
// argument checks run there; what needs cuFFT skips without it.
func TestMain(m *testing.M) { os.Exit(cudatest.Main(m)) }
