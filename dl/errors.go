package dl

import (
	"errors"
	"strings"
)

// ErrLibraryNotFound is matched by errors.Is for every [*LibraryError]: a
// library that could not be opened.
var ErrLibraryNotFound = errors.New("gocuda: library not found")

// ErrSymbolNotFound is matched by errors.Is for every [*SymbolError]: a
// symbol missing from a library that was opened.
var ErrSymbolNotFound = errors.New("gocuda: symbol not found")

// LibraryError reports that a library could not be opened.
type LibraryError struct {
	Library string // short name of the library, such as "cublas"
	Soname  string // default name, such as "libcublas.so.13"
	Env     string // environment variable that overrides Soname, or ""
	Tried   string // the name or path that was passed to dlopen
	FromEnv bool   // whether Tried came from the environment variable Env
	Err     string // the dlerror text
}

// Error returns a message naming the library, what was passed to dlopen, the
// dynamic linker's reason and, when Tried was the soname, the environment
// variable that can point at the library.
func (e *LibraryError) Error() string {
	var b strings.Builder
	b.WriteString("gocuda: ")
	b.WriteString(e.Library)
	b.WriteString(" library not loaded: dlopen ")
	b.WriteString(e.Tried)
	if e.FromEnv {
		b.WriteString(" (from ")
		b.WriteString(e.Env)
		b.WriteString(")")
	}
	b.WriteString(": ")
	b.WriteString(e.Err)
	if !e.FromEnv && e.Env != "" {
		b.WriteString(" (set ")
		b.WriteString(e.Env)
		b.WriteString(" to the library's path)")
	}
	return b.String()
}

// Is reports whether target is [ErrLibraryNotFound].
func (e *LibraryError) Is(target error) bool { return target == ErrLibraryNotFound }

// SymbolError reports that an opened library does not export a symbol.
type SymbolError struct {
	Library string // short name of the library, such as "cudnn"
	Soname  string // default name, such as "libcudnn.so.9"
	Path    string // resolved path of the library file that was opened
	Symbol  string // the missing symbol
	Err     string // the dlerror text
	// Reason is the likely cause: the library is older than the headers, or the
	// file loaded is another library altogether (its ELF soname says which).
	Reason string
}

// Error returns a message naming the symbol, the library, its soname, the path
// of the file that was loaded and the likely cause.
func (e *SymbolError) Error() string {
	reason := e.Reason
	if reason == "" {
		reason = "the library is older than the headers gocuda was generated from"
	}
	return "gocuda: symbol " + e.Symbol + " not found in " + e.Library +
		" (" + e.Soname + ", " + e.Path + "): " + reason
}

// Is reports whether target is [ErrSymbolNotFound].
func (e *SymbolError) Is(target error) bool { return target == ErrSymbolNotFound }
