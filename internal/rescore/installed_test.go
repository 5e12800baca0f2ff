package rescore

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Without package resource nothing works, and says why. (This test binary links
// resource through the external tests: take its implementation away for the test.)
func TestNotInstalled(t *testing.T) {
	saved := core
	core = nil
	t.Cleanup(func() { core = saved })
	const want = "rescore: package resource is not linked into the program (nothing called Install)"
	assert.PanicsWithValue(t, want, func() { SetContextHooks(ContextHooks{}) })
	assert.PanicsWithValue(t, want, func() { _ = BeginCapture() })
	assert.PanicsWithValue(t, want, EndCapture)
}
