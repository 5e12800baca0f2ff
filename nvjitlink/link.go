package nvjitlink

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"unsafe"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/nvjitlink/nvjitlinkraw"
)

// Kind is the kind of a link input: nvJitLinkInputType.
type Kind int32

// The kinds of input nvJitLink links.
const (
	CUBIN   = Kind(nvjitlinkraw.NVJITLINK_INPUT_CUBIN)   // a cubin (ELF), relocatable or not
	PTX     = Kind(nvjitlinkraw.NVJITLINK_INPUT_PTX)     // PTX text (NVRTC's Output.PTX)
	LTOIR   = Kind(nvjitlinkraw.NVJITLINK_INPUT_LTOIR)   // LTO-IR (NVRTC's Output.LTOIR, compiled with Options.LTO)
	Fatbin  = Kind(nvjitlinkraw.NVJITLINK_INPUT_FATBIN)  // a fat binary of cubins, PTX or LTO-IR
	Object  = Kind(nvjitlinkraw.NVJITLINK_INPUT_OBJECT)  // a host object file holding device code (nvcc -rdc -c)
	Library = Kind(nvjitlinkraw.NVJITLINK_INPUT_LIBRARY) // a host static library (.a) of such objects
	Index   = Kind(nvjitlinkraw.NVJITLINK_INPUT_INDEX)   // an index file of a library
	Any     = Kind(nvjitlinkraw.NVJITLINK_INPUT_ANY)     // nvJitLink tells the kind from the data
)

// String returns the kind's name ("LTOIR"), or Kind(N) for a value that names none.
func (k Kind) String() string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return fmt.Sprintf("Kind(%d)", int32(k))
}

var kindNames = map[Kind]string{
	CUBIN: "CUBIN", PTX: "PTX", LTOIR: "LTOIR", Fatbin: "Fatbin", Object: "Object",
	Library: "Library", Index: "Index", Any: "Any",
}

// Input is one object to link: its kind, a name for the linker's messages, and its
// bytes. Link reads Data while it runs and keeps none of it.
type Input struct {
	Kind Kind
	// Name names the input in the log ("add.cu"); empty: "input<N>", its place in
	// Link's arguments.
	Name string
	Data []byte
}

// Options configure Link.
type Options struct {
	// Arch is the real architecture to link for ("sm_90", "sm_90a"): the linked
	// cubin's. Empty: the architecture of Context's device, sm_XY of its compute
	// capability; one of them is required.
	Arch string
	// Context, when Arch is empty, selects the architecture of the context's device.
	Context *cuda.Context
	// Flags are further nvJitLink options passed as they are, such as "-O3",
	// "-lineinfo" or "-kernels-used=name". The architecture is set by Arch only (a
	// -arch flag is an error), and Link adds -lto where an input is LTO-IR. Link
	// makes a cubin: -ptx is an error.
	Flags []string
}

// Output is what Link produced.
type Output struct {
	// Arch is the architecture it was linked for ("sm_90").
	Arch string
	// CUBIN is the linked cubin (an ELF image), for cuda.Context.LoadModule.
	CUBIN []byte
	// Log is nvJitLink's info log of a successful link: warnings and, with -verbose
	// or -time, what it did; or empty.
	Log string
}

// Load loads the linked cubin into ctx: ctx.LoadModule(o.CUBIN).
func (o *Output) Load(ctx *cuda.Context) (*cuda.Module, error) {
	return ctx.LoadModule(o.CUBIN)
}

// LinkError is the error of a link that nvJitLink fails: an input it rejects
// (Input names it) or a link that does not complete (an undefined symbol, an
// architecture mismatch, LTO-IR or PTX that does not compile). It carries
// nvJitLink's error log and unwraps to the nvJitLink status (such as
// nvjitlinkraw.ErrNvvmCompile, ErrPtxCompile or ErrArchMismatch).
type LinkError struct {
	Input string // the name of the input nvJitLink rejected; empty when the link failed
	Log   string // nvJitLink's error log
	Err   error  // the status nvJitLink returned
}

