package dl_test

import (
	"errors"
	"fmt"

	"github.com/gocuda/gocuda/dl"
)

// A library that cannot be found yields a *dl.LibraryError, which matches
// dl.ErrLibraryNotFound. Nothing panics and nothing fails at init time.
func Example() {
	lib := dl.NewLibrary("example", "libgocuda-does-not-exist.so.1", "GOCUDA_EXAMPLE_LIB")
	proc := lib.NewProc("exampleFunction")

	_, err := proc.Addr()
	fmt.Println(errors.Is(err, dl.ErrLibraryNotFound))

	var libErr *dl.LibraryError
	if errors.As(err, &libErr) {
		fmt.Println(libErr.Library, libErr.Soname, libErr.Env)
	}
	// Output:
	// true
	// example libgocuda-does-not-exist.so.1 GOCUDA_EXAMPLE_LIB
}

// Generated bindings declare their library and procs as package variables
// and resolve the function at each call; after the first call Addr is a
// single atomic load. The address is then passed to a C trampoline.
func ExampleProc_Addr() {
	var (
		libcublas           = dl.NewLibrary("cublas", "libcublas.so.13", "GOCUDA_CUBLAS_LIB")
		procCublasCreate_v2 = libcublas.NewProc("cublasCreate_v2")
	)
	fn, err := procCublasCreate_v2.Addr()
	if err != nil {
		// For example: gocuda: cublas library not loaded: dlopen libcublas.so.13: ...
		return
	}
	_ = fn // C.gocuda_call_cublasCreate_v2(C.uintptr_t(fn), ...)
}
