// Package nvmltest builds and drives fakenvml.c, a fake libnvidia-ml.so.1, so that
// package nvml's logic is tested without a GPU (CI). Install installs it for a test
// binary where the real NVML cannot be loaded (tools/cudainfo's tests use it too);
// the control functions inject events and read the fake's counters.
package nvmltest

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>

static void *fn_open(const char *path) { return dlopen(path, RTLD_LAZY | RTLD_LOCAL); }
static void *fn_sym(void *h, const char *name) { return dlsym(h, name); }
static int fn_real(void) {
	void *h = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
	if (h == NULL) return 0;
	dlclose(h);
	return 1;
}
static int fn_inject(void *f, int dev, unsigned long long type, unsigned long long data) {
	return ((int (*)(int, unsigned long long, unsigned long long))f)(dev, type, data);
}
static int fn_int(void *f) { return ((int (*)(void))f)(); }
static void fn_set(void *f, int on) { ((void (*)(int))f)(on); }
*/
import "C"

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"unsafe"
)

//go:embed fakenvml.c
var source []byte

// Env is the variable that names the NVML library nvmlraw opens (nvmlraw.SonameEnv).
const Env = "GOCUDA_NVML_LIB"

// EnvFake holds the path of the fake that Main installed.
const EnvFake = "GOCUDA_FAKENVML"

// ErrNotLoaded is returned by the control functions where the fake is not installed.
var ErrNotLoaded = errors.New("nvmltest: the fake NVML is not installed")

// Build compiles the fake into dir and returns its path.
func Build(dir string) (string, error) {
	if _, err := exec.LookPath("gcc"); err != nil {
		return "", fmt.Errorf("nvmltest: gcc not found: %w", err)
	}
	src := filepath.Join(dir, "fakenvml.c")
	if err := os.WriteFile(src, source, 0o644); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "libfakenvml.so")
	cmd := exec.Command("gcc", "-O2", "-shared", "-fPIC", "-pthread", "-o", out, src)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("nvmltest: gcc: %v\n%s", err, b)
	}
	return out, nil
}

// Install builds the fake into a temporary directory and points $GOCUDA_NVML_LIB at it,
// unless that variable is set already, the real libnvidia-ml.so.1 can be loaded or
// GOCUDA_GPU_TESTS=require (the GPU machine). It returns a function that removes the
// build, and whether the fake was installed.
func Install() (cleanup func(), installed bool, err error) {
	if os.Getenv(Env) != "" || os.Getenv("GOCUDA_GPU_TESTS") == "require" || C.fn_real() != 0 {
		return func() {}, false, nil
	}
	dir, err := os.MkdirTemp("", "fakenvml-")
	if err != nil {
		return func() {}, false, err
	}
	path, err := Build(dir)
	if err != nil {
		os.RemoveAll(dir)
		return func() {}, false, err
	}
	os.Setenv(Env, path)
	os.Setenv(EnvFake, path)
	return func() {
		os.Unsetenv(Env)
		os.Unsetenv(EnvFake)
		os.RemoveAll(dir)
	}, true, nil
}

var (
	once   sync.Once
	handle unsafe.Pointer
)

// lib returns the fake's handle (the one nvmlraw opened: dlopen of the same path
// returns it), or nil where the fake is not installed.
func lib() unsafe.Pointer {
	once.Do(func() {
		path := os.Getenv(EnvFake)
		if path == "" || os.Getenv(Env) != path {
			return
		}
		cs := C.CString(path)
		defer C.free(unsafe.Pointer(cs))
		handle = C.fn_open(cs)
	})
	return handle
}

func sym(name string) unsafe.Pointer {
	h := lib()
	if h == nil {
		return nil
	}
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	return C.fn_sym(h, cs)
}

// Loaded reports whether the process uses the fake.
func Loaded() bool { return lib() != nil }

// Inject delivers an event of the given type (an nvmlEventType* bit) with data (the
// Xid of an Xid event) on device dev to every event set registered for it, and
// returns how many received it.
func Inject(dev int, eventType, data uint64) (int, error) {
	f := sym("fakenvml_inject")
	if f == nil {
		return 0, ErrNotLoaded
	}
	return int(C.fn_inject(f, C.int(dev), C.ulonglong(eventType), C.ulonglong(data))), nil
}

// LiveSets returns the number of event sets made and not freed.
func LiveSets() (int, error) {
	f := sym("fakenvml_live_sets")
	if f == nil {
		return 0, ErrNotLoaded
	}
	return int(C.fn_int(f)), nil
}

// Inits returns NVML's Init count: nvmlInit calls less nvmlShutdown calls.
func Inits() (int, error) {
	f := sym("fakenvml_inits")
	if f == nil {
		return 0, ErrNotLoaded
	}
	return int(C.fn_int(f)), nil
}

// UUIDLookup turns the fake's nvmlDeviceGetHandleByUUID on or off (off: it finds no
// device, so that lookups fall back to the PCI bus id).
func UUIDLookup(on bool) error {
	f := sym("fakenvml_uuid_lookup")
	if f == nil {
		return ErrNotLoaded
	}
	v := 0
	if on {
		v = 1
	}
	C.fn_set(f, C.int(v))
	return nil
}
