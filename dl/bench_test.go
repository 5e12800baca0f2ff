package dl_test

import (
	"sync/atomic"
	"testing"

	"github.com/gocuda/gocuda/dl"
	"github.com/gocuda/gocuda/dl/internal/dltest"
)

var (
	sink         int32
	parallelSink atomic.Int32
)

func benchProc(b *testing.B, symbol string) *dl.Proc {
	proc := dl.NewLibrary("dltest", buildLib(b), "").NewProc(symbol)
	if err := proc.Find(); err != nil {
		b.Fatal(err)
	}
	return proc
}

// BenchmarkAddr is the hot path of a resolved Proc on its own.
func BenchmarkAddr(b *testing.B) {
	proc := benchProc(b, "dltest_add")
	b.ReportAllocs()
	var s uintptr
	for b.Loop() {
		fn, err := proc.Addr()
		if err != nil {
			b.Fatal(err)
		}
		s += fn
	}
	sink = int32(s)
}

// BenchmarkCallAddTrampoline calls dltest_add as generated code would:
// Proc.Addr, then a cgo call to a C trampoline that calls the pointer.
func BenchmarkCallAddTrampoline(b *testing.B) {
	proc := benchProc(b, "dltest_add")
	b.ReportAllocs()
	var s int32
	for b.Loop() {
		fn, err := proc.Addr()
		if err != nil {
			b.Fatal(err)
		}
		s = dltest.CallII(fn, s, 1)
	}
	sink = s
}

// BenchmarkCallAddDirect is the cgo floor: a plain cgo call to a C function
// doing the same work, linked into the binary.
func BenchmarkCallAddDirect(b *testing.B) {
	b.ReportAllocs()
	var s int32
	for b.Loop() {
		s = dltest.DirectAdd(s, 1)
	}
	sink = s
}

// BenchmarkCallNopTrampoline is BenchmarkCallAddTrampoline for int f(void).
func BenchmarkCallNopTrampoline(b *testing.B) {
	proc := benchProc(b, "dltest_nop")
	b.ReportAllocs()
	var s int32
	for b.Loop() {
		fn, err := proc.Addr()
		if err != nil {
			b.Fatal(err)
		}
		s += dltest.CallV(fn)
	}
	sink = s
}

// BenchmarkCallNopDirect is BenchmarkCallAddDirect for int f(void).
func BenchmarkCallNopDirect(b *testing.B) {
	b.ReportAllocs()
	var s int32
	for b.Loop() {
		s += dltest.DirectNop()
	}
	sink = s
}

// BenchmarkCallAddTrampolineParallel is BenchmarkCallAddTrampoline from
// GOMAXPROCS goroutines sharing one Proc.
func BenchmarkCallAddTrampolineParallel(b *testing.B) {
	proc := benchProc(b, "dltest_add")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var s int32
		for pb.Next() {
			fn, err := proc.Addr()
			if err != nil {
				b.Fatal(err)
			}
			s = dltest.CallII(fn, s, 1)
		}
		parallelSink.Add(s)
	})
}
