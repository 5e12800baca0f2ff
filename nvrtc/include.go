package nvrtc

import (
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/gocuda/gocuda/nvrtc/nvrtcraw"
)

// ToolkitInclude returns the include directories of the CUDA toolkit whose
// headers Compile adds to every program's search path (after Options.Flags, so a
// caller's -I comes first): the first directory holding cuda_fp16.h among the
// include directory beside the loaded libnvrtc (<toolkit>/lib64/../include),
// $CUDA_PATH/include, $CUDA_HOME/include and /usr/local/cuda/include, and its
// cccl subdirectory when there is one (CUDA 13 keeps libcu++, which
// <cooperative_groups.h> and <cuda/std/...> need, there). NVRTC itself knows only
// its built-in headers, so without these #include <cuda_fp16.h> fails. It returns
// nil when no toolkit headers are found; the search runs once per process.
func ToolkitInclude() []string { return slices.Clone(toolkitInclude()) }

var toolkitInclude = sync.OnceValue(func() []string { return pickInclude(includeCandidates()) })

// includeCandidates lists where toolkit headers may be, in the order searched.
func includeCandidates() []string {
	var cands []string
	if p, err := nvrtcraw.Library().Path(); err == nil && filepath.IsAbs(p) {
		cands = append(cands, filepath.Join(filepath.Dir(p), "..", "include"))
	}
	for _, env := range []string{"CUDA_PATH", "CUDA_HOME"} {
		if v := os.Getenv(env); v != "" {
			cands = append(cands, filepath.Join(v, "include"))
		}
	}
	return append(cands, "/usr/local/cuda/include")
}

// pickInclude returns the first of cands with cuda_fp16.h, and its cccl directory.
func pickInclude(cands []string) []string {
	for _, dir := range cands {
		dir = filepath.Clean(dir)
		if _, err := os.Stat(filepath.Join(dir, "cuda_fp16.h")); err != nil {
			continue
		}
		dirs := []string{dir}
		if st, err := os.Stat(filepath.Join(dir, "cccl")); err == nil && st.IsDir() {
			dirs = append(dirs, filepath.Join(dir, "cccl"))
		}
		return dirs
	}
	return nil
}
