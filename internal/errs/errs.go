// Package errs holds the errors that every gocuda package shares: cuda.ErrClosed is
// ErrClosed, resource.ErrReleased is ErrReleased, and the objects of every package
// (cuda's, and the generated owner types of all of them) return errors matching them,
// from Closed for a second Close. It sits below resource, which exports ErrReleased.
package errs

import (
	"errors"
	"fmt"
)

// ErrReleased is resource.ErrReleased: a Release of a registration that was released
// already (explicitly or through the finalizer path) or cancelled.
var ErrReleased = errors.New("resource: already released")

// ErrClosed is matched by the errors of every use of a closed object, in every
// package (exported as cuda.ErrClosed).
var ErrClosed = fmt.Errorf("gocuda: use of a closed object")

// Closed returns the error of a second Close, or of a Close of a nil object, of the
// object named what (such as "cuda: stream"): it matches ErrClosed and
// resource.ErrReleased, so that callers can test either.
func Closed(what string) error {
	return fmt.Errorf("%s: already closed: %w (%w)", what, ErrClosed, ErrReleased)
}
