package cuda

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/gocuda/gocuda/cuda/cudaraw"
)

// Faults. A kernel that faults (an illegal address, a trap, a device-side assert)
// leaves its context in an error that the driver reports to every later call in it:
// the context, and on the drivers measured the process's use of the device, cannot
// recover (docs/faults.md). The first operation that sees such an error marks the
// context faulted; from then on every operation on the context and its objects
// fails at once with the same *FaultError, Close of its objects calls no driver,
// and the context's fault handler is told once.

// ErrFaulted is matched (errors.Is) by the error of every operation on a context
// that a sticky fault ended; the error is a *FaultError.
var ErrFaulted = errors.New("cuda: context faulted")

// FaultError is the error of a context that a sticky fault ended. It matches
// ErrFaulted and the driver's Result (cudaraw.ErrIllegalAddress, ...) with
// errors.Is.
type FaultError struct {
	Device Device
	Result cudaraw.Result // the driver's sticky error
	// Op is the operation that first saw the fault (for a launch, the kernel's
	// name), and Stream the stream it was queued on (0 when it had none). The work
	// that faulted is on that stream, queued before the operation, or on a stream
	// it waited for.
	Op     string
	Stream cudaraw.CUstream
	// Kernel is the last kernel launched on Stream before the fault was seen (""
	// when none or no stream is known): the kernel that faulted, or one queued
	// after it.
	Kernel string
}

func (e *FaultError) Error() string {
	where := ""
	if e.Stream != 0 {
		where = fmt.Sprintf(" on stream %#x", uintptr(e.Stream))
	}
	if e.Kernel != "" {
		where += fmt.Sprintf(" after kernel %s", e.Kernel)
	}
	return fmt.Sprintf("cuda: device %d: context faulted (%v), first seen by %s%s: the context cannot be used again "+
		"(the process must be restarted to use the device)", int(e.Device), e.Result, e.Op, where)
}

// Unwrap returns ErrFaulted and the driver's Result.
func (e *FaultError) Unwrap() []error { return []error{ErrFaulted, e.Result} }

// sticky reports whether err carries one of the driver's errors that leave the
// context unusable: those its documentation says leave the process in an
// inconsistent state, any further CUDA work returning the same error.
func sticky(err error) (cudaraw.Result, bool) {
	var r cudaraw.Result
	if !errors.As(err, &r) {
		return 0, false
	}
	switch r {
	case cudaraw.CUDA_ERROR_ILLEGAL_ADDRESS, cudaraw.CUDA_ERROR_LAUNCH_TIMEOUT, cudaraw.CUDA_ERROR_ASSERT,
		cudaraw.CUDA_ERROR_HARDWARE_STACK_ERROR, cudaraw.CUDA_ERROR_ILLEGAL_INSTRUCTION,
		cudaraw.CUDA_ERROR_MISALIGNED_ADDRESS, cudaraw.CUDA_ERROR_INVALID_ADDRESS_SPACE,
		cudaraw.CUDA_ERROR_INVALID_PC, cudaraw.CUDA_ERROR_LAUNCH_FAILED, cudaraw.CUDA_ERROR_ECC_UNCORRECTABLE:
		return r, true
	}
	return 0, false
}

// Sticky reports whether err carries one of the driver's sticky errors, those that
// end a context (the Result of a FaultError), and returns it. The package's own
// operations return such an error as a *FaultError once they have seen it; Sticky
// serves code that gets the driver's error as it is (raw calls, other libraries, or
// an operation of this package that returned it before any wait saw the fault),
// such as a worker process that must know its device is lost (package worker).
func Sticky(err error) (cudaraw.Result, bool) { return sticky(err) }

// faultState is a context's fault, once one was seen, and its handler.
type faultState struct {
	err     atomic.Pointer[FaultError]
	handler atomic.Pointer[func(*FaultError)]
}

// faulted returns err as the context's *FaultError when it is a sticky error (the
// first one seen marks the context, naming op, stream t (nil: none) and the last
// kernel launched there, and tells the handler), and err unchanged otherwise. Every
// error of a driver call on c's work passes through it on its way to the caller.
func (c *ctxState) faulted(err error, op string, t *stream) error {
	if err == nil {
		return nil
	}
	if f := c.fault.err.Load(); f != nil {
		return f
	}
	r, ok := sticky(err)
	if !ok {
		return err
	}
	f := &FaultError{Device: c.dev, Result: r, Op: op}
	if t != nil {
		f.Stream = t.h
		if k := t.kernel.Load(); k != nil {
			f.Kernel = k.name
		}
	}
	if !c.fault.err.CompareAndSwap(nil, f) {
		return c.fault.err.Load()
	}
	faults.Add(1)
	if hp := c.fault.handler.Load(); hp != nil {
		(*hp)(f)
	} else {
		slog.Error("cuda: context faulted", "device", int(f.Device), "error", f.Result.Error(), "op", f.Op)
	}
	return f
}

// faultErr returns c's *FaultError, or nil while it has none.
func (c *ctxState) faultErr() error {
	if f := c.fault.err.Load(); f != nil {
		return f
	}
	return nil
}

// faults counts the contexts marked faulted (tests).
var faults atomic.Int64

// Fault returns the *FaultError that ended the context, or nil while it has none.
func (c *Context) Fault() error {
	if c == nil || c.ctxState == nil {
		return nil
	}
	return c.faultErr()
}

// SetFaultHandler sets the function told, once, on the goroutine that first sees
// it, when a sticky fault ends the context (nil: the default, which logs it through
// log/slog at level Error). The handler must not wait for the context's work.
func (c *Context) SetFaultHandler(h func(*FaultError)) error {
	if err := c.check(); err != nil {
		return err
	}
	if h == nil {
		c.fault.handler.Store(nil)
	} else {
		c.fault.handler.Store(&h)
	}
	return nil
}
