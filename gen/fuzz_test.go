package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fuzzTimeout bounds one input of FuzzHeader; one takes tens of milliseconds, one at
// the expansion limit a few seconds. The check of the headers gets a third of it.
const fuzzTimeout = time.Minute

// fuzzSeeds are FuzzHeader's seed corpus: the inputs that broke gen, and the kinds of
// declaration the CUDA headers are made of.
var fuzzSeeds = []string{
	// Hangs.
	okHeader + "enum",
	okHeader + "int *",
	okHeader + "int *;\n",
	okHeader + "struct s { int * ; };\n",
	okHeader + "#include \"bad.h\"\n",
	"#include \"bad.h\"\n" + okHeader,
	"#define BAD_X (int *\n" + okHeader,
	// Errors that were long or hit gofmt.
	okHeader + "int badArr[-1];\nint badArr2[-1];\n",
	"int bad(int x);\n",
	"typedef enum { BAD_$X } badE;\n",
	// Realistic.
	"#ifndef BAD_H\n#define BAD_H\n#include <stddef.h>\n#define BAD_VERSION 3\n#define BAD_FLAG (1u << 4)\n#define BAD_PTR ((void*)1)\n" +
		"typedef struct badCtx_st *badCtx_t;\ntypedef enum { BAD_OK = 0, BAD_ERR = -1 } badStatus;\n" +
		"typedef struct { int n; float v[4]; unsigned flag : 3; } badRec;\n" +
		"badStatus badCreate(badCtx_t *ctx);\nbadStatus badDestroy(badCtx_t ctx);\n" +
		"badStatus badRun(badCtx_t ctx, const badRec *in, badRec *out, size_t n, void *work);\n#endif\n",
	"typedef union { int i; float f; } badU;\ntypedef void (*badFn)(void *);\nint badCall(badFn f, badU u, const char *name);\n",
	"typedef enum badMode { BAD_MODE_A = 1 << 0, BAD_MODE_B = 1 << 1 } badMode_t;\nunsigned long long badSize_v2(badMode_t m, int **pp);\n",
	"#define BAD_F 1.5f\n#define BAD_D 1e300\n#define BAD_INF (1.0/0.0)\n#define BAD_ID(x) x\nint badOk(int x);\n" +
		"#define badAlias badOk\n#define badAlias2 BAD_ID(badOk)\n#define badLoop badLoop\n#define badA badB\n#define badB badA\n" +
		"int badQ(const int *const *p, int a[const 3], void (*const f)(int *restrict));\nint badE(enum { BAD_E1 } e);\n",
	"struct badPair { long a; double b; };\nstruct badPair badMake(int a, double b);\nint badDim_64(long long n, int lda, const double *A);\n",
}

// FuzzHeader runs what the generator does with a library's header (parse, model, emit)
// on arbitrary header text: it must return, with an error or without, within
// fuzzTimeout and without panicking, and an error must be a few lines.
//
//	go test ./gen -run '^$' -fuzz FuzzHeader -fuzztime 2m
func FuzzHeader(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	specs := []*Spec{{Name: "bad", Title: "Bad", Entry: []string{"bad.h"}, Files: []string{"bad.h"}, Prefix: "bad",
		MacroPrefixes: []string{"BAD_"}, Soname: "libbad.so.1", Env: "GOCUDA_BAD_LIB", Import: module + "/bad"}}
	defer func(d time.Duration) { preprocessTimeout = d }(preprocessTimeout)
	preprocessTimeout = fuzzTimeout / 3
	f.Fuzz(func(t *testing.T, header string) {
		inc := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(inc, "bad.h"), []byte(header), 0o644))
		// cc cannot be stopped, so a hang is reported from another goroutine by ending
		// the process: the fuzzer keeps the input, and nothing is left spinning.
		watchdog := time.AfterFunc(fuzzTimeout, func() {
			panic(fmt.Sprintf("FuzzHeader: no result within %v for the header %q", fuzzTimeout, clip(header, 500)))
		})
		defer watchdog.Stop()
		err := generateHeader(inc, specs)
		if err != nil {
			assert.LessOrEqual(t, strings.Count(err.Error(), "\n")+1, maxLines, "the error is short:\n%s", err)
		}
	})
}

// generateHeader is what run does for library bad, in memory.
func generateHeader(inc string, specs []*Spec) error {
	ast, err := parseHeaders(inc, specs)
	if err != nil {
		return err
	}
	m, err := buildModel(ast, specs)
	if err != nil {
		return err
	}
	if err := m.libs["bad"].Err; err != nil {
		return err
	}
	_, err = emitLib(m, m.libs["bad"], "go run ../gen -lib bad", "")
	return err
}