// Error returns the status and the log.
func (e *LinkError) Error() string {
	msg := fmt.Sprintf("nvjitlink: linking: %v", e.Err)
	if e.Input != "" {
		msg = fmt.Sprintf("nvjitlink: adding %s: %v", e.Input, e.Err)
	}
	if e.Log != "" {
		msg += "\n" + e.Log
	}
	return msg
}

// Unwrap returns the nvJitLink status, for errors.Is(err, nvjitlinkraw.ErrNvvmCompile).
func (e *LinkError) Unwrap() error { return e.Err }

// linkArch is what Options.Arch accepts: a real architecture, with the a
// (architecture-specific) or f (family) suffix.
var linkArch = regexp.MustCompile(`^sm_[0-9]+[af]?$`)

// Link links inputs (LTO-IR, PTX, cubins, fat binaries, host objects and libraries
// holding device code) into one cubin for o's architecture, which cuda.Module loads
// (Output.Load). An extern __device__ function or variable of one input resolves to
// its definition in another; LTO-IR inputs are optimized together (-lto). A link
// nvJitLink fails gives a *LinkError with its log. Arguments are checked before
// nvJitLink is loaded: no inputs, an input without data, of no known kind or with a
// NUL byte in its name, a flag with a NUL byte, a -arch or -ptx flag, a malformed
// Arch, and neither Arch nor Context are errors matching cuda.ErrInvalidArgument.
// Link runs on the host: it needs no GPU (a context only to select the
// architecture), keeps nothing open when it returns, and is safe for concurrent use.
func Link(o Options, inputs ...Input) (*Output, error) {
	if err := o.check(inputs); err != nil {
		return nil, err
	}
	arch := o.Arch
	if arch == "" {
		major, minor, err := o.Context.Device().ComputeCapability()
		if err != nil {
			return nil, fmt.Errorf("nvjitlink: linking: the device's architecture: %w", err)
		}
		arch = fmt.Sprintf("sm_%d%d", major, minor)
	}
	out, err := link(arch, o.Flags, inputs)
	if err != nil {
		var le *LinkError
		if errors.As(err, &le) {
			return nil, err
		}
		return nil, fmt.Errorf("nvjitlink: linking: %w", err)
	}
	return out, nil
}

// check rejects what nvJitLink cannot be given, or Link does not offer.
func (o *Options) check(inputs []Input) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("nvjitlink: linking: %w: %s", cuda.ErrInvalidArgument, fmt.Sprintf(format, args...))
	}
	if len(inputs) == 0 {
		return bad("no inputs")
	}
	for i, in := range inputs {
		if _, ok := kindNames[in.Kind]; !ok {
			return bad("input %d (%q): kind %v", i, in.Name, in.Kind)
		}
		if len(in.Data) == 0 {
			return bad("input %d (%q): no data", i, in.Name)
		}
		if strings.IndexByte(in.Name, 0) >= 0 {
			return bad("input %d: its name %q holds a NUL byte", i, in.Name)
		}
	}
	for _, f := range o.Flags {
		switch {
		case strings.IndexByte(f, 0) >= 0:
			return bad("flag %q holds a NUL byte", f)
		case f == "-arch" || strings.HasPrefix(f, "-arch="):
			return bad("flag %q: set the architecture with Options.Arch", f)
		case f == "-ptx":
			return bad("flag %q: Link makes a cubin", f)
		}
	}
	switch {
	case o.Arch != "" && !linkArch.MatchString(o.Arch):
		return bad("architecture %q (want sm_XY)", o.Arch)
	case o.Arch == "" && o.Context == nil:
		return bad("no architecture: set Options.Arch or Options.Context")
	}
	return nil
}

