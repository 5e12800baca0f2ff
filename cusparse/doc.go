// Package cusparse binds cuSPARSE (sparse linear algebra on the GPU) for Go.
//
// The raw layer (zz_generated_*.go) has every function of cusparse.h as a Go function named
// after it without the cusparse prefix and version suffix. C types keep their spelling,
// constants their C names. Functions return nil on success or a Status, which matches the
// Err* sentinels with errors.Is. Types shared with other libraries (streams, data types,
// complex numbers) are package cuda's.
//
// libcusparse.so.12 is opened at first use ($GOCUDA_CUSPARSE_LIB overrides it); without it, calls return a
// *dl.LibraryError, and a function the installed library lacks returns a *dl.SymbolError.
// OwnedHandle, OwnedSpMat, OwnedDnVec and the other owners release their handle on
// Close; one dropped without Close is released promptly on an ordinary goroutine
// (cusparseDestroy returns in microseconds).
package cusparse
