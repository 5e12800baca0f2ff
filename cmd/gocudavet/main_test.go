package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCommand builds gocudavet and runs it both ways, on its own and as go vet's
// tool, over a seeded program of the analyzers' testdata: both report its bug and
// fail.
func TestCommand(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "gocudavet")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	dir, err := filepath.Abs(filepath.Join("..", "..", "vet", "testdata"))
	require.NoError(t, err)
	const want = "seeded/01_close_buffer/main.go:20:26: cuda.DeviceBuffer from AllocFrom is not closed on every path"
	for _, args := range [][]string{
		{bin, "./seeded/01_close_buffer"},
		{"go", "vet", "-vettool=" + bin, "./seeded/01_close_buffer"},
	} {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "%v: a finding fails the run\n%s", args, out)
		assert.Contains(t, string(out), want, "%v", args)
	}
}
