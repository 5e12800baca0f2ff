package cuda_test

import (
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/tools/bench/callbench"
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
		flags := uint32(cudaraw.CU_EVENT_DISABLE_TIMING)
		if blocking {
			name += "-blocking"
			flags |= uint32(cudaraw.CU_EVENT_BLOCKING_SYNC)
		}
		b.Run(name, func(b *testing.B) {
			lockContext(b, ctx.Handle())
			var h cudaraw.CUevent
			require.NoError(b, cudaraw.EventCreate(&h, flags))
			defer cudaraw.EventDestroy(h)
			f := empty.Handle()
			i := 0
			for b.Loop() {
				a, c := s1.Handle(), s2.Handle()
				if i&1 == 1 {
					a, c = c, a
				}
				i++
				if err := cudaraw.EventRecord(h, a); err != nil {
					b.Fatal(err)
				}
				if err := cudaraw.StreamWaitEvent(c, h, 0); err != nil {
					b.Fatal(err)
				}
				if err := cudaraw.LaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, c, nil, nil); err != nil {
					b.Fatal(err)
				}
			}
			require.NoError(b, s1.Synchronize())
			require.NoError(b, s2.Synchronize())
		})
	}
	// The same hand-off made by the package: a buffer written by a kernel
	// alternately on the two streams, each launch ordered after the previous one on
	// the other stream (floor.cu's w_handoff_buffer). handoffs launches k of them;
	// check checks the buffer once the streams are done.
	add := function(b, m, "add_u32")
	buf, err := cuda.AllocFor[uint32](s1, 256)
	require.NoError(b, err)
	defer buf.Close()
	n := 0
	handoffs := func(k int) {
		for range k {
			c := s1
			if n&1 == 1 {
				c = s2
			}
			n++
			if err := add.Launch(c, cuda.D1(1), cuda.D1(256), 0, buf, uint32(1), uint64(256)); err != nil {
				b.Fatal(err)
			}
		}
	}
	check := func(b *testing.B) {
		got := make([]uint32, 256)
		require.NoError(b, cuda.CopyFromDevice(got, buf))
		if !cudatest.FakeLoaded() {
			require.Equal(b, uint32(n), got[255], "every launch ran, in order")
		}
	}
	b.Run("buffer", func(b *testing.B) {
		require.NoError(b, buf.Memset32(0))
		n = 0
		for b.Loop() {
			handoffs(1)
		}
		check(b)
	})
	// buffer-pair alternates chunks of the buffer loop above with the same hand-offs
	// made from C in this process (callbench.LoopHandoff: cuEventRecord +
	// cuStreamWaitEvent + cuLaunchKernel of add_u32), each chunk starting on empty
	// queues: x-c-ns is the package's cost per hand-off over C.
	b.Run("buffer-pair", func(b *testing.B) {
		require.NoError(b, buf.Memset32(0))
		n = 0
		lib := cudaraw.Library()
		procs := make([]uintptr, 3)
		for i, name := range []string{"cuEventRecord", "cuStreamWaitEvent", "cuLaunchKernel"} {
			procs[i], err = lib.NewProc(name).Addr()
			require.NoError(b, err)
		}
		var h cudaraw.CUevent
		func() {
			lockContext(b, ctx.Handle())
			defer runtime.UnlockOSThread()
			require.NoError(b, cudaraw.EventCreate(&h, uint32(cudaraw.CU_EVENT_DISABLE_TIMING)))
		}()
		defer cudaraw.EventDestroy(h)
		params := make([]byte, 24)
		*(*cudaraw.CUdeviceptr)(unsafe.Pointer(&params[0])) = buf.Ptr()
		*(*uint32)(unsafe.Pointer(&params[8])) = 1
		*(*uint64)(unsafe.Pointer(&params[16])) = 256
		offsets := []uintptr{0, 8, 16}
		goLoop := func(k int) time.Duration {
			start := time.Now()
			handoffs(k)
			return time.Since(start)
		}
		cLoop := func(k int) time.Duration {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			require.NoError(b, cudaraw.CtxSetCurrent(ctx.Handle()))
			// Order the C chunk after the Go chunk's last use, as the package would.
			require.NoError(b, s1.Synchronize())
			require.NoError(b, s2.Synchronize())
			d, err := callbench.LoopHandoff(procs[0], procs[1], procs[2], uintptr(h), uintptr(s1.Handle()),
				uintptr(s2.Handle()), uintptr(add.Handle()), 256, params, offsets, k)
			require.NoError(b, err)
			n += k
			return d
		}
		settle := func() {
			require.NoError(b, s1.Synchronize())
			require.NoError(b, s2.Synchronize())
		}
		pairLoops(b, settle, goLoop, cLoop)
		check(b)
	})
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
