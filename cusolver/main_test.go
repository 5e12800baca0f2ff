package cusolver_test

import (
	"os"
	"testing"

	"github.com/gocuda/gocuda/internal/fakecuda"
)

// TestMain runs the tests on the strict fake driver where there is no GPU (CI): the
// argument checks of the dense operations run there (they fail before cuSOLVER is
// loaded); what needs cuSOLVER skips without it.
func TestMain(m *testing.M) { os.Exit(fakecuda.Main(m)) }
