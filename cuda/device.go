package cuda

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/dl"
	"github.com/gocuda/gocuda/internal/errs"
)

// Errors of the idiomatic layer. They wrap with details (the object, the sizes) and
// match with errors.Is.
var (
	// ErrClosed is matched by the error of any use of an object after its Close, and
	// by the error of a second Close or a Close of a nil object (which also matches
	// resource.ErrReleased). It is the same value in every gocuda package.
	ErrClosed = errs.ErrClosed
	// ErrInvalidArgument is returned for bad input: sizes, lengths, nil objects.
	ErrInvalidArgument = errors.New("cuda: invalid argument")
	// ErrWrongContext is returned when objects of different contexts are mixed.
	ErrWrongContext = errors.New("cuda: objects belong to different contexts")
	// ErrNoDriver is returned by every call when the CUDA driver cannot be loaded or
	// initialized; it wraps the loader's or the driver's error.
	ErrNoDriver = errors.New("cuda: no usable CUDA driver")
	// ErrOutOfMemory is the driver's CUDA_ERROR_OUT_OF_MEMORY (cudaraw.ErrOutOfMemory):
	// an allocation that failed after giving back what the package caches and what
	// resource.Reclaim could release.
	ErrOutOfMemory = cudaraw.ErrOutOfMemory
)

var driver struct {
	once sync.Once
	err  error
}

// initDriver runs cuInit once. Every idiomatic entry point calls it, so users never
// have to.
func initDriver() error {
	driver.once.Do(func() {
		err := cudaraw.Init(0)
		switch {
		case err == nil:
			installHooks()
		case errors.Is(err, dl.ErrLibraryNotFound):
			driver.err = fmt.Errorf("%w: %w", ErrNoDriver, err)
		default:
			driver.err = fmt.Errorf("%w: cuInit failed: %w", ErrNoDriver, err)
		}
	})
	return driver.err
}

// Device is a GPU, by ordinal: cuda.Device(0) is the first. Its methods initialize
// the driver on first use.
type Device int

// DeviceCount returns the number of CUDA devices.
func DeviceCount() (int, error) {
	if err := initDriver(); err != nil {
		return 0, err
	}
	var n int32
	if err := cudaraw.DeviceGetCount(&n); err != nil {
		return 0, err
	}
	return int(n), nil
}

// check rejects ordinals the driver cannot take (it takes an int32: a larger
// Device would otherwise name another device).
func (d Device) check() error {
	if d < 0 || d > math.MaxInt32 {
		return fmt.Errorf("%w: device ordinal %d", ErrInvalidArgument, int(d))
	}
	return nil
}

// handle returns the driver's device handle.
func (d Device) handle() (cudaraw.CUdevice, error) {
	if err := d.check(); err != nil {
		return 0, err
	}
	if err := initDriver(); err != nil {
		return 0, err
	}
	var h cudaraw.CUdevice
	if err := cudaraw.DeviceGet(&h, int32(d)); err != nil {
		return 0, fmt.Errorf("cuda: device %d: %w", int(d), err)
	}
	return h, nil
}

// Name returns the device's name, such as "NVIDIA H200".
func (d Device) Name() (string, error) {
	h, err := d.handle()
	if err != nil {
		return "", err
	}
	buf := make([]byte, 256)
	if err := cudaraw.DeviceGetName(&buf[0], int32(len(buf)), h); err != nil {
		return "", err
	}
	return cString(buf), nil
}

// TotalMemory returns the device's memory in bytes.
func (d Device) TotalMemory() (uint64, error) {
	h, err := d.handle()
	if err != nil {
		return 0, err
	}
	var n uint64
	if err := cudaraw.DeviceTotalMem(&n, h); err != nil {
		return 0, err
	}
	return n, nil
}

// Attribute returns one of the device's attributes.
func (d Device) Attribute(a cudaraw.CUdevice_attribute) (int, error) {
	h, err := d.handle()
	if err != nil {
		return 0, err
	}
	var v int32
	if err := cudaraw.DeviceGetAttribute(&v, a, h); err != nil {
		return 0, fmt.Errorf("cuda: device %d attribute %v: %w", int(d), a, err)
	}
	return int(v), nil
}

// ComputeCapability returns the device's compute capability (9, 0 for an H200).
func (d Device) ComputeCapability() (major, minor int, err error) {
	if major, err = d.Attribute(cudaraw.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR); err != nil {
		return 0, 0, err
	}
	minor, err = d.Attribute(cudaraw.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
	return major, minor, err
}

func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
