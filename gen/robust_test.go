package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The generator must never panic or hang on malformed input, and its errors stay
// short. These tests run it on bad specs and headers; FuzzHeader on arbitrary ones.

// deadline bounds one generation in these tests; a good one takes well under a second.
const deadline = 30 * time.Second

// maxLines is the most lines an error may have: maxErrorLines errors, the count of
// the others and a line of context.
const maxLines = maxErrorLines + 2

// runWithin runs the generator for library bad on the header bad.h (and more headers,
// name → text) and spec, failing the test if it does not return within deadline.
func runWithin(t *testing.T, header string, more map[string]string, spec string) error {
	t.Helper()
	inc, specs := badTree(t, header, spec)
	for name, text := range more {
		require.NoError(t, os.WriteFile(filepath.Join(inc, name), []byte(text), 0o644))
	}
	out := t.TempDir()
	done := make(chan error, 1)
	go func() {
		done <- run([]string{"-include", inc, "-specs", specs, "-lib", "bad", "-out", out}, io.Discard)
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(deadline):
		t.Fatalf("generation did not finish within %v", deadline)
		return nil
	}
}

// assertShort checks that err has at most maxLines lines, none of them huge.
func assertShort(t *testing.T, err error) {
	t.Helper()
	lines := strings.Split(err.Error(), "\n")
	assert.LessOrEqual(t, len(lines), maxLines, "the error is short:\n%s", err)
	for _, l := range lines {
		assert.LessOrEqual(t, len(l), 2*maxErrorLen+200, "no line is huge")
	}
}

// statusHeader declares a status enum and a function returning it, for specs that
// use status and in_context.
const statusHeader = "typedef enum { BAD_OK, BAD_FAIL } badStatus;\nbadStatus badOk(int x);\nint badPlain(int x);\n"

const statusSpec = badSpec + "status = \"badStatus\"\nsuccess = \"BAD_OK\"\n"

// TestMalformedSpec checks that specs which are wrong, or missing what another part of
// gen relies on, are errors naming the spec file, not panics.
func TestMalformedSpec(t *testing.T) {
	require.NoError(t, runWithin(t, statusHeader, nil, statusSpec), "the base spec is valid")
	for _, c := range []struct {
		name, header, spec string
		want               []string
	}{
		// gen used to dereference the missing cuda library in inContextVariant.
		{"in_context without a cuda spec", statusHeader, statusSpec + "in_context = [\"*\"]\n",
			[]string{"in_context needs the cuda library", "no cuda spec is loaded"}},
		{"in_context of one function without a cuda spec", statusHeader, statusSpec + "in_context = [\"badOk\"]\n",
			[]string{"in_context needs the cuda library"}},
		{"name not a Go identifier", okHeader, strings.Replace(badSpec, `name = "bad"`, `name = "bad-lib"`, 1),
			[]string{`name "bad-lib" is not a Go package name`}},
		{"status without success", statusHeader, badSpec + "status = \"badStatus\"\n",
			[]string{"status is badStatus but success is empty"}},
		{"success without status", statusHeader, badSpec + "success = \"BAD_OK\"\n",
			[]string{"success is BAD_OK but status is empty"}},
		{"empty entry", okHeader, strings.Replace(badSpec, `entry = ["bad.h"]`, `entry = ["bad.h", ""]`, 1),
			[]string{"entry lists an empty header name"}},
		{"rename to a non-identifier", okHeader, badSpec + "[rename]\nbadT = \"Bad T\"\n",
			[]string{`rename of badT: "Bad T" is not a Go identifier`}},
		{"resource go name not an identifier", okHeader, badSpec + "[[resource]]\ntype = \"x\"\ngo = \"1x\"\ndestroy = \"badOk\"\nwhy = \"w\"\n",
			[]string{`resource x: go = "1x" is not a Go identifier`}},
		{"empty spec", okHeader, "", []string{"name is empty"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := runWithin(t, c.header, nil, c.spec)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "bad.toml", "the error names the spec file")
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
			assertShort(t, err)
		})
	}

	t.Run("in_context lists an unbound function", func(t *testing.T) {
		// With a (small) cuda library beside it, only the list is wrong.
		inc, specs := badTree(t, statusHeader, statusSpec+"in_context = [\"badGone\"]\n")
		require.NoError(t, os.WriteFile(filepath.Join(inc, "cuda.h"), []byte("typedef struct CUctx_st *CUcontext;\nint cuInit(int f);\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(specs, "cuda.toml"), []byte(strings.NewReplacer(
			`"bad"`, `"cuda"`, `"bad.h"`, `"cuda.h"`, `"Bad"`, `"CUDA"`, `prefix = "bad"`, `prefix = "cu"`, "GOCUDA_BAD_LIB", "GOCUDA_CUDA_LIB").Replace(badSpec)), 0o644))
		err := run([]string{"-include", inc, "-specs", specs, "-lib", "bad", "-out", t.TempDir(), "-strict"}, io.Discard)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "bad.toml: the spec names what the headers lack (-strict)")
		assert.Contains(t, err.Error(), "in_context function badGone dropped: the headers do not declare it")
	})

	t.Run("two specs of one library", func(t *testing.T) {
		_, specs := badTree(t, okHeader, badSpec)
		require.NoError(t, os.WriteFile(filepath.Join(specs, "bad2.toml"), []byte(badSpec), 0o644))
		_, err := loadSpecs(specs, module)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "bad2.toml: library bad is also specified by "+filepath.Join(specs, "bad.toml"))
	})
}

