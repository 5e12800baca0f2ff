package nvrtc

/*
#include <stdlib.h>
*/
import "C"

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unsafe"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/nvrtc/nvrtcraw"
)

// Options configure Compile. The zero value compiles to PTX for NVRTC's default
// virtual architecture.
type Options struct {
	// Arch is the target architecture: "sm_90" gives PTX and a cubin for that GPU,
	// "compute_90" PTX only (the driver compiles it for the device when the module
	// is loaded). Empty: the architecture of Context's device (see DeviceArch), or
	// NVRTC's default (PTX only) without a Context.
	Arch string
	// Context, when Arch is empty, selects the architecture of the context's device.
	Context *cuda.Context
	// Headers are sources that the program includes by name, in place of files.
	Headers []Header
	// NameExpressions are C++ expressions naming kernels or __device__ variables
	// ("scale<float>", "&table"): Output.LoweredNames maps each to the mangled name
	// that cuda.Module.Function and Global take.
	NameExpressions []string
	// LTO compiles to LTO-IR (NVRTC's -dlto) instead of PTX and a cubin: the
	// Output's LTOIR, to be linked with other objects by package nvjitlink, where
	// extern __device__ functions of one program resolve to another's and are
	// optimized across them. Arch is then the architecture of the link.
	LTO bool
	// Flags are further options passed to nvrtcCompileProgram as they are, such as
	// "-std=c++17", "-lineinfo", "-DN=4", "-rdc=true" or "-I/path". The architecture
	// is set by Arch only and LTO-IR by LTO only: a -arch or -dlto flag here is an
	// error. The toolkit's include directories (ToolkitInclude) follow them, so
	// <cuda_fp16.h> and <cooperative_groups.h> are found.
	Flags []string
}

// Header is a source file that the program includes: #include "Name" reads Source.
type Header struct {
	Name, Source string
}

// Output is what Compile produced.
type Output struct {
	// Arch is the -arch option it was compiled with ("" for NVRTC's default).
	Arch string
	// PTX is the PTX text, without a trailing NUL.
	PTX []byte
	// CUBIN is the cubin (an ELF image) when Arch is a real architecture (sm_XY);
	// nil otherwise.
	CUBIN []byte
	// LTOIR is the LTO-IR of a program compiled with Options.LTO (then PTX and CUBIN
	// are nil): an input of nvjitlink.Link, not an image the driver loads.
	LTOIR []byte
	// Log is NVRTC's log of a successful compilation: warnings, or empty.
	Log string
	// LoweredNames maps each of Options.NameExpressions to its lowered (mangled) name.
	LoweredNames map[string]string
}

// CompileError is the error of a program that NVRTC fails to compile: it carries
// the program's name and NVRTC's log (the compiler's messages) and unwraps to the
// NVRTC status, usually ErrCompilation (ErrInvalidOption for a bad flag).
type CompileError struct {
	Name string // the program's name given to Compile
	Log  string // NVRTC's program log
	Err  error  // the status nvrtcCompileProgram returned
}

// Error returns the status and the log.
func (e *CompileError) Error() string {
	msg := fmt.Sprintf("nvrtc: compiling %s: %v", e.Name, e.Err)
	if e.Log != "" {
		msg += "\n" + e.Log
	}
	return msg
}

// Unwrap returns the NVRTC status, for errors.Is(err, nvrtc.ErrCompilation).
func (e *CompileError) Unwrap() error { return e.Err }

// ErrUnsupportedArch is returned by DeviceArch (and Compile with a Context) for a
// device older than every architecture the loaded NVRTC compiles for.
var ErrUnsupportedArch = errors.New("nvrtc: the device's architecture is not supported")

// Image returns the image to load with cuda.Context.LoadModule: the cubin when there
// is one, else the PTX; nil for LTO-IR, which is linked first (package nvjitlink).
func (o *Output) Image() []byte {
	if len(o.CUBIN) > 0 {
		return o.CUBIN
	}
	return o.PTX
}

// Load loads the output into ctx: ctx.LoadModule(o.Image()).
func (o *Output) Load(ctx *cuda.Context) (*cuda.Module, error) {
	return ctx.LoadModule(o.Image())
}

// Function returns the kernel of mod (loaded from o) that expr names: through its
// lowered name when expr is one of the name expressions, else expr is the kernel's
// name as it is (an extern "C" kernel).
func (o *Output) Function(mod *cuda.Module, expr string) (*cuda.Function, error) {
	if n, ok := o.LoweredNames[expr]; ok {
		return mod.Function(n)
	}
	return mod.Function(expr)
}

