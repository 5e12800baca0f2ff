// Package cudnn binds cuDNN 9 (deep learning primitives on the GPU) for Go.
//
// # The idiomatic API
//
// Typed operations on the cuda package's memory, queued on a cuda.Stream, with
// shapes and parameters as plain Go values:
//
//	Convolve[T]                 y = alpha·conv(x, w) + beta·y   (2-D, NCHW, algorithm chosen and cached)
//	ConvolutionOutputShape      the shape of y
//	AddBias[T]                  y = alpha·bias + beta·y         (one bias per channel)
//	Activate[T]                 y = alpha·f(x) + beta·y         (Sigmoid, ReLU, Tanh, ClippedReLU, ELU)
//	Softmax[T]                  y = alpha·softmax(x) + beta·y   (accurate or log, per image or per pixel)
//
// T is float32 or float64; memory is any cuda.Memory (device buffers and their
// views), of element type T if it has one. Tensor4D is a packed NCHW shape, Filter a
// packed KCRS one, Conv the padding, strides, dilations and mode (the zero Conv is a
// plain cross-correlation), Activation a function and its coefficient.
//
//	s := cuda.StreamFromContext(ctx) // or any *cuda.Stream
//	xs, ws := cudnn.Tensor4D{N: 8, C: 3, H: 32, W: 32}, cudnn.Filter{K: 16, C: 3, R: 3, S: 3}
//	conv := cudnn.Conv{PadH: 1, PadW: 1}
//	ys, err := cudnn.ConvolutionOutputShape(xs, ws, conv) // 8×16×32×32
//	err = cudnn.Convolve[float32](s, conv, 1, x, xs, w, ws, 0, y)
//	err = cudnn.AddBias[float32](s, ys, 1, b, 1, y)
//	err = cudnn.Activate[float32](s, cudnn.Activation{Mode: cudnn.ReLU}, ys, 1, y, 0, y)
//
// There is no handle or descriptor to manage and no unsafe: each call takes a cuDNN
// handle of the stream's context from a cache (see MaxIdleHandles), binds it to the
// stream, and makes the context current itself, so any goroutine can call, and none
// needs runtime.LockOSThread. cuDNN's descriptors are made for the call and
// destroyed once it is queued (they are host-side). Calls take part in the cuda
// package's hand-off: they wait on the GPU for their operands' conflicting uses on
// other streams (inputs are read, outputs written), and return without waiting for
// the result.
//
// Convolve chooses its algorithm once per context, shapes, type and options, by
// cuDNN's heuristics or, with the FindAlgorithm option, by timing the candidates; the
// workspace the algorithm needs comes from the device's stream-ordered pool (at most
// DefaultWorkspaceLimit, or WorkspaceLimit). float32 convolutions are computed in
// full float32 unless TensorCores allows TF32.
//
// Arguments are checked before any CUDA call: sizes that are not positive, shapes
// that disagree, memory of another element type or too small, overlapping operands
// are errors matching cuda.ErrInvalidArgument (memory of another context than the
// stream's, cuda.ErrWrongContext). cuDNN's failures are its Status, wrapped with the
// operation's name ("cudnn: convolution forward: ..."). The headers are cuDNN 9.19:
// on an older cuDNN 9, a function added since returns a *dl.SymbolError naming the
// function and the library file loaded, wrapped the same way (the functions the
// operations call are all in cuDNN 9.0).
//
// # The raw layer
//
// Package cudnnraw binds every function of cuDNN's headers, with C names, for what this
// package does not cover; queue its calls with cuda.Enqueue, which orders them with
// the memory's other uses. libcudnn.so.9 is opened at first use ($GOCUDA_CUDNN_LIB overrides it);
// without it, calls return a *dl.LibraryError, and a function the installed library
// lacks returns a *dl.SymbolError.
package cudnn
