package cuda

import "github.com/gocuda/gocuda/internal/ctxswitch"

// The generated in-context calls of every gocuda package (inX) get cuCtxGetCurrent
// and cuCtxSetCurrent from internal/ctxswitch, which cannot import this package:
// hand it this package's procs. Package-level variables (the procs) are initialized
// before init runs, and any package that calls ctxswitch.Procs imports this one.
func init() { ctxswitch.Register(proc_cuCtxGetCurrent, proc_cuCtxSetCurrent) }
