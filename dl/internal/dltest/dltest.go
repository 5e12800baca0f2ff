// Package dltest holds the cgo helpers for the tests and benchmarks of
// package dl (cgo cannot be used in _test.go files): C trampolines that call
// a function pointer obtained from dl.Proc.Addr, C functions linked directly
// into the test binary for comparison, and Build, which compiles a tiny
// shared library to open with dl.
package dltest

/*
#include <stdint.h>

static int gocuda_dltest_call_ii(uintptr_t fn, int a, int b) {
	return ((int (*)(int, int))fn)(a, b);
}

static int gocuda_dltest_call_v(uintptr_t fn) {
	return ((int (*)(void))fn)();
}

static int gocuda_dltest_call_p(uintptr_t fn, int *p) {
	return ((int (*)(int *))fn)(p);
}

static int gocuda_dltest_direct_add(int a, int b) { return a + b; }

static int gocuda_dltest_direct_nop(void) { return 42; }
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Source is the C source of the test library built by Build.
const Source = `
int dltest_add(int a, int b) { return a + b; }
int dltest_nop(void) { return 42; }
`

// NopResult is the value returned by dltest_nop (and DirectNop).
const NopResult = 42

// Build compiles Source into dir/libdltest.so with the C compiler (CC, or
// gcc) and returns the library's path.
func Build(dir string) (string, error) {
	return BuildAs(dir, "libdltest.so")
}

// BuildAs compiles Source into dir/name and returns the file's path. It
// fails with a clear error when the C compiler is missing.
func BuildAs(dir, name string) (string, error) {
	cc := strings.Fields(os.Getenv("CC"))
	if len(cc) == 0 {
		cc = []string{"gcc"}
	}
	if _, err := exec.LookPath(cc[0]); err != nil {
		return "", fmt.Errorf("dltest: C compiler %q not found (the dl tests build a shared library with it; cgo needs it too): %w", cc[0], err)
	}
	src := filepath.Join(dir, "dltest.c")
	if err := os.WriteFile(src, []byte(Source), 0o644); err != nil {
		return "", err
	}
	out := filepath.Join(dir, name)
	args := append(cc[1:], "-shared", "-fPIC", "-O2", "-o", out, src)
	cmd := exec.Command(cc[0], args...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", errors.New("dltest: " + cmd.String() + ": " + err.Error() + ": " + string(msg))
	}
	return out, nil
}

// CallII calls fn as int (*)(int, int) through a C trampoline.
func CallII(fn uintptr, a, b int32) int32 {
	return int32(C.gocuda_dltest_call_ii(C.uintptr_t(fn), C.int(a), C.int(b)))
}

// CallV calls fn as int (*)(void) through a C trampoline.
func CallV(fn uintptr) int32 {
	return int32(C.gocuda_dltest_call_v(C.uintptr_t(fn)))
}

// CallP calls fn as int (*)(int *) through a C trampoline and returns its
// result and the int it stored.
func CallP(fn uintptr) (ret, out int32) {
	var v C.int
	r := C.gocuda_dltest_call_p(C.uintptr_t(fn), &v)
	return int32(r), int32(v)
}

// DirectAdd calls a C function linked into the binary that adds a and b:
// the plain cgo call that CallII is compared with.
func DirectAdd(a, b int32) int32 {
	return int32(C.gocuda_dltest_direct_add(C.int(a), C.int(b)))
}

// DirectNop calls a C function linked into the binary that returns
// NopResult: the plain cgo call that CallV is compared with.
func DirectNop() int32 {
	return int32(C.gocuda_dltest_direct_nop())
}
