// Package cudnn binds cuDNN 9 (deep learning primitives on the GPU) for Go.
//
// The raw layer (zz_generated_*.go) has every function of cudnn.h and the cudnn_*.h set as a Go function named
// after it without the cudnn prefix and version suffix. C types keep their spelling,
// constants their C names. Functions return nil on success or a Status, which matches the
// Err* sentinels with errors.Is. Types shared with other libraries (streams, data types,
// complex numbers) are package cuda's.
//
// libcudnn.so.9 is opened at first use ($GOCUDA_CUDNN_LIB overrides it); without it, calls return a
// *dl.LibraryError, and a function the installed library lacks returns a *dl.SymbolError.
// OwnedHandle owns a handle (cudnnDestroy waits for the GPU: dropped ones go to
// resource.Reclaim); OwnedTensorDescriptor and OwnedActivationDescriptor are released
// promptly. The headers are cuDNN 9.19: on an older cuDNN 9, functions added since
// return a *dl.SymbolError naming the function and the library file loaded.
package cudnn
