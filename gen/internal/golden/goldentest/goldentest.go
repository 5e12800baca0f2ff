// Package goldentest holds what the golden packages' handwritten tests share: building
// a C test program or a C implementation of a golden header with the host compiler.
package goldentest

import (
	"fmt"
	"os"
	"os/exec"
)

// Include is the golden headers' directory as seen from a golden package's directory
// (go test runs a package's tests there).
const Include = "../../../testdata/golden/include"

// CC is the C compiler: $CC, else gcc.
func CC() string {
	if cc := os.Getenv("CC"); cc != "" {
		return cc
	}
	return "gcc"
}

// Compile runs the C compiler on src with the golden headers on the include path,
// writing out; extra flags (-shared -fPIC for a library) come before the source.
func Compile(out, src string, extra ...string) error {
	args := append([]string{"-std=gnu11", "-w", "-I", Include, "-o", out}, extra...)
	args = append(args, src)
	if b, err := exec.Command(CC(), args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %v: %v\n%s", CC(), args, err, b)
	}
	return nil
}

// SharedLib compiles the C implementation src into the shared library out.
func SharedLib(out, src string) error { return Compile(out, src, "-shared", "-fPIC") }