// TestMalformedHeader checks that headers which used to hang cc, or gen, end promptly
// with a short error naming the header.
func TestMalformedHeader(t *testing.T) {
	var manyErrors string
	for i := range 300 {
		manyErrors += fmt.Sprintf("int badArr%d[-1];\n", i)
	}
	bomb := "#define BAD_A0 x\n"
	for i := 1; i <= 40; i++ {
		bomb += fmt.Sprintf("#define BAD_A%d BAD_A%d BAD_A%d\n", i, i-1, i-1)
	}
	for _, c := range []struct {
		name, header string
		more         map[string]string // other headers in the include directory
		want         []string          // in the error
	}{
		// cc's parser skipped the stray token forever at the end of its input.
		{"stray enum at the end", okHeader + "enum", nil, []string{"bad.h: the headers end inside a declaration, at \"enum\""}},
		{"stray enum line", okHeader + "enum\n", nil, []string{"bad.h: the headers end inside a declaration, at \"enum\""}},
		{"stray pointer at the end", okHeader + "int *", nil, []string{"bad.h: the headers end inside a declaration, at \"*\""}},
		{"struct cut short", okHeader + "typedef struct {\n", nil, []string{"bad.h: the headers end inside a declaration, at \"{\""}},
		{"stray token in an included header", okHeader + "#include \"other.h\"\n", map[string]string{"other.h": "int x;\nenum\n"},
			[]string{"other.h: the headers end inside a declaration, at \"enum\""}},
		// ... or after a broken last declaration, which ends in ';'.
		{"pointer without declarator", okHeader + "int *;\n", nil, []string{"bad.h:2:6: unexpected ';', expected type qualifier"}},
		{"pointer without declarator in a struct", okHeader + "struct s { int * ; };\n", nil, []string{"bad.h:2:18: unexpected ';', expected type qualifier"}},
		// The preprocessor read a self-including header forever.
		{"header includes itself", okHeader + "#include \"bad.h\"\n", nil,
			[]string{"bad.h: #include nested more than 200 deep: the header includes itself (bad.h → bad.h) without an include guard"}},
		{"headers include each other", okHeader + "#include \"other.h\"\n", map[string]string{"other.h": "#include \"bad.h\"\n"},
			[]string{"#include nested more than 200 deep", "(bad.h → other.h → bad.h)"}},
		{"header includes itself first", "#include \"bad.h\"\n" + okHeader, nil, []string{"bad.h: #include nested more than 200 deep"}},
		// ... even when it tries to mislead the check with its markers.
		{"header includes itself with markers", okHeader + "#pragma __gocuda_eof 0\n#pragma __gocuda_eof_0 0\n__gocuda_probe_0\n#include \"bad.h\"\n", nil,
			[]string{"bad.h: #include nested more than 200 deep"}},
		{"header includes itself and a guarded header", okHeader + "#include <stddef.h>\n#include \"bad.h\"\n", nil,
			[]string{"bad.h: #include nested more than 200 deep: the header includes itself (bad.h → bad.h)"}},
		// cc read the arguments of a call never closed through the self-inclusion.
		{"header includes itself in a macro call", "#define BAD_F(a) a\n" + okHeader + "BAD_F(\n#include \"bad.h\"\n", nil,
			[]string{"bad.h: #include nested more than 200 deep"}},
		{"headers end inside a macro call", "#define BAD_F(a) a\n" + okHeader + "BAD_F(\n", nil, []string{"unterminated argument list invoking macro \"BAD_F\""}},
		{"headers end inside a macro call closed later", "#define BAD_F(a) a\n" + okHeader + "BAD_F(int\n", nil, []string{"bad.h: the headers end inside"}},
		{"headers end inside a macro call that drops its argument", "#define BAD_G(a)\n" + okHeader + "BAD_G(\n", nil,
			[]string{"bad.h: the headers end inside a macro call"}},
		// Exponential macros stop at the expansion limit, in the text or not.
		{"exponential macro in the text", bomb + okHeader + "int BAD_A40;\n", nil, []string{"bad.h:43:5: macro expansion limit exceeded"}},
		{"exponential macro", bomb + okHeader, nil, []string{"bad.h: macro expansion exceeds its limit"}},
		// Long errors: at most maxErrorLines of cc's errors, and a count of the rest.
		{"many errors", okHeader + manyErrors, nil, []string{"bad.h:2:13: invalid array size", "(and 295 more errors)"}},
		// jennifer's error on code gofmt rejects carried the whole file.
		{"enumerator not a Go identifier", okHeader + "typedef enum { BAD_$X } badE;\n", nil,
			[]string{"zz_generated_types.go:", "generated code does not compile", "BAD_$X"}},
		{"function without a Go name", "int bad(int x);\n", nil, []string{"bad.h:1:5: bad has no Go name once its prefix bad is dropped"}},
		{"type without a Go name", "typedef int $t;\nint badOk($t x);\n", nil, []string{"bad.h:1:13: type $t has no Go name"}},
		{"parameter not a Go identifier", "int badOk(int y$z);\n", nil, []string{"parameter name y$z is not a Go identifier"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			err := runWithin(t, c.header, c.more, badSpec)
			require.Error(t, err)
			t.Logf("%v in %v", err, time.Since(start).Round(time.Millisecond))
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
			assertShort(t, err)
		})
	}
}

