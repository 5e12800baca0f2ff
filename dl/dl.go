package dl

/*
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// dlerror's message is thread-local and overwritten by the next dl* call on
// the same thread, so every dl* call and the dlerror that explains it happen
// inside one C function (a goroutine cannot migrate to another thread during
// a cgo call), and the message is copied into the caller's buffer before
// returning.

static void gocuda_dl_error(char *buf, size_t n, const char *fallback) {
	const char *e = dlerror();
	snprintf(buf, n, "%s", e != NULL ? e : fallback);
}

static void *gocuda_dl_open(const char *name, int flags, char *errbuf, size_t errlen) {
	dlerror();
	void *h = dlopen(name, flags);
	if (h == NULL) {
		gocuda_dl_error(errbuf, errlen, "dlopen failed");
	}
	return h;
}

static void *gocuda_dl_sym(void *h, const char *sym, char *errbuf, size_t errlen) {
	dlerror();
	void *p = dlsym(h, sym);
	if (p == NULL) {
		gocuda_dl_error(errbuf, errlen, "symbol resolves to a null address");
	}
	return p;
}

// gocuda_dl_path writes the symlink-resolved path of the object behind h into
// buf. It returns 0 on success and -1 when the path is unknown.
static int gocuda_dl_path(void *h, char *buf, size_t n) {
	struct link_map *m = NULL;
	dlerror();
	if (dlinfo(h, RTLD_DI_LINKMAP, &m) != 0 || m == NULL || m->l_name == NULL || m->l_name[0] == '\0') {
		dlerror();
		return -1;
	}
	char *r = realpath(m->l_name, NULL);
	snprintf(buf, n, "%s", r != NULL ? r : m->l_name);
	free(r);
	return 0;
}
*/
import "C"

