package cudatest

import (
	"testing"
	"unsafe"

	"github.com/gocuda/gocuda/cuda/cudaraw"
)

func TestDevPtr(t *testing.T) {
	const addr = cudaraw.CUdeviceptr(0x7f00_1234_5000)
	if got := uintptr(unsafe.Pointer(DevPtr[float32](addr))); got != uintptr(addr) {
		t.Fatalf("DevPtr = %#x, want %#x", got, addr)
	}
	if got := uintptr(DevUnsafe(addr)); got != uintptr(addr) {
		t.Fatalf("DevUnsafe = %#x, want %#x", got, addr)
	}
	if DevPtr[float64](0) != nil {
		t.Fatal("DevPtr(0) is not nil")
	}
}

// TestRequire skips where there is no GPU and, where there is one, checks
// that the primary context is current.
func TestRequire(t *testing.T) {
	g := Require(t)
	var cur cudaraw.CUcontext
	if err := cudaraw.CtxGetCurrent(&cur); err != nil {
		t.Fatal(err)
	}
	if cur != g.Context {
		t.Fatalf("current context %#x, want %#x", cur, g.Context)
	}
	d := ToDevice(t, g, []float32{1, 2, 3})
	if got := Float32sFromDevice(t, d, 3); got[0] != 1 || got[2] != 3 {
		t.Fatalf("round trip = %v", got)
	}
}
