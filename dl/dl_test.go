package dl_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/dl"
	"github.com/gocuda/gocuda/dl/internal/dltest"
)

const missingSoname = "libgocuda-dltest-does-not-exist.so.1"

// buildLib compiles the test library into a fresh temporary directory and
// returns its path with symbolic links resolved. A missing C compiler fails
// the test.
func buildLib(tb testing.TB) string {
	tb.Helper()
	path, err := dltest.Build(tb.TempDir())
	require.NoError(tb, err, "building the test shared library needs gcc")
	real, err := filepath.EvalSymlinks(path)
	require.NoError(tb, err)
	return real
}

// mapped reports whether the file at path is mapped into this process.
func mapped(t *testing.T, path string) bool {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	require.NoError(t, err)
	return strings.Contains(string(maps), path)
}

func TestNewLibraryOpensNothing(t *testing.T) {
	path := buildLib(t)

	lib := dl.NewLibrary("dltest", path, "")
	proc := lib.NewProc("dltest_add")
	assert.False(t, lib.Loaded())
	assert.False(t, mapped(t, path), "NewLibrary/NewProc must not dlopen")

	fn, err := proc.Addr()
	require.NoError(t, err)
	assert.NotZero(t, fn)
	assert.True(t, lib.Loaded())
	assert.True(t, mapped(t, path), "first Addr must dlopen")
}

func TestEnvReadAtOpenNotAtConstruction(t *testing.T) {
	path := buildLib(t)
	const env = "GOCUDA_DLTEST_LAZY_LIB"
	t.Setenv(env, "")

	// Made while the variable is empty and the soname cannot be found...
	lib := dl.NewLibrary("dltest", missingSoname, env)
	proc := lib.NewProc("dltest_nop")
	// ...but the variable is set before first use, so the override wins.
	t.Setenv(env, path)

	fn, err := proc.Addr()
	require.NoError(t, err)
	assert.Equal(t, int32(dltest.NopResult), dltest.CallV(fn))
}

func TestMissingLibrary(t *testing.T) {
	const env = "GOCUDA_DLTEST_MISSING_LIB"
	t.Setenv(env, "")
	lib := dl.NewLibrary("dltest", missingSoname, env)
	add := lib.NewProc("dltest_add")
	nop := lib.NewProc("dltest_nop")

	var fn uintptr
	var err error
	require.NotPanics(t, func() { fn, err = add.Addr() })
	assert.Zero(t, fn)
	require.Error(t, err)

	assert.ErrorIs(t, err, dl.ErrLibraryNotFound)
	assert.NotErrorIs(t, err, dl.ErrSymbolNotFound)
	var le *dl.LibraryError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, "dltest", le.Library)
	assert.Equal(t, missingSoname, le.Soname)
	assert.Equal(t, env, le.Env)
	assert.Equal(t, missingSoname, le.Tried)
	assert.False(t, le.FromEnv)
	assert.Contains(t, le.Err, missingSoname)

	msg := err.Error()
	assert.True(t, strings.HasPrefix(msg, "gocuda: dltest library not loaded: dlopen "+missingSoname+": "), msg)
	assert.True(t, strings.HasSuffix(msg, "(set "+env+" to the library's path)"), msg)

	// Cached: the same value every time, from every entry point.
	for range 3 {
		fn2, err2 := add.Addr()
		assert.Zero(t, fn2)
		assert.Same(t, le, err2)
	}
	_, err = nop.Addr()
	assert.Same(t, le, err)
	assert.Same(t, le, nop.Find())
	assert.Same(t, le, lib.Open())
	p, err := lib.Path()
	assert.Empty(t, p)
	assert.Same(t, le, err)
	assert.False(t, lib.Loaded())
}

func TestMissingLibraryNoEnvVar(t *testing.T) {
	lib := dl.NewLibrary("dltest", missingSoname, "")
	err := lib.Open()
	require.ErrorIs(t, err, dl.ErrLibraryNotFound)
	assert.NotContains(t, err.Error(), "(set ")
	assert.Equal(t, "", lib.EnvVar())
}

func TestEmptySoname(t *testing.T) {
	lib := dl.NewLibrary("dltest", "", "")
	err := lib.NewProc("dltest_add").Find()
	var le *dl.LibraryError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, "empty library name", le.Err)
}

func TestEnvOverride(t *testing.T) {
	path := buildLib(t)
	const env = "GOCUDA_DLTEST_LIB"
	t.Setenv(env, path)

	lib := dl.NewLibrary("dltest", missingSoname, env)
	assert.Equal(t, "dltest", lib.Name())
	assert.Equal(t, missingSoname, lib.Soname())
	assert.Equal(t, env, lib.EnvVar())

	require.NoError(t, lib.Open())
	got, err := lib.Path()
	require.NoError(t, err)
	assert.Equal(t, path, got)

	fn, err := lib.NewProc("dltest_add").Addr()
	require.NoError(t, err)
	assert.Equal(t, int32(5), dltest.CallII(fn, 2, 3))
}

