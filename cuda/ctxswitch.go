package cuda

import (
	"github.com/gocuda/gocuda/internal/streamslot"
)

// The library packages keep their handles on streams (internal/streamslot):
// hand it the way from a *Stream to the stream's slots.
func init() { streamslot.Register(streamSlots) }

// streamSlots returns the slots of s, a *Stream, or nil.
func streamSlots(s any) *streamslot.Slots {
	if st, _ := s.(*Stream); st != nil && st.stream != nil {
		return &st.stream.slots
	}
	return nil
}
