// Package owner is the one implementation behind the raw packages' generated owner
// types (cublasraw.OwnedHandle, cufftraw.OwnedPlan, ...): a raw handle released
// through resource.ResourceFinalizer, with an idempotent Close, the os.File way. A
// wrapper of another CUDA library owns its raw handles with it the same way.
package owner

import (
	"errors"
	"runtime"

	"github.com/gocuda/gocuda/internal/errs"
	"github.com/gocuda/gocuda/resource"
)

// Owned owns a raw handle of type H. The zero Owned owns nothing.
type Owned[H comparable] struct {
	*inner[H]
}

// inner is the part the finalizer watches.
type inner[H comparable] struct {
	h   H
	reg *resource.Registration
}

// New takes ownership of h: destroy releases it, on Close or, once the owner is
// unreachable, through resource in the blocking or non-blocking lane. kind labels
// the release in reports. The creation site
// recorded in leak mode is the caller of New's caller (the generated OwnX).
func New[H comparable](h H, destroy func(H) error, blocking bool, kind string) Owned[H] {
	in := &inner[H]{h: h}
	in.reg = resource.ResourceFinalizer(func(o *inner[H]) error { return destroy(o.h) }, in, blocking,
		resource.Kind(kind), resource.CallerSkip(2))
	return Owned[H]{in}
}

// Handle returns the raw handle, or the zero handle once closed.
func (o Owned[H]) Handle() H {
	var zero H
	if o.inner == nil {
		return zero
	}
	return o.h
}

// Close releases the handle now and returns the release's error. Closing again, or
// closing a zero Owned, returns errs.Closed(name) (name such as "cublas:
// OwnedHandle"), as every Close in gocuda does: it matches errs.ErrClosed
// (cuda.ErrClosed) and resource.ErrReleased.
func (o Owned[H]) Close(name string) error {
	if o.inner == nil {
		return errs.Closed(name)
	}
	err := o.reg.Release()
	// The finalizer must not see the owner unreachable while Release runs.
	runtime.KeepAlive(o.inner)
	if errors.Is(err, resource.ErrReleased) {
		return errs.Closed(name)
	}
	var zero H
	o.h = zero
	return err
}
