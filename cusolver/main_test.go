package cusolver_test

import (
	"os"
	"testing"

	"github.com/gocuda/gocuda/cuda/cudatest"
)

// TestMain runs the tests on the strict fake driver where there is no GPU (CI): the
// argument checks of the dense operations run there (they fail before cuSOLVER is
// loaded); what needs cuSOLVER skips without it.
func TestMain(m *testing.M) { os.Exit(cudatest.Main(m)) }
