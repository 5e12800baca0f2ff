package main

import (
	_ "embed"
	"errors"
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/tools/internal/rawctx"
)

// kernelsPTX holds spin(unsigned long long ns), which spins on %globaltimer, and empty().
//
//go:embed kernels.ptx
var kernelsPTX string

// otherDelay is how long after the release starts the other thread launches its kernel.
const otherDelay = 20 * time.Millisecond

// Env is the probe's CUDA state, all through the generated raw layer: device 0's primary
// context (current on the main thread, which main locks), the spin module, the busy stream
// that runs the spin kernel, and the other thread that launches meanwhile.
type Env struct {
	Dev   cudaraw.CUdevice
	Ctx   cudaraw.CUcontext
	Mod   cudaraw.CUmodule
	Spin  cudaraw.CUfunction
	Empty cudaraw.CUfunction
	Busy  cudaraw.CUstream

	spinNs *uint64            // spin's argument (pinned)
	args   *[1]unsafe.Pointer // spin's kernelParams
	pinner runtime.Pinner

	req chan time.Duration
	res chan launchResult
}

type launchResult struct {
	d   time.Duration
	err error
}

// NewEnv sets up the probe state. Call it on the main goroutine with its OS thread locked.
//
// Out-parameters are locals copied into Env afterwards: cgo checks the whole object an
// unsafe.Pointer argument points into, and Env holds Go pointers.
func NewEnv(spin time.Duration) (*Env, error) {
	d, err := rawctx.Open(kernelsPTX)
	if err != nil {
		return nil, err
	}
	var (
		fspin, fempty cudaraw.CUfunction
		busy          cudaraw.CUstream
	)
	err = rawctx.Run(
		rawctx.Step{What: "kernels", Do: func() (err error) {
			if fspin, err = d.Function("spin"); err == nil {
				fempty, err = d.Function("empty")
			}
			return err
		}},
		rawctx.Step{What: "cuStreamCreate", Do: func() error { return cudaraw.StreamCreate(&busy, uint32(cudaraw.CU_STREAM_NON_BLOCKING)) }},
	)
	if err != nil {
		return nil, err
	}
	e := &Env{Dev: d.Dev, Ctx: d.Ctx, Mod: d.Mod, Spin: fspin, Empty: fempty, Busy: busy,
		req: make(chan time.Duration), res: make(chan launchResult)}
	e.spinNs = new(uint64) // its own object, pinned: spin's kernelParams point at it
	*e.spinNs = uint64(spin.Nanoseconds())
	e.pinner.Pin(e.spinNs)
	e.args = &[1]unsafe.Pointer{unsafe.Pointer(e.spinNs)}

	ready := make(chan error)
	go e.otherThread(ready)
	if err := <-ready; err != nil {
		return nil, fmt.Errorf("other thread: %w", err)
	}
	return e, nil
}

// otherThread is the goroutine, locked to its own OS thread with the context current, that
// launches an empty kernel on its own stream when asked and reports how long the launch took.
func (e *Env) otherThread(ready chan<- error) {
	runtime.LockOSThread()
	var s cudaraw.CUstream
	if err := cudaraw.CtxSetCurrent(e.Ctx); err != nil {
		ready <- err
		return
	}
	if err := cudaraw.StreamCreate(&s, uint32(cudaraw.CU_STREAM_NON_BLOCKING)); err != nil {
		ready <- err
		return
	}
	ready <- nil
	for d := range e.req {
		time.Sleep(d)
		t := time.Now()
		err := cudaraw.LaunchKernel(e.Empty, 1, 1, 1, 1, 1, 1, 0, s, nil, nil)
		e.res <- launchResult{time.Since(t), err}
	}
}

// LaunchSpin starts the spin kernel on the busy stream.
func (e *Env) LaunchSpin() error {
	return cudaraw.LaunchKernel(e.Spin, 1, 1, 1, 1, 1, 1, 0, e.Busy, &e.args[0], nil)
}

// SpinOnce runs the spin kernel alone and returns how long it lasted.
func (e *Env) SpinOnce() (time.Duration, error) {
	if err := cudaraw.StreamSynchronize(e.Busy); err != nil {
		return 0, err
	}
	t := time.Now()
	if err := e.LaunchSpin(); err != nil {
		return 0, err
	}
	err := cudaraw.StreamSynchronize(e.Busy)
	return time.Since(t), err
}

// Measure starts the spin kernel, asks the other thread to launch ~20 ms later, calls release
// and returns how long the caller and the other thread's launch were held. It waits for all
// the GPU's work before it returns.
func (e *Env) Measure(release func() error) (caller, other time.Duration, err error) {
	if err := cudaraw.CtxSynchronize(); err != nil {
		return 0, 0, fmt.Errorf("cuCtxSynchronize before: %w", err)
	}
	if err := e.LaunchSpin(); err != nil {
		return 0, 0, fmt.Errorf("spin launch: %w", err)
	}
	time.Sleep(time.Millisecond) // let the spin kernel start
	e.req <- otherDelay
	t := time.Now()
	rerr := release()
	caller = time.Since(t)
	o := <-e.res
	serr := cudaraw.CtxSynchronize()
	return caller, o.d, errors.Join(wrap("release", rerr), wrap("other-thread launch", o.err), wrap("cuCtxSynchronize after", serr))
}

func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}
