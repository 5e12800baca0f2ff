package nvrtc_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/nvrtc/nvrtcraw"
)

// TestSmokeRaw compiles a kernel through the raw layer alone: create, compile, read
// the PTX, destroy.
func TestSmokeRaw(t *testing.T) {
	cudatest.RequireLibrary(t, nvrtcraw.Library())
	var major, minor int32
	require.NoError(t, nvrtcraw.Version(&major, &minor))
	t.Logf("NVRTC %d.%d", major, minor)
	assert.Positive(t, major)

	src := []byte("extern \"C\" __global__ void raw_kernel(int* p) { *p = 42; }\x00")
	name := []byte("raw.cu\x00")
	var prog nvrtcraw.NvrtcProgram
	require.NoError(t, nvrtcraw.CreateProgram(&prog, &src[0], &name[0], 0, nil, nil))
	require.NotZero(t, prog)
	defer func() { assert.NoError(t, nvrtcraw.DestroyProgram(&prog)) }()
	require.NoError(t, nvrtcraw.CompileProgram(prog, 0, nil))
	var n uint64
	require.NoError(t, nvrtcraw.GetPTXSize(prog, &n))
	require.Positive(t, n)
	ptx := make([]byte, n)
	require.NoError(t, nvrtcraw.GetPTX(prog, &ptx[0]))
	assert.Contains(t, string(ptx), ".entry raw_kernel(")
	assert.Equal(t, byte(0), ptx[n-1], "the size counts the NUL")

	msg, err := nvrtcraw.GetErrorString(nvrtcraw.NVRTC_ERROR_COMPILATION)
	require.NoError(t, err)
	assert.NotEmpty(t, strings.TrimSpace(msg))
}
