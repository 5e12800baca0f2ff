// Package owner is the one implementation behind the generated owner types
// (cublas.OwnedHandle, cufft.OwnedPlan, ...): a raw handle released through
// resource.ResourceFinalizer, with an idempotent Close, the os.File way.
package owner

import (
	"errors"
	"fmt"
	"runtime"

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
	in.reg = resource.ResourceFinalizerErr(func(o *inner[H]) error { return destroy(o.h) }, in, blocking,
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
// closing a zero Owned, returns an error matching resource.ErrReleased that names
// the owner ("cublas: OwnedHandle").
func (o Owned[H]) Close(name string) error {
	if o.inner == nil {
		return fmt.Errorf("%s: %w", closeOfNil(name), resource.ErrReleased)
	}
	err := o.reg.Release()
	// The finalizer must not see the owner unreachable while Release runs.
	runtime.KeepAlive(o.inner)
	if errors.Is(err, resource.ErrReleased) {
		return fmt.Errorf("%s already closed: %w", name, err)
	}
	var zero H
	o.h = zero
	return err
}

// closeOfNil turns "cublas: OwnedHandle" into "cublas: Close of a nil OwnedHandle".
func closeOfNil(name string) string {
	for i := 0; i+1 < len(name); i++ {
		if name[i] == ':' && name[i+1] == ' ' {
			return name[:i+2] + "Close of a nil " + name[i+2:]
		}
	}
	return "Close of a nil " + name
}