// TestUnevaluatedMacros checks macros cc must not evaluate: cc's parser spun on the
// expansion of '#define BAD_X (int *'. They are left out; the others keep their values.
func TestUnevaluatedMacros(t *testing.T) {
	// BAD_V ends inside a call, which must not take the macros after it along.
	header := okHeader + "#define BAD_X (int *\n#define BAD_Y {1, 2}\n#define BAD_Z 7\n#define BAD_W (BAD_Z * 2)\n" +
		"#define BAD_F(a) a\n#define BAD_V BAD_F(BAD_F(\n"
	inc, specs := badTree(t, header, badSpec)
	out := t.TempDir()
	require.NoError(t, run([]string{"-include", inc, "-specs", specs, "-lib", "bad", "-out", out}, io.Discard))
	types, err := os.ReadFile(filepath.Join(out, "zz_generated_types.go"))
	require.NoError(t, err)
	assert.Contains(t, string(types), "BAD_Z = 7")
	assert.Contains(t, string(types), "BAD_W = 14")
	assert.NotContains(t, string(types), "BAD_X")
	assert.NotContains(t, string(types), "BAD_Y")
	assert.NotContains(t, string(types), "BAD_V")
}

// TestPreprocessTimeout checks the bound on the time the check of the headers takes.
func TestPreprocessTimeout(t *testing.T) {
	defer func(d time.Duration) { preprocessTimeout = d }(preprocessTimeout)
	preprocessTimeout = 0
	err := runWithin(t, strings.Repeat(okHeader, 2000), nil, badSpec)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "bad.h: preprocessing the headers did not finish within 0s")
}

