// Package kernel makes GPU operations from a line of CUDA C: elementwise kernels
// (Elementwise: an expression applied to each element of typed inputs and outputs,
// with scalars broadcast) and reductions (Reduction: a map, a combine and an
// identity, over all elements or along the rows of a matrix), in the spirit of
// CuPy's ElementwiseKernel and ReductionKernel.
//
// The element types are Go types, given as type parameters (In[float32]("x")); the
// package writes the kernel's CUDA C around the expression, compiles it with NVRTC
// once per source and device architecture, and launches it with the cuda package, so
// that its memory takes part in the hand-off like any launch (inputs are read, with
// cuda.In, outputs written).
//
// Compiled kernels are cached in memory and on disk (Cache): the key is the source,
// the compile options, the device's architecture, and the driver's and NVRTC's
// versions; an entry that does not match its checksum is compiled again, never used.
// DefaultCache is the process default: GOCUDA_KERNEL_CACHE names its directory ("off":
// memory only; default: the user's cache directory, gocuda/kernels), and
// GOCUDA_KERNEL_CACHE_SIZE its size limit in bytes (default 256 MiB), past which the
// least recently used entries go.
//
// An Elementwise or Reduction is safe for concurrent use. It loads its module once per
// context, on first use there; Close unloads them (a dropped one is released by the
// cuda package's modules' own fallback).
package kernel
