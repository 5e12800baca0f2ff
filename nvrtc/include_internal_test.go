package nvrtc

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The first candidate with cuda_fp16.h wins, with its cccl directory when present.
func TestPickInclude(t *testing.T) {
	root := t.TempDir()
	empty, plain, withCCCL := filepath.Join(root, "empty"), filepath.Join(root, "plain"), filepath.Join(root, "cccl")
	require.NoError(t, os.MkdirAll(empty, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(withCCCL, "cccl"), 0o755))
	require.NoError(t, os.MkdirAll(plain, 0o755))
	for _, d := range []string{plain, withCCCL} {
		require.NoError(t, os.WriteFile(filepath.Join(d, "cuda_fp16.h"), nil, 0o644))
	}
	assert.Equal(t, []string{withCCCL, filepath.Join(withCCCL, "cccl")}, pickInclude([]string{filepath.Join(root, "missing"), empty, withCCCL, plain}))
	assert.Equal(t, []string{plain}, pickInclude([]string{empty, plain, withCCCL}))
	assert.Nil(t, pickInclude([]string{empty}))
}

// $CUDA_PATH and $CUDA_HOME are searched, after the library's own toolkit.
func TestIncludeCandidates(t *testing.T) {
	t.Setenv("CUDA_PATH", "/opt/a")
	t.Setenv("CUDA_HOME", "/opt/b")
	c := includeCandidates()
	assert.Subset(t, c, []string{"/opt/a/include", "/opt/b/include", "/usr/local/cuda/include"})
	assert.Equal(t, "/usr/local/cuda/include", c[len(c)-1])
}
