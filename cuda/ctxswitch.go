package cuda

import (
	"github.com/gocuda/gocuda/internal/ctxswitch"
	"github.com/gocuda/gocuda/internal/streamslot"
)

// The generated in-context calls of every gocuda package (inX) get cuCtxGetCurrent
// and cuCtxSetCurrent from internal/ctxswitch, which cannot import this package:
// hand it this package's procs. Package-level variables (the procs) are initialized
// before init runs, and any package that calls ctxswitch.Procs imports this one.
func init() { ctxswitch.Register(proc_cuCtxGetCurrent, proc_cuCtxSetCurrent) }

// Likewise the library packages keep their handles on streams (internal/streamslot):
// hand it the way from a *Stream to the stream's slots.
func init() { streamslot.Register(streamSlots) }

// streamSlots returns the slots of s, a *Stream, or nil.
func streamSlots(s any) *streamslot.Slots {
	if st, _ := s.(*Stream); st != nil && st.stream != nil {
		return &st.stream.slots
	}
	return nil
}
