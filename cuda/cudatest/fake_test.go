package cudatest_test

import (
	"os"
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
)

// The fake driver serves the paths the benchmarks take: device allocation, memset
// and free on a stream, and loading and launching a kernel, through the idiomatic
// API.
func TestFakeDriver(t *testing.T) {
	if !cudatest.FakeLoaded() {
		so := cudatest.Build(t)
		if fi, err := os.Stat(so); err != nil || fi.Size() == 0 {
			t.Fatalf("built %s: %v", so, err)
		}
		// The driver library is opened at its first use, in this process after this.
		t.Setenv("GOCUDA_CUDA_LIB", so)
	}
	cudatest.Check(t)
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		t.Fatal(err)
	}
	s, err := ctx.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range 3 {
		b, err := ctx.Alloc(s, 4096)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Memset8Async(s, 1); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
	m, err := ctx.LoadModule([]byte(".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry empty()\n{\n\tret;\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	f, err := m.Function("empty")
	if err != nil {
		t.Fatal(err)
	}
	if params, ok := f.Params(); !ok || len(params) != 0 {
		t.Fatalf("params of empty: %v, %v", params, ok)
	}
	if err := f.Launch(s, cuda.D1(1), cuda.D1(1), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
}
