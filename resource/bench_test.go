package resource

import (
	"testing"
	"time"
)

type benchRes struct {
	h   uintptr
	reg *Registration
}

func benchRelease(*benchRes) {}

// BenchmarkRegister measures ResourceFinalizer followed by Cancel (the
// os.File pattern's overhead per object), allocation of the object included.
func BenchmarkRegister(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		o := &benchRes{h: 1}
		o.reg = ResourceFinalizer(benchRelease, o, true)
		o.reg.Cancel()
	}
}

// BenchmarkRegisterRelease measures ResourceFinalizer followed by an
// explicit Release (the Close path).
func BenchmarkRegisterRelease(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		o := &benchRes{h: 1}
		o.reg = ResourceFinalizer(benchRelease, o, false)
		_ = o.reg.Release()
	}
}

// BenchmarkEnqueue measures what the finalizer does: state transition and
// push onto a lane (the lane is emptied every 1024 pushes).
func BenchmarkEnqueue(b *testing.B) {
	for _, blocking := range []bool{false, true} {
		name := "nonblocking"
		if blocking {
			name = "blocking"
		}
		b.Run(name, func(b *testing.B) {
			q := newQueue(time.Hour)
			defer q.close()
			const batch = 1024
			regs := make([]Registration, batch)
			obj := &benchRes{}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				j := i % batch
				if j == 0 {
					q.lanes[0].head.Store(nil)
					q.lanes[1].head.Store(nil)
					for k := range regs {
						regs[k] = Registration{q: q, blocking: blocking}
					}
				}
				q.fire(&regs[j], unsafeObj(obj))
			}
		})
	}
}

// BenchmarkDrainEmpty measures Drain when nothing is queued.
func BenchmarkDrainEmpty(b *testing.B) {
	for b.Loop() {
		Drain()
	}
}