// archPattern is what Options.Arch accepts: a real (sm_) or virtual (compute_)
// architecture, with the a (architecture-specific) or f (family) suffix.
var archPattern = regexp.MustCompile(`^(sm|compute)_[0-9]+[af]?$`)

// Compile compiles the CUDA C++ source src, named name in messages, with NVRTC. The
// program is destroyed before Compile returns. A source that does not compile gives
// a *CompileError with NVRTC's log. Arguments are checked before NVRTC is loaded:
// strings with a NUL byte, a malformed Arch and a -arch flag are errors matching
// cuda.ErrInvalidArgument. Compile runs on the host: it needs no GPU, and no context
// but to select the architecture. It is safe for concurrent use.
func Compile(src, name string, o Options) (*Output, error) {
	if err := o.check(src, name); err != nil {
		return nil, err
	}
	arch := o.Arch
	if arch == "" && o.Context != nil {
		var err error
		if arch, err = DeviceArch(o.Context.Device()); err != nil {
			return nil, fmt.Errorf("nvrtc: compiling %s: %w", name, err)
		}
	}
	out, err := compile(src, name, arch, o)
	if err != nil {
		var ce *CompileError
		if errors.As(err, &ce) {
			return nil, err
		}
		return nil, fmt.Errorf("nvrtc: compiling %s: %w", name, err)
	}
	return out, nil
}

// check rejects what NVRTC cannot be given: C strings end at a NUL byte.
func (o *Options) check(src, name string) error {
	bad := func(what string) error {
		return fmt.Errorf("nvrtc: compiling %s: %w: %s holds a NUL byte", name, cuda.ErrInvalidArgument, what)
	}
	if strings.IndexByte(src, 0) >= 0 {
		return bad("the source")
	}
	if strings.IndexByte(name, 0) >= 0 {
		return bad("the name")
	}
	for _, h := range o.Headers {
		if h.Name == "" || strings.IndexByte(h.Name, 0) >= 0 || strings.IndexByte(h.Source, 0) >= 0 {
			return fmt.Errorf("nvrtc: compiling %s: %w: header %q: empty name or a NUL byte", name, cuda.ErrInvalidArgument, h.Name)
		}
	}
	for _, e := range o.NameExpressions {
		if e == "" || strings.IndexByte(e, 0) >= 0 {
			return fmt.Errorf("nvrtc: compiling %s: %w: name expression %q: empty or a NUL byte", name, cuda.ErrInvalidArgument, e)
		}
	}
	for _, f := range o.Flags {
		if strings.IndexByte(f, 0) >= 0 {
			return bad(fmt.Sprintf("flag %q", f))
		}
		if isArchFlag(f) {
			return fmt.Errorf("nvrtc: compiling %s: %w: flag %q: set the architecture with Options.Arch", name, cuda.ErrInvalidArgument, f)
		}
		if f == "-dlto" || f == "--dlink-time-opt" {
			return fmt.Errorf("nvrtc: compiling %s: %w: flag %q: ask for LTO-IR with Options.LTO", name, cuda.ErrInvalidArgument, f)
		}
	}
	if o.Arch != "" && !archPattern.MatchString(o.Arch) {
		return fmt.Errorf("nvrtc: compiling %s: %w: architecture %q (want sm_XY or compute_XY)", name, cuda.ErrInvalidArgument, o.Arch)
	}
	return nil
}

// isArchFlag reports whether f is NVRTC's architecture option in any of its spellings.
func isArchFlag(f string) bool {
	for _, p := range []string{"-arch", "--gpu-architecture"} {
		if f == p || strings.HasPrefix(f, p+"=") {
			return true
		}
	}
	return false
}

// cstrings is C memory that a compilation passes to NVRTC: Go memory holding
// pointers cannot be passed to C, and NVRTC takes arrays of strings.
type cstrings struct{ ptrs []unsafe.Pointer }

// str returns s as a C string, freed by free.
func (c *cstrings) str(s string) *byte {
	p := unsafe.Pointer(C.CString(s))
	c.ptrs = append(c.ptrs, p)
	return (*byte)(p)
}

// array returns the C strings of ss as a C array (nil when ss is empty).
func (c *cstrings) array(ss []string) **byte {
	if len(ss) == 0 {
		return nil
	}
	// cgo's C.malloc never returns nil: out of memory, it fails as Go's allocator does.
	p := C.malloc(C.size_t(len(ss)) * C.size_t(unsafe.Sizeof(uintptr(0))))
	c.ptrs = append(c.ptrs, p)
	a := unsafe.Slice((**byte)(p), len(ss))
	for i, s := range ss {
		a[i] = c.str(s)
	}
	return (**byte)(p)
}

