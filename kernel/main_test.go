package kernel_test

import (
	"os"
	"testing"

	"github.com/gocuda/gocuda/cuda/cudatest"
)

func TestMain(m *testing.M) { os.Exit(cudatest.Main(m)) }
