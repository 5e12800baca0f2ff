package main

import (
	"bytes"
	"testing"

	"github.com/gocuda/gocuda/cublas"
	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cudnn"
	"github.com/gocuda/gocuda/cufft"
	"github.com/gocuda/gocuda/curand"
	"github.com/gocuda/gocuda/cusolver"
	"github.com/gocuda/gocuda/cusparse"
	"github.com/gocuda/gocuda/dl"
	"github.com/gocuda/gocuda/nccl"
	"github.com/gocuda/gocuda/nvrtc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Without a driver (CI) the report lists what it looked for and fails with a clear
// error; with one (the GPU machine) every device passes the self-check.
func TestReport(t *testing.T) {
	var out bytes.Buffer
	err := report(&out)
	for _, l := range []*dl.Library{cuda.Library(), cublas.Library(), cufft.Library(), curand.Library(), cusparse.Library(),
		cudnn.Library(), cusolver.Library(), nvrtc.Library(), nccl.Library()} {
		assert.Contains(t, out.String(), l.Soname())
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