func (c *cstrings) free() {
	for _, p := range c.ptrs {
		C.free(p)
	}
}

// compile creates, compiles, reads and destroys one program.
func compile(src, name, arch string, o Options) (out *Output, err error) {
	var cs cstrings
	defer cs.free()
	names := make([]string, len(o.Headers))
	sources := make([]string, len(o.Headers))
	for i, h := range o.Headers {
		names[i], sources[i] = h.Name, h.Source
	}
	var prog nvrtcraw.NvrtcProgram
	if err := nvrtcraw.CreateProgram(&prog, cs.str(src), cs.str(name), int32(len(o.Headers)), cs.array(sources), cs.array(names)); err != nil {
		return nil, fmt.Errorf("creating the program: %w", err)
	}
	// Host memory only: NVRTC never touches the GPU, so the release cannot wait for it.
	defer func() {
		if derr := nvrtcraw.DestroyProgram(&prog); derr != nil && err == nil {
			out, err = nil, fmt.Errorf("destroying the program: %w", derr)
		}
	}()
	exprs := make([]*byte, len(o.NameExpressions))
	for i, e := range o.NameExpressions {
		exprs[i] = cs.str(e)
		if err := nvrtcraw.AddNameExpression(prog, exprs[i]); err != nil {
			return nil, fmt.Errorf("name expression %q: %w", e, err)
		}
	}
	opts := append([]string(nil), o.Flags...)
	for _, dir := range toolkitInclude() {
		opts = append(opts, "-I"+dir)
	}
	if arch != "" {
		opts = append(opts, "-arch="+arch)
	}
	if o.LTO {
		opts = append(opts, "-dlto")
	}
	cerr := nvrtcraw.CompileProgram(prog, int32(len(opts)), cs.array(opts))
	log, lerr := programLog(prog)
	if cerr != nil {
		// The log is what the caller needs; a failure to read it is secondary.
		if lerr != nil {
			cerr = errors.Join(cerr, fmt.Errorf("reading the log: %w", lerr))
		}
		return nil, &CompileError{Name: name, Log: log, Err: cerr}
	}
	if lerr != nil {
		return nil, fmt.Errorf("reading the log: %w", lerr)
	}
	out = &Output{Arch: arch, Log: log}
	if o.LTO {
		// -dlto makes LTO-IR only: there is no PTX or cubin to read.
		if out.LTOIR, err = read(prog, false, nvrtcraw.GetLTOIRSize, nvrtcraw.GetLTOIR); err != nil {
			return nil, fmt.Errorf("reading the LTO-IR: %w", err)
		}
	} else if out.PTX, err = read(prog, true, nvrtcraw.GetPTXSize, nvrtcraw.GetPTX); err != nil {
		return nil, fmt.Errorf("reading the PTX: %w", err)
	}
	if strings.HasPrefix(arch, "sm_") && !o.LTO {
		if out.CUBIN, err = read(prog, false, nvrtcraw.GetCUBINSize, nvrtcraw.GetCUBIN); err != nil {
			return nil, fmt.Errorf("reading the cubin: %w", err)
		}
	}
	if len(exprs) > 0 {
		out.LoweredNames = make(map[string]string, len(exprs))
	}
	for i, e := range o.NameExpressions {
		var lowered *byte // into the program's memory: copied before it is destroyed
		if err := nvrtcraw.GetLoweredName(prog, exprs[i], &lowered); err != nil {
			return nil, fmt.Errorf("lowered name of %q: %w", e, err)
		}
		out.LoweredNames[e] = C.GoString((*C.char)(unsafe.Pointer(lowered)))
	}
	return out, nil
}

// programLog returns the program's log without its trailing NUL and blank lines.
func programLog(prog nvrtcraw.NvrtcProgram) (string, error) {
	b, err := read(prog, true, nvrtcraw.GetProgramLogSize, nvrtcraw.GetProgramLog)
	return strings.TrimSpace(string(b)), err
}

// read returns one of the program's outputs (PTX, cubin, log): its size, then its
// bytes; text (PTX, log) without the NUL that ends it.
func read(prog nvrtcraw.NvrtcProgram, text bool, size func(nvrtcraw.NvrtcProgram, *uint64) error, get func(nvrtcraw.NvrtcProgram, *byte) error) ([]byte, error) {
	var n uint64
	if err := size(prog, &n); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, nil
	}
	b := make([]byte, n)
	if err := get(prog, &b[0]); err != nil {
		return nil, err
	}
	if text {
		b = bytes.TrimRight(b, "\x00")
	}
	return b, nil
}
