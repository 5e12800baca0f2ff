package nvrtc

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The architecture chosen for a device, from its compute capability and the list of
// architectures an NVRTC compiles for (here CUDA 13.0's, as an input).
func TestPickArch(t *testing.T) {
	archs := []int{75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121}
	for _, c := range []struct {
		major, minor int
		want         string
	}{
		{9, 0, "sm_90"},        // supported: a cubin
		{7, 5, "sm_75"},        // the oldest
		{12, 1, "sm_121"},      // the newest
		{8, 5, "compute_80"},   // between two: PTX for the older
		{13, 0, "compute_121"}, // newer than NVRTC: PTX the driver compiles
	} {
		got, err := pickArch(c.major, c.minor, archs)
		require.NoError(t, err, "%d.%d", c.major, c.minor)
		assert.Equal(t, c.want, got, "%d.%d", c.major, c.minor)
	}
	for _, list := range [][]int{archs, nil} {
		_, err := pickArch(7, 0, list)
		assert.ErrorIs(t, err, ErrUnsupportedArch, "older than every architecture of %v", list)
	}
}

// The -arch spellings that Options.Flags may not hold.
func TestIsArchFlag(t *testing.T) {
	for _, f := range []string{"-arch", "-arch=sm_90", "--gpu-architecture", "--gpu-architecture=compute_90"} {
		assert.True(t, isArchFlag(f), f)
	}
	for _, f := range []string{"-std=c++17", "-archive", "-DARCH=1", "--gpu-architectures"} {
		assert.False(t, isArchFlag(f), f)
	}
}
