package callbench

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestLoopClock(t *testing.T) {
	d := LoopClock(1000)
	assert.Positive(t, d, "a clock read takes time")
}

// BenchmarkMachine measures what every binding call pays on this machine: a cgo call
// into an empty C function, a read of the clock from Go and from C, and an atomic
// add (an uncontended read-modify-write, as each hold, lock and unlock of the cuda
// package costs).
func BenchmarkMachine(b *testing.B) {
	b.Run("cgo-noop", func(b *testing.B) {
		for b.Loop() {
			Noop()
		}
	})
	b.Run("time-now", func(b *testing.B) {
		var t time.Time
		for b.Loop() {
			t = time.Now()
		}
		_ = t
	})
	b.Run("atomic-add", func(b *testing.B) {
		var n atomic.Int64
		for b.Loop() {
			n.Add(1)
		}
		assert.Equal(b, int64(b.N), n.Load())
	})
	b.Run("c-clock", func(b *testing.B) {
		b.ReportMetric(float64(LoopClock(b.N)), "c-clock-ns")
	})
}
