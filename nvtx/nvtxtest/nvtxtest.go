// Package nvtxtest runs the nvtx package's tests against a stand-in for a tool's
// injection library, built from C at test time (gcc), which records every call.
package nvtxtest

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct {
	int32_t kind;
	int32_t color_type;
	uint64_t id;
	uint64_t tid;
	uint32_t color, category;
	int32_t payload_type, version;
	uint64_t payload;
	char domain[64], name[64];
} fakenvtx_event;

static int64_t fc_count(void* f) { return ((int64_t (*)(void))f)(); }
static int fc_get(void* f, int64_t i, fakenvtx_event* e) { return ((int (*)(int64_t, fakenvtx_event*))f)(i, e); }
*/
import "C"

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"unsafe"
)

//go:embed fakenvtx.c
var source []byte

// Event is one call the stand-in recorded.
type Event struct {
	Kind        string // "start", "end", "mark" or "category"
	Domain      string // "" for the default domain
	Name        string
	ID          uint64 // the range's (start and end)
	ThreadID    uint64 // the OS thread that made the call
	Color       uint32 // 0: none
	Category    uint32
	PayloadType int32 // 0: none, 2: int64, 3: float64
	Payload     uint64
	Version     int32 // the attributes' NVTX version
}

var lib string

// Install builds the stand-in into a temporary directory and sets
// NVTX_INJECTION64_PATH to it: call it before the process's first nvtx call (in
// TestMain).
func Install() error {
	dir, err := os.MkdirTemp("", "fakenvtx")
	if err != nil {
		return err
	}
	src := filepath.Join(dir, "fakenvtx.c")
	if err := os.WriteFile(src, source, 0o600); err != nil {
		return err
	}
	lib = filepath.Join(dir, "libfakenvtx.so")
	if out, err := exec.Command("gcc", "-shared", "-fPIC", "-O1", "-o", lib, src, "-lpthread").CombinedOutput(); err != nil {
		return fmt.Errorf("nvtxtest: building the stand-in injection: %v\n%s", err, out)
	}
	return os.Setenv("NVTX_INJECTION64_PATH", lib)
}

// Installed reports whether Install made the stand-in this process's tool.
func Installed() bool { return lib != "" }

func sym(name string) unsafe.Pointer {
	if lib == "" {
		return nil
	}
	cl := C.CString(lib)
	defer C.free(unsafe.Pointer(cl))
	h := C.dlopen(cl, C.RTLD_NOW)
	if h == nil {
		return nil
	}
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	return C.dlsym(h, cn)
}

// Events returns what the stand-in recorded, oldest first (none before Install).
func Events() []Event {
	count, get := sym("fakenvtx_count"), sym("fakenvtx_get")
	if count == nil || get == nil {
		return nil
	}
	n := int64(C.fc_count(count))
	out := make([]Event, 0, n)
	var e C.fakenvtx_event
	kinds := map[int32]string{1: "start", 2: "end", 3: "mark", 4: "category"}
	for i := range n {
		if C.fc_get(get, C.int64_t(i), &e) != 0 {
			break
		}
		out = append(out, Event{
			Kind: kinds[int32(e.kind)], Domain: C.GoString(&e.domain[0]), Name: C.GoString(&e.name[0]),
			ID: uint64(e.id), ThreadID: uint64(e.tid), Color: uint32(e.color), Category: uint32(e.category),
			PayloadType: int32(e.payload_type), Payload: uint64(e.payload), Version: int32(e.version),
		})
	}
	return out
}
