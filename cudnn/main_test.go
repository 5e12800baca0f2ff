package cudnn_test

import (
	"os"
	"testing"

	"github.com/gocuda/gocuda/cuda/cudatest"
)

// TestMain runs the tests on the strict fake driver where there is no GPU (CI): the
// argument checks of the typed operations run there (they fail before cuDNN is
// loaded); what needs cuDNN skips without it.
func TestMain(m *testing.M) { os.Exit(cudatest.Main(m)) }
