// Package layouttest checks generated Go types against the C headers they came from:
// it compiles a C program that prints sizeof, _Alignof, offsetof and constant values
// and compares each with the value Go computed. Generated layout tests call it.
package layouttest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Item is one C expression and the value Go has for it.
type Item struct {
	Expr   string // C expression: sizeof(T), offsetof(T, f), a constant
	Signed bool   // compare I (signed) instead of U
	I      int64
	U      uint64
}

// IncludeDir finds the CUDA include directory: $CUDA_PATH, $CUDA_HOME, then
// /usr/local/cuda, the first holding include/cuda.h. It returns what it tried when
// none does.
func IncludeDir() (string, []string) {
	var tried []string
	for _, c := range []string{os.Getenv("CUDA_PATH"), os.Getenv("CUDA_HOME"), "/usr/local/cuda"} {
		if c == "" {
			continue
		}
		inc := filepath.Join(c, "include")
		if _, err := os.Stat(filepath.Join(inc, "cuda.h")); err == nil {
			return inc, nil
		}
		tried = append(tried, inc)
	}
	return "", tried
}

// Check compiles the items against headers found through IncludeDir. It skips, saying
// what it looked for, when no CUDA headers are installed (CI sets CUDA_PATH).
func Check(t *testing.T, headers []string, items []Item) {
	t.Helper()
	inc, tried := IncludeDir()
	if inc == "" {
		t.Skipf("no CUDA headers: no include/cuda.h under $CUDA_PATH, $CUDA_HOME or /usr/local/cuda (tried %v); set CUDA_PATH to check the layout", tried)
	}
	for _, h := range headers {
		if _, err := os.Stat(filepath.Join(inc, h)); err != nil {
			t.Skipf("header %s not in %s", h, inc)
		}
	}
	CheckIn(t, inc, headers, items)
}

// CheckIn is Check with an explicit include directory.
func CheckIn(t *testing.T, include string, headers []string, items []Item) {
	t.Helper()
	require.NotEmpty(t, items, "nothing to check")
	var src strings.Builder
	src.WriteString("#include <stdio.h>\n#include <stddef.h>\n#include <stdint.h>\n")
	for _, h := range headers {
		fmt.Fprintf(&src, "#include <%s>\n", h)
	}
	src.WriteString("int main(void) {\n")
	for _, it := range items {
		if it.Signed {
			fmt.Fprintf(&src, "\tprintf(\"%%lld\\n\", (long long)(%s));\n", it.Expr)
		} else {
			fmt.Fprintf(&src, "\tprintf(\"%%llu\\n\", (unsigned long long)(%s));\n", it.Expr)
		}
	}
	src.WriteString("\treturn 0;\n}\n")
	dir := t.TempDir()
	c := filepath.Join(dir, "layout.c")
	require.NoError(t, os.WriteFile(c, []byte(src.String()), 0o644))
	bin := filepath.Join(dir, "layout")
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	out, err := exec.Command(cc, "-std=gnu11", "-w", "-I", include, "-o", bin, c).CombinedOutput()
	require.NoError(t, err, "compiling the layout program against %s:\n%s", include, out)
	out, err = exec.Command(bin).Output()
	require.NoError(t, err)
	sc := bufio.NewScanner(bytes.NewReader(out))
	i := 0
	for sc.Scan() {
		require.Less(t, i, len(items), "more output than items")
		it := items[i]
		line := sc.Text()
		if it.Signed {
			v, err := strconv.ParseInt(line, 10, 64)
			require.NoError(t, err)
			assert.Equal(t, v, it.I, "%s: C says %d, Go %d", it.Expr, v, it.I)
		} else {
			v, err := strconv.ParseUint(line, 10, 64)
			require.NoError(t, err)
			assert.Equal(t, v, it.U, "%s: C says %d, Go %d", it.Expr, v, it.U)
		}
		i++
	}
	require.Equal(t, len(items), i, "the layout program printed too few lines")
	t.Logf("%d sizes, offsets and constants match the C headers in %s", len(items), include)
}

// Prototype is a bound C function, for the generated prototype tests: its name, the
// type of a pointer to it, its parameter types, the result type where Go returns it
// as is (else ""), and the Go function.
type Prototype struct {
	C      string
	Ptr    string
	Params []string
	Result string
	Fn     any
}

// Proto returns the Prototype of C function c (the generated tables' short form).
func Proto(c, ptr string, params []string, result string, fn any) Prototype {
	return Prototype{C: c, Ptr: ptr, Params: params, Result: result, Fn: fn}
}

// PrototypeItems makes the C expressions of the prototypes and the Go values they
// must equal: each function selected by exactly its pointer type (a _Generic
// selection with no other association, so a different declaration does not
// compile) with the number of Go parameters, and the size of each parameter and of
// the result.
func PrototypeItems(protos []Prototype) []Item {
	var items []Item
	for _, p := range protos {
		ft := reflect.TypeOf(p.Fn)
		items = append(items, Item{Expr: fmt.Sprintf("_Generic(&%s, %s: %d)", p.C, p.Ptr, len(p.Params)), U: uint64(ft.NumIn())})
		for i, pt := range p.Params {
			if i < ft.NumIn() {
				items = append(items, Item{Expr: "sizeof(" + pt + ")", U: uint64(ft.In(i).Size())})
			}
		}
		if p.Result != "" {
			items = append(items, Item{Expr: "sizeof(" + p.Result + ")", U: uint64(ft.Out(0).Size())})
		}
	}
	return items
}
