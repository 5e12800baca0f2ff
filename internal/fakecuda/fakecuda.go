// Package fakecuda builds a fake CUDA driver (fakecuda.c) for profiling the cuda
// package's Go-side overhead without a GPU. Every driver call of the fake succeeds
// at once and returns fake handles, so benchmarks run against it measure only gocuda's
// own code; results of GPU work are meaningless.
package fakecuda

import (
	_ "embed"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

//go:embed fakecuda.c
var source []byte

// Build compiles the fake driver with gcc into a temporary directory of tb and
// returns the shared library's path, for GOCUDA_CUDA_LIB. It skips tb where gcc is
// missing.
func Build(tb testing.TB) string {
	tb.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		tb.Skip("fakecuda: no gcc")
	}
	dir := tb.TempDir()
	src := filepath.Join(dir, "fakecuda.c")
	if err := os.WriteFile(src, source, 0o644); err != nil {
		tb.Fatal(err)
	}
	so := filepath.Join(dir, "libcuda.so.1")
	out, err := exec.Command(gcc, "-O2", "-shared", "-fPIC", "-o", so, src).CombinedOutput()
	if err != nil {
		tb.Fatalf("fakecuda: gcc: %v\n%s", err, out)
	}
	return so
}
