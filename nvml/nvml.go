package nvml

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/gocuda/gocuda/dl"
	"github.com/gocuda/gocuda/internal/errs"
	"github.com/gocuda/gocuda/nvml/nvmlraw"
	"github.com/gocuda/gocuda/resource"
)

// Errors that NVML's statuses match with errors.Is: every error of this package that
// comes from NVML wraps its nvmlraw.Return, so these (and the other nvmlraw.Err*
// sentinels) match it.
var (
	// ErrNotSupported: the device does not have the feature (retired pages on a
	// GPU that remaps rows instead, ECC on a GeForce, power readings in some VMs).
	ErrNotSupported error = nvmlraw.ErrNotSupported
	// ErrNoPermission: the reading needs root or a capability the process lacks.
	ErrNoPermission error = nvmlraw.ErrNoPermission
	// ErrNotFound: no device has the UUID or PCI bus id asked for.
	ErrNotFound error = nvmlraw.ErrNotFound
	// ErrGPUIsLost: the GPU fell off the bus or stopped answering (Xid 79).
	ErrGPUIsLost error = nvmlraw.ErrGpuIsLost
	// ErrUninitialized: NVML is not initialized (a Session that was closed).
	ErrUninitialized error = nvmlraw.ErrUninitialized
	// ErrDriverNotLoaded: libnvidia-ml is installed but the kernel driver is not.
	ErrDriverNotLoaded error = nvmlraw.ErrDriverNotLoaded
)

// ErrLibraryNotFound is dl.ErrLibraryNotFound: Open's error where libnvidia-ml.so.1
// cannot be loaded (a *dl.LibraryError naming the library, its soname and
// $GOCUDA_NVML_LIB).
var ErrLibraryNotFound = dl.ErrLibraryNotFound

// ErrClosed is cuda.ErrClosed: the error of a Session or Events used after Close.
var ErrClosed = errs.ErrClosed

// wrap names the NVML function that failed: "nvml: nvmlDeviceGetPowerUsage: " and
// the status, which errors.Is matches.
func wrap(fn string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("nvml: %s: %w", fn, err)
}

// Session is NVML initialized: Open calls nvmlInit and Close calls nvmlShutdown.
// NVML counts its initializations, so Sessions may overlap (each Events watcher holds
// one of its own too). Devices found through a Session work until it is closed.
//
// Close a Session when done; one dropped without Close is shut down through
// resource.ResourceFinalizer in the non-blocking lane (nvmlShutdown frees host state
// and never waits for the GPU), never by the finalizer itself.
type Session struct {
	reg    *resource.Registration
	closed atomic.Bool
}

// Open initializes NVML (nvmlInit_v2). Without libnvidia-ml.so.1 it returns an error
// matching ErrLibraryNotFound (a *dl.LibraryError); without the kernel driver, one
// matching ErrDriverNotLoaded.
func Open() (*Session, error) {
	if err := nvmlraw.Init(); err != nil {
		return nil, wrap("nvmlInit_v2", err)
	}
	s := &Session{}
	s.reg = resource.ResourceFinalizer((*Session).shutdown, s, false, resource.Kind("nvml.Session"))
	return s, nil
}

func (s *Session) shutdown() error { return wrap("nvmlShutdown", nvmlraw.Shutdown()) }

// Close shuts NVML down (nvmlShutdown) for this Session. A second Close returns an
// error matching ErrClosed and resource.ErrReleased.
func (s *Session) Close() error {
	if s == nil || !s.closed.CompareAndSwap(false, true) {
		return errs.Closed("nvml: Session")
	}
	err := s.reg.Release()
	runtime.KeepAlive(s)
	if errors.Is(err, resource.ErrReleased) {
		return errs.Closed("nvml: Session")
	}
	return err
}

// check returns an error matching ErrClosed once the Session is closed.
func (s *Session) check(what string) error {
	if s == nil || s.closed.Load() {
		return fmt.Errorf("nvml: %s: the Session is closed: %w", what, ErrClosed)
	}
	return nil
}

// cstring reads a NUL-terminated C string out of buf.
func cstring(buf []byte) string {
	for i, b := range buf {
		if b == 0 {
			return string(buf[:i])
		}
	}
	return string(buf)
}

// readString calls f with a buffer of n bytes and returns the string it wrote.
func readString(fn string, n int, f func(*byte, uint32) error) (string, error) {
	buf := make([]byte, n)
	if err := f(&buf[0], uint32(n)); err != nil {
		return "", wrap(fn, err)
	}
	return cstring(buf), nil
}

// DriverVersion returns the kernel driver's version, such as "580.95.05".
func (s *Session) DriverVersion() (string, error) {
	if err := s.check("DriverVersion"); err != nil {
		return "", err
	}
	return readString("nvmlSystemGetDriverVersion", int(nvmlraw.NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE), nvmlraw.SystemGetDriverVersion)
}

// Version returns NVML's own version, such as "13.580.95.05".
func (s *Session) Version() (string, error) {
	if err := s.check("Version"); err != nil {
		return "", err
	}
	return readString("nvmlSystemGetNVMLVersion", int(nvmlraw.NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE), nvmlraw.SystemGetNVMLVersion)
}

// CUDADriverVersion returns the CUDA version the driver supports, as
// cuDriverGetVersion reports it (13000 for 13.0).
func (s *Session) CUDADriverVersion() (int, error) {
	if err := s.check("CUDADriverVersion"); err != nil {
		return 0, err
	}
	var v int32
	if err := nvmlraw.SystemGetCudaDriverVersionV2(&v); err != nil {
		return 0, wrap("nvmlSystemGetCudaDriverVersion_v2", err)
	}
	return int(v), nil
}