import (
	"debug/elf"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// dlopenFlags are the flags every library is opened with; see the package
// documentation for why.
const dlopenFlags = C.RTLD_LAZY | C.RTLD_LOCAL

const (
	errBufLen  = 1024
	pathBufLen = 4096
)

// Library is a shared library that is opened lazily, at its first use, by
// its soname or by the path in its environment variable. Create one with
// [NewLibrary]; the zero value is not usable. A Library is safe for
// concurrent use.
type Library struct {
	name   string
	soname string
	envVar string

	once   sync.Once
	loaded atomic.Bool
	handle unsafe.Pointer // dlopen handle; set by once, never closed
	path   string         // resolved path of the opened file
	err    *LibraryError  // set by once when opening failed
}

// NewLibrary returns a Library called name (a short label used in error
// messages, such as "cublas") that will be opened with dlopen(soname), or
// with the value of the environment variable envVar when that is set and not
// empty. envVar may be "" for no override. NewLibrary opens nothing and
// touches no file: the library is opened at its first use.
func NewLibrary(name, soname, envVar string) *Library {
	return &Library{name: name, soname: soname, envVar: envVar}
}

// Name returns the library's short name, such as "cublas".
func (l *Library) Name() string { return l.name }

// Soname returns the name passed to dlopen when no environment override is
// set, such as "libcublas.so.13".
func (l *Library) Soname() string { return l.soname }

// EnvVar returns the name of the environment variable that overrides the
// soname, such as "GOCUDA_CUBLAS_LIB", or "" if there is none.
func (l *Library) EnvVar() string { return l.envVar }

// Open opens the library if that has not been tried yet and reports the
// outcome: nil, or the library's [*LibraryError]. The attempt is made once;
// later calls return the cached outcome (the same error value).
func (l *Library) Open() error {
	if err := l.open(); err != nil {
		return err
	}
	return nil
}

// Loaded reports whether the library has been opened successfully. It never
// opens the library itself.
func (l *Library) Loaded() bool { return l.loaded.Load() }

// Path returns the path of the opened library file, with symbolic links
// resolved (for example "/usr/lib/x86_64-linux-gnu/libcublas.so.13.0.0.19"),
// opening the library first if needed. If the library cannot be opened it
// returns "" and the library's [*LibraryError]. If the dynamic linker does
// not report a path, Path returns the name that was passed to dlopen.
func (l *Library) Path() (string, error) {
	if err := l.open(); err != nil {
		return "", err
	}
	return l.path, nil
}

// open runs the one open attempt and returns its cached outcome.
func (l *Library) open() *LibraryError {
	l.once.Do(l.doOpen)
	return l.err
}

func (l *Library) doOpen() {
	tried, fromEnv := l.soname, false
	if l.envVar != "" {
		if v := os.Getenv(l.envVar); v != "" {
			tried, fromEnv = v, true
		}
	}
	fail := func(msg string) {
		l.err = &LibraryError{
			Library: l.name,
			Soname:  l.soname,
			Env:     l.envVar,
			Tried:   tried,
			FromEnv: fromEnv,
			Err:     msg,
		}
	}
	if tried == "" {
		// dlopen("") would return the main program's handle.
		fail("empty library name")
		return
	}
	if strings.IndexByte(tried, 0) >= 0 {
		// C would see only the part before the NUL: another file.
		fail("the name contains a NUL byte")
		return
	}
	if msg := notLoadable(tried); msg != "" {
		fail(msg)
		return
	}
	cname := C.CString(tried)
	defer C.free(unsafe.Pointer(cname))
	var errBuf [errBufLen]C.char
	h := C.gocuda_dl_open(cname, dlopenFlags, &errBuf[0], errBufLen)
	if h == nil {
		fail(C.GoString(&errBuf[0]))
		return
	}
	l.handle = h
	l.path = tried
	var pathBuf [pathBufLen]C.char
	if C.gocuda_dl_path(h, &pathBuf[0], pathBufLen) == 0 {
		l.path = C.GoString(&pathBuf[0])
	}
	l.loaded.Store(true)
}

// NewProc returns a Proc for the function called symbol in the library. It
// resolves nothing: the symbol is looked up at the Proc's first use.
func (l *Library) NewProc(symbol string) *Proc {
	return &Proc{lib: l, name: symbol}
}

// Proc is a function exported by a [Library], resolved lazily with dlsym.
// Create one with [Library.NewProc]. A Proc is safe for concurrent use.
type Proc struct {
	lib  *Library
	name string

	addr atomic.Uintptr // non-zero once resolved successfully
	once sync.Once
	err  error // *LibraryError or *SymbolError, set by once on failure
}

// Name returns the symbol name the Proc resolves, such as "cublasSgemm_v2".
func (p *Proc) Name() string { return p.name }

// Library returns the Library the Proc belongs to.
func (p *Proc) Library() *Library { return p.lib }

// Addr returns the address of the function, opening the library and
// resolving the symbol on first use. Once the symbol has resolved, Addr is a
// single atomic load and comparison, with no lock and no allocation. On
// failure it returns 0 and the cached error: the library's [*LibraryError]
// if the library could not be opened, or a [*SymbolError] if it lacks the
// symbol; every call returns the same error value.
func (p *Proc) Addr() (addr uintptr, err error) {
	// Written so that Addr stays within the compiler's inlining budget.
	addr = p.addr.Load()
	if addr == 0 {
		addr, err = p.addrSlow()
	}
	return
}

// Find resolves the symbol without calling it and returns the error Addr
// would return, or nil.
func (p *Proc) Find() error {
	_, err := p.Addr()
	return err
}

// addrSlow is kept out of line so that Addr can be inlined.
//
//go:noinline
func (p *Proc) addrSlow() (uintptr, error) {
	p.once.Do(p.resolve)
	if p.err != nil {
		return 0, p.err
	}
	return p.addr.Load(), nil
}

func (p *Proc) resolve() {
	l := p.lib
	if lerr := l.open(); lerr != nil {
		p.err = lerr
		return
	}
	if strings.IndexByte(p.name, 0) >= 0 {
		// dlsym would look up the part before the NUL: another symbol.
		p.err = &SymbolError{Library: l.name, Soname: l.soname, Path: l.path, Symbol: p.name,
			Err: "the symbol name contains a NUL byte", Reason: "not a valid symbol name"}
		return
	}
	csym := C.CString(p.name)
	defer C.free(unsafe.Pointer(csym))
	var errBuf [errBufLen]C.char
	a := C.gocuda_dl_sym(l.handle, csym, &errBuf[0], errBufLen)
	if a == nil {
		p.err = &SymbolError{
			Library: l.name,
			Soname:  l.soname,
			Path:    l.path,
			Symbol:  p.name,
			Err:     C.GoString(&errBuf[0]),
			Reason:  l.missingReason(),
		}
		return
	}
	p.addr.Store(uintptr(a))
}

// notLoadable returns why a path (a name with a slash, which dlopen opens as is)
// cannot be a shared library, or "" to let dlopen decide. dlopen reads whatever it
// is given: a FIFO or a character device would block it forever.
func notLoadable(name string) string {
	if !strings.ContainsRune(name, '/') {
		return "" // searched for by the dynamic linker
	}
	fi, err := os.Stat(name)
	if err != nil {
		return "" // dlopen reports a missing file in its own words
	}
	if m := fi.Mode(); !m.IsRegular() {
		what := "not a regular file"
		switch {
		case m&os.ModeNamedPipe != 0:
			what = "a named pipe (FIFO), not a shared library"
		case m.IsDir():
			what = "a directory, not a shared library"
		case m&os.ModeDevice != 0:
			what = "a device, not a shared library"
		case m&os.ModeSocket != 0:
			what = "a socket, not a shared library"
		}
		return name + " is " + what
	}
	return ""
}

// missingReason explains a symbol missing from the opened library: the file is
// another library than the one meant (its ELF soname has another stem: libm.so.6
// given as libcuda), or an older release of the right one.
func (l *Library) missingReason() string {
	const older = "the library is older than the headers gocuda was generated from"
	f, err := elf.Open(l.path)
	if err != nil {
		return older
	}
	defer f.Close()
	names, err := f.DynString(elf.DT_SONAME)
	if err != nil || len(names) == 0 || names[0] == "" {
		return older
	}
	got, want := names[0], l.soname
	if soStem(got) == soStem(want) {
		return older
	}
	msg := "the file is " + got + ", not " + soStem(want) + ".so: another library"
	if l.envVar != "" {
		msg += " (check " + l.envVar + ")"
	}
	return msg
}

// soStem returns a library name without directory and version: libcuda.so.1 and
// /usr/lib/libcuda.so.580.1 give libcuda.
func soStem(name string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	if i := strings.Index(name, ".so"); i >= 0 {
		name = name[:i]
	}
	return name
}
