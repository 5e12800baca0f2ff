package worker

import (
	"context"
	"errors"
	"fmt"

	"github.com/gocuda/gocuda/cuda"
)

var (
	// ErrWorkerLost is matched by the error of a request whose worker process died
	// before it answered (killed, crashed, exited); the error is a *LostError.
	ErrWorkerLost = errors.New("worker: worker process lost")
	// ErrRestartLimit is returned by Call while no worker can take the request
	// because the pool has started Options.MaxRestarts replacements within
	// Options.RestartWindow; it holds until the window passes.
	ErrRestartLimit = errors.New("worker: restart limit reached")
	// ErrClosed is returned by Call on a closed pool.
	ErrClosed = errors.New("worker: pool closed")
	// ErrUnknownHandler is matched by the error of a call of a name no Handle
	// registered.
	ErrUnknownHandler = errors.New("worker: no such handler")
	// ErrPanicked is matched by the error of a request whose handler panicked.
	ErrPanicked = errors.New("worker: handler panicked")
)

// ErrorKind tells what a worker's error answer was.
type ErrorKind uint8

const (
	// KindHandler: the handler returned an error.
	KindHandler ErrorKind = iota
	// KindCanceled and KindDeadline: the handler's error was its context's
	// (context.Canceled, context.DeadlineExceeded).
	KindCanceled
	KindDeadline
	// KindPanic: the handler panicked; the worker recovered and serves on.
	KindPanic
	// KindUnknownHandler: the worker has no handler of the name.
	KindUnknownHandler
	// KindFault: a sticky fault ended the worker's CUDA context while the request
	// ran, whether its own work faulted or another request's on the same worker did.
	KindFault
)

var kindNames = [...]string{"handler error", "canceled", "deadline exceeded", "panic", "unknown handler", "fault"}

func (k ErrorKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("ErrorKind(%d)", int(k))
}

// Error is a worker's error answer to a request, rebuilt in the parent: the
// handler's error text, and what errors.Is and errors.As find in it. For
// KindFault, Fault is the worker's *cuda.FaultError (Device, Result, Op; Stream
// is the worker's handle, for the record; Device is -1 where the handler returned
// the driver's sticky error as it was, without the context it came from), so that
// errors.Is(err, cuda.ErrFaulted) and errors.Is(err, cudaraw.ErrIllegalAddress)
// hold in the parent.
type Error struct {
	Handler string
	PID     int // the worker's process id
	Kind    ErrorKind
	Msg     string // the error's text in the worker
	Fault   *cuda.FaultError
}

func (e *Error) Error() string {
	return fmt.Sprintf("worker: %s (pid %d): %s", e.Handler, e.PID, e.Msg)
}

// Unwrap returns what the kind matches: the fault, the context's error,
// ErrPanicked or ErrUnknownHandler; nil for KindHandler.
func (e *Error) Unwrap() error {
	switch e.Kind {
	case KindFault:
		if e.Fault != nil {
			return e.Fault
		}
		return cuda.ErrFaulted
	case KindCanceled:
		return context.Canceled
	case KindDeadline:
		return context.DeadlineExceeded
	case KindPanic:
		return ErrPanicked
	case KindUnknownHandler:
		return ErrUnknownHandler
	}
	return nil
}

// LostError is the error of a request whose worker process ended before it
// answered. The request may have run in part or in full.
type LostError struct {
	Handler string
	PID     int
	Cause   string // how the process ended, as os/exec says it ("signal: killed")
}

func (e *LostError) Error() string {
	return fmt.Sprintf("worker: %s: worker pid %d ended before it answered (%s)", e.Handler, e.PID, e.Cause)
}

// Unwrap returns ErrWorkerLost.
func (e *LostError) Unwrap() error { return ErrWorkerLost }
