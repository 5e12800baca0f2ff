package cuda_test

import (
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/stretchr/testify/require"
)

// BenchmarkHandoff hands work between two streams the way tools/floor does: by an event
// the other stream waits for on the GPU, or by a host synchronization.
func BenchmarkHandoff(b *testing.B) {
	_, m, s1 := loadKernels(b)
	ctx := m.Context()
	empty := function(b, m, "empty")
	s2, err := ctx.NewStream()
	require.NoError(b, err)
	defer s2.Close()
	ev, err := ctx.NewEvent(false)
	require.NoError(b, err)
	defer ev.Close()

	b.Run("event", func(b *testing.B) {
		i := 0
		for b.Loop() {
			a, c := s1, s2
			if i&1 == 1 {
				a, c = s2, s1
			}
			i++
			if err := ev.Record(a); err != nil {
				b.Fatal(err)
			}
			if err := c.WaitEvent(ev); err != nil {
				b.Fatal(err)
			}
			if err := empty.Launch(c, cuda.D1(1), cuda.D1(1), 0); err != nil {
				b.Fatal(err)
			}
		}
		require.NoError(b, s1.Synchronize())
		require.NoError(b, s2.Synchronize())
	})
	// The same loop on the raw layer with an event made with and without
	// CU_EVENT_BLOCKING_SYNC: the flag slows the hand-off (by about 1.5 µs on an
	// H200), which is why Event does not use it (its Synchronize sleeps on an
	// event of its own).
	for _, blocking := range []bool{false, true} {
		name := "event-raw"
		flags := uint32(cuda.CU_EVENT_DISABLE_TIMING)
		if blocking {
			name += "-blocking"
			flags |= uint32(cuda.CU_EVENT_BLOCKING_SYNC)
		}
		b.Run(name, func(b *testing.B) {
			lockContext(b, ctx.Handle())
			var h cuda.CUevent
			require.NoError(b, cuda.EventCreate(&h, flags))
			defer cuda.EventDestroy(h)
			f := empty.Handle()
			i := 0
			for b.Loop() {
				a, c := s1.Handle(), s2.Handle()
				if i&1 == 1 {
					a, c = c, a
				}
				i++
				if err := cuda.EventRecord(h, a); err != nil {
					b.Fatal(err)
				}
				if err := cuda.StreamWaitEvent(c, h, 0); err != nil {
					b.Fatal(err)
				}
				if err := cuda.LaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, c, nil, nil); err != nil {
					b.Fatal(err)
				}
			}
			require.NoError(b, s1.Synchronize())
			require.NoError(b, s2.Synchronize())
		})
	}
	b.Run("host-sync", func(b *testing.B) {
		i := 0
		for b.Loop() {
			c := s1
			if i&1 == 1 {
				c = s2
			}
			i++
			if err := empty.Launch(c, cuda.D1(1), cuda.D1(1), 0); err != nil {
				b.Fatal(err)
			}
			if err := c.Synchronize(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkStreamCreateDestroy creates and closes a non-blocking stream.
func BenchmarkStreamCreateDestroy(b *testing.B) {
	_, m, _ := loadKernels(b)
	ctx := m.Context()
	for b.Loop() {
		s, err := ctx.NewStream()
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
