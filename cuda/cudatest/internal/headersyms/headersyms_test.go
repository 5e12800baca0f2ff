package headersyms_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda/cudatest/internal/headersyms"
)

// The header's macros decide the names: the versioned ones a program calls, never
// the legacy names behind them, and nothing from a later CUDA.
func TestSymbols(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("needs gcc")
	}
	dir := t.TempDir()
	header := filepath.Join(dir, "cuda.h")
	require.NoError(t, os.WriteFile(header, []byte(`
typedef int CUresult;
typedef struct CUctx_st *CUcontext;
typedef void (*CUhostFn)(void *userData);
#define cuCtxCreate cuCtxCreate_v2
#define cuMemAlloc cuMemAlloc_v2
CUresult cuInit(unsigned int Flags);
CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, int dev);
CUresult cuMemAlloc(unsigned long long *dptr,
                    unsigned long bytesize);
#if defined(__CUDA_API_VERSION_INTERNAL)
CUresult cuMemAlloc(unsigned int *dptr, unsigned int bytesize);
#endif
`), 0o644))
	syms, err := headersyms.Symbols(header)
	require.NoError(t, err)
	assert.Equal(t, []string{"cuCtxCreate_v2", "cuInit", "cuMemAlloc_v2"}, syms)

	require.NoError(t, os.WriteFile(header, []byte("typedef int CUresult;\n"), 0o644))
	_, err = headersyms.Symbols(header)
	require.ErrorContains(t, err, "declares no cu* function")
}

// $GOCUDA_CUDA118_PATH comes first.
func TestFind118(t *testing.T) {
	dir := t.TempDir()
	header := filepath.Join(dir, "include", "cuda.h")
	require.NoError(t, os.MkdirAll(filepath.Dir(header), 0o755))
	require.NoError(t, os.WriteFile(header, nil, 0o644))
	t.Setenv(headersyms.EnvCUDA118, dir)
	got, err := headersyms.Find118()
	require.NoError(t, err)
	assert.Equal(t, header, got)
}
