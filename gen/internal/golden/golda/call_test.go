package golda

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/gocuda/gocuda/gen/internal/golden/goldentest"
	"github.com/gocuda/gocuda/internal/errs"
	"github.com/gocuda/gocuda/resource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The call tests go through the generated bindings end to end: TestMain compiles
// testdata/golda_impl.c into a shared library and points $GOCUDA_GOLDA_LIB at it, so
// every generated trampoline (scalars, pointers, structs by value, strings, size_t,
// function pointers) calls real C code.

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "golda")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lib := filepath.Join(dir, "libgolda.so")
	if err := goldentest.SharedLib(lib, "testdata/golda_impl.c"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	os.Setenv("GOCUDA_GOLDA_LIB", lib)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func TestLibrary(t *testing.T) {
	assert.Equal(t, "libgolda.so.3", Library().Soname(), "soname from {GOLDA_VERSION_MAJOR}")
	assert.Equal(t, "GOCUDA_GOLDA_LIB", Library().EnvVar())
	require.NoError(t, Library().Open())
}

func newCtx(t *testing.T) GoldCtx {
	t.Helper()
	var ctx GoldCtx
	require.NoError(t, Create(&ctx))
	require.NotZero(t, ctx)
	t.Cleanup(func() { assert.NoError(t, Destroy(ctx)) })
	return ctx
}

func TestStatus(t *testing.T) {
	assert.NoError(t, Bar(0, 1))
	err := Bar(0, -1)
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrInvalidValue))
	assert.Equal(t, "golda: GOLD_STATUS_INVALID_VALUE (7): invalid value", err.Error())
	assert.ErrorIs(t, Destroy(0), ErrNotInitialized)
	// Duplicate values: one name and description, two sentinels.
	assert.Equal(t, ErrInternalError, ErrLast)
	assert.Equal(t, "GOLD_STATUS_INTERNAL_ERROR", GOLD_STATUS_LAST.String())
	assert.Equal(t, "Status(99)", Status(99).String())
	assert.Equal(t, "unknown status", Status(99).Description())
}

func TestScalars(t *testing.T) {
	ctx := newCtx(t)
	assert.NoError(t, BarV2(ctx, -(1<<40), GOLD_FLAG_TOP), "int64 and unsigned enum arguments")
	assert.ErrorIs(t, BarV2(ctx, 1<<40, GOLD_FLAG_TOP), ErrInternalError)

	x := []float32{1, 2, 3}
	require.NoError(t, Scale(ctx, 3, 2, &x[0]))
	require.NoError(t, Scale64(ctx, 2, -1, &x[0]))
	assert.Equal(t, []float32{-2, -4, 6}, x)

	var prev GoldMode
	require.NoError(t, SetMode(ctx, GOLD_MODE_NEG, &prev))
	assert.Equal(t, GOLD_MODE_DEFAULT, prev)
	require.NoError(t, SetMode(ctx, GOLD_MODE_HEX, &prev))
	assert.Equal(t, GOLD_MODE_NEG, prev, "negative enum value round trip")

	size, err := GetWorkspaceSize(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(1<<33+16), size, "size_t result above 32 bits")

	var addr Goldptr
	require.NoError(t, GetAddr(ctx, &addr, 0x1234))
	assert.Equal(t, Goldptr(0x100001234), addr)

	data := []byte{1, 2, 250}
	sum, err := Checksum(unsafe.Pointer(&data[0]), uint64(len(data)))
	require.NoError(t, err)
	assert.Equal(t, uint8(253), sum)
}

func TestPointers(t *testing.T) {
	ctx := newCtx(t)
	name := []byte("golden\x00")
	x := float32(4)
	var out unsafe.Pointer
	require.NoError(t, Foo(ctx, &name[0], &x, &out), "Foo binds goldFoo_v2")
	assert.Equal(t, uintptr(10), uintptr(out))
}

func TestStructsByValue(t *testing.T) {
	dot, err := Dot(GoldPoint{1, 2}, GoldPoint{3, -4})
	require.NoError(t, err)
	assert.Equal(t, float32(-5), dot)
	mid, err := Mid(GoldPoint{1, 2}, GoldPoint{3, -4})
	require.NoError(t, err)
	assert.Equal(t, GoldPoint{2, -1}, mid)
}

func TestStringResult(t *testing.T) {
	s, err := GetErrorString(GOLD_STATUS_ALLOC_FAILED)
	require.NoError(t, err)
	assert.Equal(t, "allocation failed", s)
	s, err = GetErrorString(GOLD_STATUS_SUCCESS)
	require.NoError(t, err)
	assert.Equal(t, "no error", s)
}

