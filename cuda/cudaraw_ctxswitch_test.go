package cuda_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/dl"
)

// cudaraw.CtxSwitchProcs hands every raw package's in-context functions the driver's
// cuCtxGetCurrent and cuCtxSetCurrent, resolved once.
func TestCtxSwitchProcs(t *testing.T) {
	memSetup(t) // a driver: the fake in CI
	get, set, err := cudaraw.CtxSwitchProcs()
	require.NoError(t, err)
	wantGet, err := cudaraw.Library().NewProc("cuCtxGetCurrent").Addr()
	require.NoError(t, err)
	wantSet, err := cudaraw.Library().NewProc("cuCtxSetCurrent").Addr()
	require.NoError(t, err)
	assert.Equal(t, [2]uintptr{wantGet, wantSet}, [2]uintptr{get, set})
}

// Without cuCtxSetCurrent in the driver, CtxSwitchProcs and every in-context call
// report the missing symbol, and nothing crashes.
func TestCtxSwitchProcsMissingSymbol(t *testing.T) {
	const omit = "cuCtxSetCurrent"
	if cudatest.Active() {
		cudatest.Subprocess(t, map[string]string{"FAKECUDA_OMIT": omit})
		return
	}
	if os.Getenv(cudatest.EnvChild) == "" || os.Getenv("FAKECUDA_OMIT") != omit {
		t.Skip("runs on the strict fake driver without " + omit + " (CI, where cudatest.Main installs the fake)")
	}
	_, _, err := cudaraw.CtxSwitchProcs()
	var se *dl.SymbolError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, omit, se.Symbol)
	ctx, err := cuda.Device(0).Context()
	if err == nil {
		err = cudaraw.CtxSynchronizeIn(ctx.Handle())
	}
	require.ErrorAs(t, err, &se, "an in-context call")
	assert.Equal(t, omit, se.Symbol)
}
