package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// protoHeader declares what makes prototypes hard to spell: qualifiers at every level
// (cc keeps those of the declarator in no type), arrays, function pointers, restrict,
// typedefs of pointers, tags, enums, and long beside long long.
const protoHeader = `#include <stddef.h>
#include <stdint.h>
typedef struct badCtx_st *badCtx;
typedef enum badMode_e { BAD_A, BAD_B } badMode;
typedef int *badIntPtr;
typedef void (*badFn)(void *);
struct badRec { int a; double b; };
enum badKind { BAD_K1 = 1 };
int badConsts(const int *const *a, const char *const names[], int *const p, const badIntPtr *q);
int badArrays(float m[3], double v[], const struct badRec recs[4]);
int badFuncs(badFn f, void (*g)(int, const void *), int (*const h)(const int *const x));
int badRestrict(void *restrict dst, const void *restrict src, size_t n);
long badWidths(long a, long long b, unsigned long c, unsigned long long d, int64_t e, uint64_t f, short s, unsigned char u, _Bool ok);
const char *const *badNames(badCtx ctx, enum badKind k, badMode m, struct badRec r);
struct badRec badMake(int a);
void badNone(void);
int badAnon(enum { BAD_X1, BAD_X2 } e);
`

// checkPrototypes compiles, against header, a C file asserting each row's prototype
// as TestPrototypes does; it returns the compiler's output and error.
func checkPrototypes(t *testing.T, header string, rows []protoRow) (string, error) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.h"), []byte(header), 0o644))
	var src strings.Builder
	src.WriteString("#include \"bad.h\"\n")
	for _, r := range rows {
		fmt.Fprintf(&src, "_Static_assert(_Generic(&%s, %s: %d) == %d, %q);\n", r.c, r.ptr, len(r.params), len(r.params), r.c)
		for i, p := range r.params {
			fmt.Fprintf(&src, "_Static_assert(sizeof(%s) > 0, \"%s parameter %d\");\n", p, r.c, i)
		}
	}
	c := filepath.Join(dir, "check.c")
	require.NoError(t, os.WriteFile(c, []byte(src.String()), 0o644))
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	out, err := exec.Command(cc, "-std=gnu11", "-fsyntax-only", "-I", dir, c).CombinedOutput()
	return string(out), err
}

func TestPrototypeSpelling(t *testing.T) {
	inc, specs := badTree(t, protoHeader, badSpec)
	loaded, err := loadSpecs(specs, module)
	require.NoError(t, err)
	ast, err := parseHeaders(inc, loaded)
	require.NoError(t, err)
	m, err := buildModel(ast, loaded)
	require.NoError(t, err)
	l := m.libs["bad"]
	require.NoError(t, l.Err)
	g := &gen{m: m, lib: l, byValue: map[string]*TypeDecl{}, sigs: map[string]signature{}}
	rows, unchecked := g.prototypeRows()
	require.Len(t, rows, len(l.Funcs)-1)
	require.Len(t, unchecked, 1)
	assert.Contains(t, unchecked[0], "badAnon (anonymous", "a type C cannot name leaves its function unchecked, said so")
	byName := map[string]protoRow{}
	for _, r := range rows {
		byName[r.c] = r
	}
	// The spellings keep what C's compatibility depends on.
	assert.Equal(t, "int (*)(const int *const*, const char *const*, int *const, const badIntPtr *)", byName["badConsts"].ptr)
	assert.Equal(t, []string{"float *", "double *", "const struct badRec *"}, byName["badArrays"].params)
	assert.Equal(t, "int (*)(badFn, void (*)(int, const void *), int (*const)(const int *const))", byName["badFuncs"].ptr)
	assert.Equal(t, "const char *const*(*)(badCtx, enum badKind, badMode, struct badRec)", byName["badNames"].ptr)
	assert.Equal(t, "const char *const*", byName["badNames"].result, "a result Go returns as is is sized")
	assert.Equal(t, "void (*)(void)", byName["badNone"].ptr)
	assert.Empty(t, byName["badNone"].result)

	out, err := checkPrototypes(t, protoHeader, rows)
	require.NoError(t, err, "every spelled prototype matches the header:\n%s", out)

	// A header that differs in one qualifier, one width or one parameter does not compile.
	for _, c := range []struct{ from, to, fn string }{
		{"const int *const *a", "const int **a", "badConsts"},
		{"long long b", "long b", "badWidths"},
		{"void (*g)(int, const void *)", "void (*g)(int, void *)", "badFuncs"},
		{"size_t n);", "size_t n, int extra);", "badRestrict"},
		{"float m[3]", "double m[3]", "badArrays"},
	} {
		changed := strings.Replace(protoHeader, c.from, c.to, 1)
		require.NotEqual(t, protoHeader, changed)
		out, err := checkPrototypes(t, changed, rows)
		require.Error(t, err, "%s changed to %s", c.from, c.to)
		assert.Contains(t, out, "_Generic(&"+c.fn+",")
	}
}