func TestEnvOverrideBadPath(t *testing.T) {
	const env = "GOCUDA_DLTEST_BAD_LIB"
	bad := filepath.Join(t.TempDir(), "nope", "libdltest.so")
	t.Setenv(env, bad)

	err := dl.NewLibrary("dltest", "libc.so.6", env).Open()
	var le *dl.LibraryError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, bad, le.Tried)
	assert.True(t, le.FromEnv)
	assert.Equal(t, "libc.so.6", le.Soname)
	assert.Contains(t, err.Error(), "dlopen "+bad+" (from "+env+"): ")
	assert.NotContains(t, err.Error(), "(set ")
}

func TestSymlinkedPath(t *testing.T) {
	dir := t.TempDir()
	_, err := dltest.BuildAs(dir, "libdltest.so.1.2.3")
	require.NoError(t, err)
	link := filepath.Join(dir, "libdltest.so.1")
	require.NoError(t, os.Symlink("libdltest.so.1.2.3", link))
	want, err := filepath.EvalSymlinks(link)
	require.NoError(t, err)

	lib := dl.NewLibrary("dltest", link, "")
	got, err := lib.Path()
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.True(t, strings.HasSuffix(got, "libdltest.so.1.2.3"), got)
}

func TestMissingSymbol(t *testing.T) {
	path := buildLib(t)
	lib := dl.NewLibrary("dltest", path, "")
	proc := lib.NewProc("dltest_missing")
	assert.Equal(t, "dltest_missing", proc.Name())
	assert.Same(t, lib, proc.Library())

	fn, err := proc.Addr()
	assert.Zero(t, fn)
	require.Error(t, err)
	assert.ErrorIs(t, err, dl.ErrSymbolNotFound)
	assert.NotErrorIs(t, err, dl.ErrLibraryNotFound)

	var se *dl.SymbolError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "dltest", se.Library)
	assert.Equal(t, path, se.Soname)
	assert.Equal(t, path, se.Path)
	assert.Equal(t, "dltest_missing", se.Symbol)
	assert.Contains(t, se.Err, "dltest_missing")
	assert.Equal(t, "gocuda: symbol dltest_missing not found in dltest ("+path+", "+path+
		"): the library is older than the headers gocuda was generated from", err.Error())

	// Cached; and the library itself is fine.
	_, err2 := proc.Addr()
	assert.Same(t, se, err2)
	assert.Same(t, se, proc.Find())
	assert.NoError(t, lib.Open())
	assert.True(t, lib.Loaded())
	assert.NoError(t, lib.NewProc("dltest_add").Find())
}

func TestResolveAndCall(t *testing.T) {
	path := buildLib(t)
	lib := dl.NewLibrary("dltest", path, "")
	add := lib.NewProc("dltest_add")
	nop := lib.NewProc("dltest_nop")

	require.NoError(t, add.Find())
	fn, err := add.Addr()
	require.NoError(t, err)
	require.NotZero(t, fn)
	assert.Equal(t, int32(5), dltest.CallII(fn, 2, 3))
	assert.Equal(t, int32(-7), dltest.CallII(fn, 10, -17))

	fn2, err := add.Addr()
	require.NoError(t, err)
	assert.Equal(t, fn, fn2, "address is cached")

	fn, err = nop.Addr()
	require.NoError(t, err)
	assert.Equal(t, int32(dltest.NopResult), dltest.CallV(fn))

	// Two Library values for one file share the dlopen handle.
	other, err := dl.NewLibrary("dltest2", path, "").NewProc("dltest_add").Addr()
	require.NoError(t, err)
	assert.Equal(t, fn2, other)
}

func TestAddrDoesNotAllocate(t *testing.T) {
	proc := dl.NewLibrary("dltest", buildLib(t), "").NewProc("dltest_add")
	require.NoError(t, proc.Find())
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := proc.Addr(); err != nil {
			panic(err)
		}
	})
	assert.Zero(t, allocs)
}

func TestConcurrentAddr(t *testing.T) {
	path := buildLib(t)
	const goroutines = 64

	lib := dl.NewLibrary("dltest", path, "")
	add := lib.NewProc("dltest_add")
	nop := lib.NewProc("dltest_nop")
	missingSym := lib.NewProc("dltest_missing")
	badLib := dl.NewLibrary("dltest", missingSoname, "")
	badProc := badLib.NewProc("dltest_add")

	type result struct {
		add, nop          uintptr
		addErr, nopErr    error
		symErr, libErr    error
		path              string
		sum               int32
		pathErr, openErr  error
		badOpen, badPaths error
	}
	results := make([]result, goroutines)
	var start, wg sync.WaitGroup
	start.Add(1)
	for i := range goroutines {
		wg.Go(func() {
			start.Wait()
			r := &results[i]
			// Vary the order so that every entry point races to be first.
			switch i % 4 {
			case 0:
				r.openErr = lib.Open()
			case 1:
				r.path, r.pathErr = lib.Path()
			case 2:
				r.badOpen = badLib.Open()
			}
			r.add, r.addErr = add.Addr()
			r.nop, r.nopErr = nop.Addr()
			r.symErr = missingSym.Find()
			_, r.libErr = badProc.Addr()
			if r.addErr == nil {
				r.sum = dltest.CallII(r.add, int32(i), 1)
			}
			_, r.badPaths = badLib.Path()
		})
	}
	start.Done()
	wg.Wait()

	first := results[0]
	require.NoError(t, first.addErr)
	require.NoError(t, first.nopErr)
	require.ErrorIs(t, first.symErr, dl.ErrSymbolNotFound)
	require.ErrorIs(t, first.libErr, dl.ErrLibraryNotFound)
	for i, r := range results {
		assert.NoError(t, r.openErr)
		assert.NoError(t, r.pathErr)
		if i%4 == 1 {
			assert.Equal(t, path, r.path)
		}
		assert.Equal(t, first.add, r.add)
		assert.Equal(t, first.nop, r.nop)
		assert.Equal(t, int32(i+1), r.sum)
		assert.Same(t, first.symErr, r.symErr)
		assert.Same(t, first.libErr, r.libErr)
		assert.Same(t, first.libErr, r.badPaths)
		if i%4 == 2 {
			assert.Same(t, first.libErr, r.badOpen)
		}
	}
}

