// Package ctxswitch hands the driver's cuCtxGetCurrent and cuCtxSetCurrent to the
// generated in-context calls (inX) of every gocuda package, which pass them to C so
// that an object's context is made current in the same cgo call as the library call.
// It is plumbing between the packages of this module, not API: it used to be
// cuda.ContextSwitchProcs.
//
// It cannot import the cuda package (cuda imports it), so the cuda package registers
// its lazily resolved procs at initialization. Every package whose generated code
// calls Procs imports cuda too (for CUcontext and Result), so cuda's init has run by
// the time Procs is called.
package ctxswitch

import (
	"errors"
	"sync/atomic"

	"github.com/gocuda/gocuda/dl"
)

// procs are cuCtxGetCurrent and cuCtxSetCurrent as the cuda package registered them;
// addr caches their addresses once both resolved, so that Procs is two atomic loads.
var (
	procs atomic.Pointer[[2]*dl.Proc]
	addr  struct{ get, set atomic.Uintptr }
)

// errUnregistered is Procs' error before Register: a program that calls an
// in-context function without linking the cuda package cannot be built, so this
// only shows in this package's own tests.
var errUnregistered = errors.New("gocuda: cuCtxGetCurrent and cuCtxSetCurrent are not registered (the cuda package is not initialized)")

// Register records the procs of cuCtxGetCurrent and cuCtxSetCurrent. The cuda
// package calls it once, from its init; nothing is resolved until Procs.
func Register(get, set *dl.Proc) {
	if get == nil || set == nil {
		panic("ctxswitch: Register with a nil proc")
	}
	if !procs.CompareAndSwap(nil, &[2]*dl.Proc{get, set}) {
		panic("ctxswitch: Register called twice")
	}
}

// Procs returns the addresses of cuCtxGetCurrent and cuCtxSetCurrent, resolved once
// (opening the driver on first use). It returns the driver's error if either cannot
// be resolved.
func Procs() (get, set uintptr, err error) {
	if g, s := addr.get.Load(), addr.set.Load(); g != 0 && s != 0 {
		return g, s, nil
	}
	return resolve()
}

// resolve is Procs' first call, kept out of line so that Procs stays small.
//
//go:noinline
func resolve() (get, set uintptr, err error) {
	p := procs.Load()
	if p == nil {
		return 0, 0, errUnregistered
	}
	if get, err = p[0].Addr(); err != nil {
		return 0, 0, err
	}
	if set, err = p[1].Addr(); err != nil {
		return 0, 0, err
	}
	addr.get.Store(get)
	addr.set.Store(set)
	return get, set, nil
}
