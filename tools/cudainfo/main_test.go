package main

import (
	"bytes"
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Without a driver (CI) the report lists what it looked for and fails with a clear
// error; with one (the GPU machine) every device passes the self-check.
func TestReport(t *testing.T) {
	var out bytes.Buffer
	err := report(&out)
	for _, so := range []string{"libcuda.so.1", "libcublas.so.13", "libcufft.so.12", "libcurand.so.10", "libcusparse.so.12", "libcudnn.so.9"} {
		assert.Contains(t, out.String(), so)
	}
	if cuda.Library().Open() != nil {
		require.Error(t, err)
		assert.Contains(t, err.Error(), "no CUDA driver")
		assert.Contains(t, err.Error(), "GOCUDA_CUDA_LIB")
		return
	}
	require.NoError(t, err, out.String())
	assert.Contains(t, out.String(), "self-check device 0: ok")
	t.Log("\n" + out.String())
}
