package resource

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
)

// Failure describes a release that failed where no caller could receive
// the error: a release run from a lane (finalizer path, or an explicit
// Release deferred by a graph capture).
type Failure struct {
	// Kind is the resource kind given with the Kind option, or the Go
	// type name of the object.
	Kind string
	// Err is the release function's error, a *PanicError if it panicked,
	// or the error of the cuda package's context hook.
	Err error
	// Blocking reports the lane the resource was registered for.
	Blocking bool
	// Explicit is true for an explicit Release that a capture deferred.
	Explicit bool
}

// PanicError is the error recorded when a release function (or a context
// hook) panics. The panic is recovered: it never takes the process down.
type PanicError struct {
	// Value is the value passed to panic.
	Value any
	// Stack is the stack of the panicking goroutine.
	Stack []byte
}

func newPanicError(v any) *PanicError { return &PanicError{Value: v, Stack: debug.Stack()} }

// Error implements error.
func (e *PanicError) Error() string { return fmt.Sprintf("resource: release panicked: %v", e.Value) }

// Unwrap returns the panic value if it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// DefaultFailureHandler logs the failure through log/slog at level Error,
// with the resource kind. It is the handler in effect until
// SetFailureHandler replaces it.
func DefaultFailureHandler(f Failure) {
	slog.Default().Log(context.Background(), slog.LevelError, "resource: release failed",
		slog.String("kind", f.Kind), slog.Any("err", f.Err),
		slog.Bool("blocking", f.Blocking), slog.Bool("explicit", f.Explicit))
}

// SetFailureHandler replaces the handler that is told about failed
// releases and returns the previous one. A nil h restores
// DefaultFailureHandler. The handler runs on the goroutine that ran the
// release; a panic in it is recovered and ignored.
func SetFailureHandler(h func(Failure)) (previous func(Failure)) {
	return std.setFailureHandler(h)
}

func (q *queue) setFailureHandler(h func(Failure)) func(Failure) {
	var p *func(Failure)
	if h != nil {
		p = &h
	}
	old := q.onFailure.Swap(p)
	if old == nil {
		return DefaultFailureHandler
	}
	return *old
}

// report hands a failure to the handler, shielding the caller from it.
func (q *queue) report(f Failure) {
	h := DefaultFailureHandler
	if p := q.onFailure.Load(); p != nil {
		h = *p
	}
	defer func() { _ = recover() }()
	h(f)
}