func TestVoid(t *testing.T) {
	before, err := Checksum(nil, 0)
	require.NoError(t, err)
	require.NoError(t, Reset())
	after, err := Checksum(nil, 0)
	require.NoError(t, err)
	assert.Equal(t, before+1, after)
}

func TestFunctionPointers(t *testing.T) {
	ctx := newCtx(t)
	record, err := Library().NewProc("goldImplRecord").Addr()
	require.NoError(t, err)
	sum, err := Library().NewProc("goldImplSum").Addr()
	require.NoError(t, err)

	n := new(int64)
	require.NoError(t, SetCallback(ctx, GoldCallback(record), unsafe.Pointer(n)), "typedef'd callback parameter")
	assert.Equal(t, int64(1003), *n)

	*n = 0
	require.NoError(t, ForEach(ctx, sum, unsafe.Pointer(n), 2, 4), "function pointer parameter; Go keyword parameter names")
	assert.Equal(t, int64(0+2+4+6), *n)
}

// TestDescribe passes goldDesc by pointer both ways: C copies it and sets its bit fields.
func TestDescribe(t *testing.T) {
	ctx := newCtx(t)
	var in, out GoldDesc
	in.Kind = 5
	*in.Value.D() = 2.5
	in.Inner = GoldDesc_Inner{A: 7, B: 9}
	in.Anon14 = GoldDesc_Anon14{X: 0xabc, Y: 77}
	copy(in.Name[:], "go")
	in.Addr = 1 << 40
	in.Mode = GOLD_MODE_NEG
	in.SetBig(123)
	require.NoError(t, Describe(ctx, &in, &out))
	assert.Equal(t, 2.5, *out.Value.D())
	assert.Equal(t, in.Inner, out.Inner)
	assert.Equal(t, in.Anon14, out.Anon14)
	assert.Equal(t, byte('C'), out.Name[0])
	assert.Equal(t, byte('o'), out.Name[1])
	assert.Equal(t, in.Addr, out.Addr)
	assert.Equal(t, GOLD_MODE_NEG, out.Mode)
	assert.Equal(t, uint32(1), out.Ready())
	assert.Equal(t, uint32(5), out.Flags())
	assert.Equal(t, int32(-5), out.Level())
	assert.Equal(t, uint32(7000), out.Wide())
	assert.Equal(t, int32(-9), out.Delta())
	assert.Equal(t, uint64(0xabc), out.Lo())
	assert.Equal(t, uint64(77*1000003), out.Big())
	assert.Equal(t, uint8(6), out.Tail())
	assert.Equal(t, uint16(7), out.Last())
}

func TestOwnedCtx(t *testing.T) {
	live := func() uint64 {
		n, err := GetWorkspaceSize(0)
		require.NoError(t, err)
		return n
	}
	base := live()
	o, err := NewOwnedCtx()
	require.NoError(t, err)
	require.NotZero(t, o.Handle())
	assert.Equal(t, base+1, live())
	require.NoError(t, o.Close())
	assert.Equal(t, base, live())
	assert.Zero(t, o.Handle())
	err = o.Close()
	assert.ErrorIs(t, err, errs.ErrClosed)
	assert.ErrorIs(t, err, resource.ErrReleased)
	assert.Equal(t, errs.Closed("golda: OwnedCtx"), err)
	var nilOwner *OwnedCtx
	assert.Equal(t, errs.Closed("golda: OwnedCtx"), nilOwner.Close())

	var h GoldCtx
	require.NoError(t, Create(&h))
	o = OwnCtx(h)
	assert.Equal(t, h, o.Handle())
	require.NoError(t, o.Close())
	assert.Equal(t, base, live())
}

// Queue is the handwritten type of a resource row: the same Close story as the owners.
func TestQueue(t *testing.T) {
	live := func() uint64 {
		n, err := GetWorkspaceSize(0)
		require.NoError(t, err)
		return n
	}
	base := live()
	q, err := NewQueue()
	require.NoError(t, err)
	assert.Equal(t, base+1, live())
	require.NoError(t, q.Close())
	assert.Equal(t, base, live())
	assert.Equal(t, errs.Closed("golda: Queue"), q.Close())
	var nilQueue *Queue
	assert.Equal(t, errs.Closed("golda: Queue"), nilQueue.Close())
}