// TestDeviceHeader: cc read a device as a header until memory ran out.
func TestDeviceHeader(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	inc, specs := badTree(t, okHeader+"#include \"zero.h\"\n", badSpec)
	require.NoError(t, os.Symlink("/dev/zero", filepath.Join(inc, "zero.h")))
	done := make(chan error, 1)
	go func() {
		done <- run([]string{"-include", inc, "-specs", specs, "-lib", "bad", "-out", t.TempDir()}, io.Discard)
	}()
	select {
	case err := <-done:
		require.Error(t, err)
		assert.Contains(t, err.Error(), filepath.Join(inc, "zero.h")+": not a regular file")
		assertShort(t, err)
	case <-time.After(deadline):
		t.Fatalf("generation did not finish within %v", deadline)
	}
}

// TestEmptyHeader: a library whose header declares nothing is generated, empty.
func TestEmptyHeader(t *testing.T) {
	for _, h := range []string{"", "\n\n", "/* nothing */\n", "#define BAD_ONLY 1\n"} {
		require.NoError(t, runWithin(t, h, nil, badSpec), "header %q", h)
	}
}

func TestShortErrors(t *testing.T) {
	long := strings.Repeat("x", 2*maxErrorLen)
	for _, c := range []struct {
		name, in, skip, want string
	}{
		{"one", "a.h:1:2: bad", "", "a.h:1:2: bad"},
		{"cc's origin dropped", "a.h:1:2: bad (check.go:347:checkScope:)", "", "a.h:1:2: bad"},
		{"blank lines dropped", "\na.h:1:2: bad\n\n", "", "a.h:1:2: bad"},
		{"several", "e1\ne2\ne3", "", "e1\n\te2\n\te3"},
		{"capped", "e1\ne2\ne3\ne4\ne5\ne6\ne7", "", "e1\n\te2\n\te3\n\te4\n\te5\n\t(and 2 more errors)"},
		{"clipped", long, "", long[:maxErrorLen] + "…"},
		{"skipped source", "t:1:1: noise\na.h:1:1: bad", "t", "a.h:1:1: bad"},
		{"skipped source alone", "t:1:1: noise", "t", "t:1:1: noise"},
		{"nothing", "\n", "", "unknown error"},
	} {
		assert.Equal(t, c.want, shortErrors(errors.New(c.in), c.skip), c.name)
	}
}

func TestRenderError(t *testing.T) {
	src := "package x\n\nfunc (x int) {\n}\n" + strings.Repeat("// filler\n", 300)
	err := renderError("zz_generated_x.go", fmt.Errorf("Error 3:6: expected 'IDENT', found '(' while formatting source:\n%s", src))
	assert.Equal(t, "zz_generated_x.go:3:6: generated code does not compile: expected 'IDENT', found '('\n\tfunc (x int) {", err.Error())
	err = renderError("zz_generated_x.go", errors.New("something else\nsecond line"))
	assert.Equal(t, "zz_generated_x.go: generated code does not format: something else\n\tsecond line", err.Error())
}
