// Package nvrtc binds NVRTC (the runtime compiler of CUDA C++) for Go: kernels
// compiled from source at run time, loaded with cuda.Context.LoadModule.
//
// # The idiomatic API
//
//	out, err := nvrtc.Compile(src, "scale.cu", nvrtc.Options{
//		Context:         ctx,                      // -arch=sm_XY of ctx's device
//		NameExpressions: []string{"scale<float>"}, // templated kernels, found by expression
//	})
//	mod, err := out.Load(ctx)                      // the cubin (or the PTX)
//	k, err := out.Function(mod, "scale<float>")    // through its lowered (mangled) name
//
// Compile creates an NVRTC program, compiles it, reads its PTX, its cubin (when the
// architecture is a real one, sm_XY), its log and the lowered names of its name
// expressions, and destroys it before it returns: there is nothing to close. A
// source that does not compile returns a *CompileError carrying NVRTC's log, which
// unwraps to ErrCompilation. The architecture is Options.Arch, or the one
// DeviceArch selects for the device of Options.Context (sm_XY for its compute
// capability, compute_XY PTX for a device newer than NVRTC). NVRTC runs on the
// host: Compile needs no GPU (a context only to select the architecture) and is
// safe for concurrent use.
//
// With Options.LTO, Compile makes LTO-IR (NVRTC's -dlto) instead of PTX and a cubin:
// Output.LTOIR, which package nvjitlink links with other units (an extern __device__
// function defined in one, called in another) into a cubin.
//
// # The raw layer
//
// Package nvrtcraw binds every function of NVRTC's headers, with C names, for what this
// package does not cover; queue its calls with cuda.Enqueue, which orders them with
// the memory's other uses. libnvrtc.so.13 is opened at first use ($GOCUDA_NVRTC_LIB overrides it);
// without it, calls return a *dl.LibraryError, and a function the installed library
// lacks returns a *dl.SymbolError.
package nvrtc