// link creates the link, adds the inputs, completes it, reads the cubin and the
// info log, and destroys it.
func link(arch string, flags []string, inputs []Input) (out *Output, err error) {
	// nvJitLink takes Go memory: C strings, the array of options and the inputs,
	// pinned until the handle is destroyed, since it may keep pointers to them.
	var pin runtime.Pinner
	defer pin.Unpin()
	cstr := func(s string) *byte {
		b := append([]byte(s), 0)
		pin.Pin(&b[0])
		return &b[0]
	}
	opts := []*byte{cstr("-arch=" + arch)}
	for _, f := range flags {
		opts = append(opts, cstr(f))
	}
	if !slices.Contains(flags, "-lto") && slices.ContainsFunc(inputs, func(in Input) bool { return in.Kind == LTOIR }) {
		opts = append(opts, cstr("-lto"))
	}
	var h nvjitlinkraw.NvJitLinkHandle
	cerr := nvjitlinkraw.Create(&h, cudaraw.Cuuint32(len(opts)), &opts[0])
	if h != 0 {
		// Host memory only: nvJitLink makes no GPU work, so the release cannot wait for it.
		defer func() {
			if derr := nvjitlinkraw.Destroy(&h); derr != nil && err == nil {
				out, err = nil, fmt.Errorf("destroying the link: %w", derr)
			}
		}()
	}
	if cerr != nil {
		var st nvjitlinkraw.Result
		if !errors.As(cerr, &st) { // the library or its symbol is missing
			return nil, fmt.Errorf("creating the link: %w", cerr)
		}
		// An option nvJitLink rejects (an unknown flag, an architecture it lacks).
		return nil, &LinkError{Log: errorLog(h), Err: cerr}
	}
	for i, in := range inputs {
		name := in.Name
		if name == "" {
			name = fmt.Sprintf("input%d", i)
		}
		pin.Pin(&in.Data[0])
		if err := nvjitlinkraw.AddData(h, nvjitlinkraw.NvJitLinkInputType(in.Kind), unsafe.Pointer(&in.Data[0]), uint64(len(in.Data)), cstr(name)); err != nil {
			return nil, &LinkError{Input: name, Log: errorLog(h), Err: err}
		}
	}
	if err := nvjitlinkraw.Complete(h); err != nil {
		return nil, &LinkError{Log: errorLog(h), Err: err}
	}
	out = &Output{Arch: arch}
	if out.CUBIN, err = read(h, nvjitlinkraw.GetLinkedCubinSize, func(h nvjitlinkraw.NvJitLinkHandle, p *byte) error {
		return nvjitlinkraw.GetLinkedCubin(h, unsafe.Pointer(p))
	}); err != nil {
		return nil, fmt.Errorf("reading the cubin: %w", err)
	}
	info, err := read(h, nvjitlinkraw.GetInfoLogSize, nvjitlinkraw.GetInfoLog)
	if err != nil {
		return nil, fmt.Errorf("reading the info log: %w", err)
	}
	out.Log = logText(info)
	return out, nil
}

// errorLog returns the link's error log, or what reading it failed with: the log is
// what the caller of a failed link needs, the error it reports is the link's.
func errorLog(h nvjitlinkraw.NvJitLinkHandle) string {
	if h == 0 {
		return ""
	}
	b, err := read(h, nvjitlinkraw.GetErrorLogSize, nvjitlinkraw.GetErrorLog)
	if err != nil {
		return fmt.Sprintf("(reading the error log: %v)", err)
	}
	return logText(b)
}

// logText is a log without the NUL that ends it and its blank lines.
func logText(b []byte) string {
	return strings.TrimSpace(string(bytes.TrimRight(b, "\x00")))
}

// read returns one of the link's outputs (cubin, log): its size, then its bytes.
func read(h nvjitlinkraw.NvJitLinkHandle, size func(nvjitlinkraw.NvJitLinkHandle, *uint64) error, get func(nvjitlinkraw.NvJitLinkHandle, *byte) error) ([]byte, error) {
	var n uint64
	if err := size(h, &n); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, nil
	}
	b := make([]byte, n)
	if err := get(h, &b[0]); err != nil {
		return nil, err
	}
	return b, nil
}

// Version returns the version of the loaded nvJitLink: nvJitLinkVersion.
func Version() (major, minor int, err error) {
	var ma, mi uint32
	if err := nvjitlinkraw.Version(&ma, &mi); err != nil {
		return 0, 0, fmt.Errorf("nvjitlink: version: %w", err)
	}
	return int(ma), int(mi), nil
}
