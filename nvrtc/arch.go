package nvrtc

import (
	"fmt"
	"slices"
	"sync"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/nvrtc/nvrtcraw"
)

// supported caches SupportedArchs: the list is fixed for the library loaded.
var supported struct {
	mu    sync.Mutex
	archs []int
}

// SupportedArchs returns the real architectures the loaded NVRTC compiles for, as
// compute capabilities times ten (75 for sm_75, 90 for sm_90), in increasing order:
// nvrtcGetSupportedArchs.
func SupportedArchs() ([]int, error) {
	supported.mu.Lock()
	defer supported.mu.Unlock()
	if supported.archs == nil {
		var n int32
		if err := nvrtcraw.GetNumSupportedArchs(&n); err != nil {
			return nil, fmt.Errorf("nvrtc: supported architectures: %w", err)
		}
		archs := make([]int32, max(n, 1))
		if n > 0 {
			if err := nvrtcraw.GetSupportedArchs(&archs[0]); err != nil {
				return nil, fmt.Errorf("nvrtc: supported architectures: %w", err)
			}
		}
		list := make([]int, n)
		for i := range list {
			list[i] = int(archs[i])
		}
		slices.Sort(list)
		supported.archs = list
	}
	return slices.Clone(supported.archs), nil
}

// DeviceArch returns the -arch value for device d: sm_XY for its compute capability
// X.Y when the loaded NVRTC compiles for it (the fastest load: a cubin), else
// compute_XY for the newest older architecture NVRTC has (PTX, which the driver
// compiles for the device when it loads the module: a device newer than NVRTC).
// A device older than every architecture NVRTC has is an error matching
// ErrUnsupportedArch.
func DeviceArch(d cuda.Device) (string, error) {
	major, minor, err := d.ComputeCapability()
	if err != nil {
		return "", fmt.Errorf("nvrtc: device %d: %w", int(d), err)
	}
	archs, err := SupportedArchs()
	if err != nil {
		return "", err
	}
	return pickArch(major, minor, archs)
}

// pickArch is DeviceArch for compute capability major.minor and NVRTC's sorted list.
func pickArch(major, minor int, archs []int) (string, error) {
	cc := major*10 + minor
	if slices.Contains(archs, cc) {
		return fmt.Sprintf("sm_%d", cc), nil
	}
	best := -1
	for _, a := range archs {
		if a < cc {
			best = a
		}
	}
	if best < 0 {
		oldest := "none"
		if len(archs) > 0 {
			oldest = fmt.Sprintf("sm_%d", archs[0])
		}
		return "", fmt.Errorf("%w: compute capability %d.%d (NVRTC's oldest: %s)", ErrUnsupportedArch, major, minor, oldest)
	}
	return fmt.Sprintf("compute_%d", best), nil
}
