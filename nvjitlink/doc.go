// Package nvjitlink binds nvJitLink (the JIT linker of device code) for Go: objects
// compiled apart — LTO-IR and PTX from NVRTC, cubins, fat binaries, host objects and
// libraries holding device code — linked at run time into one cubin, loaded with
// cuda.Context.LoadModule.
//
// # The idiomatic API
//
//	a, err := nvrtc.Compile(kernelSrc, "kernel.cu", nvrtc.Options{Context: ctx, LTO: true})
//	b, err := nvrtc.Compile(deviceSrc, "device.cu", nvrtc.Options{Context: ctx, LTO: true})
//	out, err := nvjitlink.Link(nvjitlink.Options{Context: ctx},
//		nvjitlink.Input{Kind: nvjitlink.LTOIR, Name: "kernel.cu", Data: a.LTOIR},
//		nvjitlink.Input{Kind: nvjitlink.LTOIR, Name: "device.cu", Data: b.LTOIR})
//	mod, err := out.Load(ctx)                 // the linked cubin
//	k, err := mod.Function("saxpy")           // an extern "C" kernel, or a lowered name
//
// Link creates a link for the architecture of Options.Arch, or sm_XY of the device
// of Options.Context, adds the inputs (with -lto where one is LTO-IR: an extern
// __device__ function of one unit is then inlined and optimized into the kernels of
// another), completes it, reads the cubin and the info log, and destroys it before
// it returns: there is nothing to close. A link that fails (an undefined symbol, an
// input of another architecture) returns a *LinkError carrying nvJitLink's error
// log, which unwraps to the nvJitLink status; a source that does not compile is
// nvrtc's *CompileError before that. nvJitLink runs on the host: Link needs no GPU
// (a context only to select the architecture) and is safe for concurrent use.
//
// # The raw layer
//
// Package nvjitlinkraw binds every function of nvJitLink.h, with C names, for what
// this package does not cover (inputs read from files, linked PTX).
// libnvJitLink.so.13 is opened at first use ($GOCUDA_NVJITLINK_LIB overrides it);
// without it, calls return a *dl.LibraryError naming the library, its soname and the
// variable, and a function the installed library lacks returns a *dl.SymbolError
// naming the symbol.
package nvjitlink