// TestSystemCUDADriver exercises dl against the real CUDA driver library when
// the machine has one; it is skipped (with the reason) everywhere else.
func TestSystemCUDADriver(t *testing.T) {
	lib := dl.NewLibrary("cuda", "libcuda.so.1", "GOCUDA_CUDA_LIB")
	if err := lib.Open(); err != nil {
		require.ErrorIs(t, err, dl.ErrLibraryNotFound)
		t.Skipf("no CUDA driver on this machine: %v", err)
	}
	path, err := lib.Path()
	require.NoError(t, err)
	t.Logf("%s -> %s", lib.Soname(), path)

	fn, err := lib.NewProc("cuDriverGetVersion").Addr()
	require.NoError(t, err)
	ret, version := dltest.CallP(fn)
	require.Zero(t, ret, "cuDriverGetVersion status")
	assert.Positive(t, version)
	t.Logf("cuDriverGetVersion = %d", version)

	err = lib.NewProc("cuGocudaDoesNotExist").Find()
	var se *dl.SymbolError
	require.True(t, errors.As(err, &se))
	assert.Equal(t, path, se.Path)
	t.Log(err)
}

// A FIFO (or any non-regular file) given as the library path would block dlopen
// forever reading it: it is refused before dlopen, with the reason.
func TestNonRegularFileRefused(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "libcuda.so.1")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	const env = "GOCUDA_DLTEST_FIFO_LIB"
	for _, tc := range []struct{ path, says string }{
		{fifo, "named pipe (FIFO)"},
		{dir, "a directory"},
		{"/dev/null", "a device"},
	} {
		t.Setenv(env, tc.path)
		done := make(chan error, 1)
		go func() { done <- dl.NewLibrary("dltest", "libdltest-none.so.1", env).Open() }()
		select {
		case err := <-done:
			require.ErrorIs(t, err, dl.ErrLibraryNotFound, tc.path)
			var le *dl.LibraryError
			require.ErrorAs(t, err, &le)
			assert.True(t, le.FromEnv)
			assert.Equal(t, tc.path, le.Tried)
			assert.Contains(t, err.Error(), tc.says)
			assert.Contains(t, err.Error(), env)
		case <-time.After(10 * time.Second):
			t.Fatalf("opening %s did not return", tc.path)
		}
	}
}

// C strings end at the first NUL: a name with one would open or resolve something
// else (the part before it). Both are refused.
func TestNamesWithNUL(t *testing.T) {
	path := buildLib(t)
	lib := dl.NewLibrary("dltest", path, "")
	_, err := lib.NewProc("dltest_add\x00junk").Addr()
	require.ErrorIs(t, err, dl.ErrSymbolNotFound)
	var se *dl.SymbolError
	require.ErrorAs(t, err, &se)
	assert.Contains(t, err.Error(), "not a valid symbol name")
	assert.Contains(t, se.Err, "NUL")
	// The real symbol still resolves.
	require.NoError(t, lib.NewProc("dltest_add").Find())

	bad := dl.NewLibrary("dltest", path+"\x00.bak", "")
	err = bad.Open()
	require.ErrorIs(t, err, dl.ErrLibraryNotFound)
	assert.Contains(t, err.Error(), "NUL byte")
	assert.False(t, bad.Loaded())
}

// Another library given where a CUDA one is expected (libm for libcuda) loads, but
// lacks every symbol: the error says the file is another library, not that the
// library is old.
func TestWrongLibrary(t *testing.T) {
	const env = "GOCUDA_DLTEST_WRONG_LIB"
	t.Setenv(env, "libm.so.6")
	lib := dl.NewLibrary("cuda", "libcuda.so.1", env)
	require.NoError(t, lib.Open(), "libm.so.6 is on every glibc system")
	_, err := lib.NewProc("cuInit").Addr()
	require.ErrorIs(t, err, dl.ErrSymbolNotFound)
	assert.Contains(t, err.Error(), "the file is libm.so.6, not libcuda.so")
	assert.Contains(t, err.Error(), env)
	assert.NotContains(t, err.Error(), "older than the headers")
}
