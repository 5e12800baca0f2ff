package resource

import (
	"runtime"
	"testing"
	"time"
)

type benchRes struct {
	h   uintptr
	reg *Registration
}

func benchRelease(*benchRes) {}

// BenchmarkRegisterCancel measures ResourceFinalizer followed by Cancel:
// the registration overhead per object of the os.File pattern. Cancel
// removes the finalizer, so the same object can be registered again.
func BenchmarkRegisterCancel(b *testing.B) {
	b.ReportAllocs()
	o := &benchRes{h: 1}
	for b.Loop() {
		o.reg = ResourceFinalizer(benchRelease, o, true)
		o.reg.Cancel()
	}
}

// BenchmarkRegisterCancelNewObject is BenchmarkRegisterCancel with a new
// object allocated for every registration.
func BenchmarkRegisterCancelNewObject(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		o := &benchRes{h: 1}
		o.reg = ResourceFinalizer(benchRelease, o, true)
		o.reg.Cancel()
	}
}

// BenchmarkSetFinalizerFloor is the runtime's share of BenchmarkRegisterCancel:
// runtime.SetFinalizer with a capturing closure, then SetFinalizer(nil).
func BenchmarkSetFinalizerFloor(b *testing.B) {
	b.ReportAllocs()
	o := &benchRes{h: 1}
	for b.Loop() {
		r := &Registration{}
		runtime.SetFinalizer(o, func(*benchRes) { _ = r })
		runtime.SetFinalizer(o, nil)
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

// benchAtRes registers itself in place, as the cuda package's buffers do.
type benchAtRes struct {
	h   uintptr
	reg Registration
}

func (*benchAtRes) release() error { return nil }

func finalizeBenchAtRes(o *benchAtRes) { o.reg.Finalized() }

// benchDirect is a rescore.DirectContext that is always alive.
type benchDirect struct{ _ int }

func (*benchDirect) ResourceDirect() bool { return true }

// BenchmarkRegisterAtRelease is BenchmarkRegisterRelease with the At
// option (no allocation besides the object) under a
// rescore.DirectContext (no Run hook), the cuda package's buffer path.
func BenchmarkRegisterAtRelease(b *testing.B) {
	b.ReportAllocs()
	ctx := &benchDirect{}
	for b.Loop() {
		o := &benchAtRes{h: 1}
		ResourceFinalizer((*benchAtRes).release, o, false, Kind("bench"), WithContext(ctx), At(&o.reg, finalizeBenchAtRes))
		_ = o.reg.Release()
	}
}
