package cuda

import "sync/atomic"

var ctxSwitch struct {
	get, set atomic.Uintptr
}

// ContextSwitchProcs returns the addresses of cuCtxGetCurrent and cuCtxSetCurrent,
// resolved once. Generated in-context calls of every gocuda package pass them to C,
// which makes an object's context current in the same cgo call as the library call.
func ContextSwitchProcs() (get, set uintptr, err error) {
	if g, s := ctxSwitch.get.Load(), ctxSwitch.set.Load(); g != 0 && s != 0 {
		return g, s, nil
	}
	if get, err = proc_cuCtxGetCurrent.Addr(); err != nil {
		return 0, 0, err
	}
	if set, err = proc_cuCtxSetCurrent.Addr(); err != nil {
		return 0, 0, err
	}
	ctxSwitch.get.Store(get)
	ctxSwitch.set.Store(set)
	return get, set, nil
}
