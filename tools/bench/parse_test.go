package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseBenchLine(t *testing.T) {
	cases := []struct {
		line string
		ok   bool
		want Result
	}{
		{"BenchmarkCallOverhead/CtxGetCurrent/go-16   \t22861434\t        52.31 ns/op", true,
			Result{Name: "BenchmarkCallOverhead/CtxGetCurrent/go", Iters: 22861434, NsOp: 52.31}},
		{"BenchmarkLaunchEmpty-8  300000  3187 ns/op  0 B/op  0 allocs/op", true,
			Result{Name: "BenchmarkLaunchEmpty", Iters: 300000, NsOp: 3187, Extra: map[string]float64{"B/op": 0, "allocs/op": 0}}},
		{"BenchmarkAlloc/pinned/64MiB   \t      22\t  46298040 ns/op", true, // GOMAXPROCS=1: no suffix
			Result{Name: "BenchmarkAlloc/pinned/64MiB", Iters: 22, NsOp: 46298040}},
		{"BenchmarkX-4  100  12.5 MB/s  7.5 ns/op", true, Result{Name: "BenchmarkX", Iters: 100, NsOp: 7.5, Extra: map[string]float64{"MB/s": 12.5}}},
		{"BenchmarkPipelineShapes/ring-16  1  30000 ns/op  9500 one-ns/op  12000 pipe-ns/op  1.26 pipe/one  1.25 pipe/one-med", true,
			Result{Name: "BenchmarkPipelineShapes/ring", Iters: 1, NsOp: 30000,
				Extra: map[string]float64{"one-ns/op": 9500, "pipe-ns/op": 12000, "pipe/one": 1.26, "pipe/one-med": 1.25}}},
		{"BenchmarkX-4  100  7.5 ns/op  x B/op", false, Result{}},
		{"BenchmarkCallOverhead", false, Result{}},
		{"BenchmarkCallOverhead/CtxGetCurrent/go-16  --- SKIP: no GPU", false, Result{}},
		{"PASS", false, Result{}},
		{"ok  \tgithub.com/gocuda/gocuda/cuda\t3.2s", false, Result{}},
		{"goos: linux", false, Result{}},
		{"BenchmarkX-4  100  12 MB/s", false, Result{}},
	}
	for _, c := range cases {
		got, ok := ParseBenchLine(c.line)
		assert.Equal(t, c.ok, ok, c.line)
		assert.Equal(t, c.want, got, c.line)
	}
}

func TestParseBench(t *testing.T) {
	out := `goos: linux
goarch: amd64
pkg: github.com/gocuda/gocuda/cuda
cpu: AMD EPYC
BenchmarkCallOverhead/CtxGetCurrent/go-16         	22861434	        52.31 ns/op
BenchmarkCallOverhead/CtxGetCurrent/c-16          	150000000	         8.02 ns/op
--- SKIP: BenchmarkAlloc
PASS
`
	res, err := ParseBench(strings.NewReader(out))
	require.NoError(t, err)
	require.Len(t, res, 2)
	assert.Equal(t, "BenchmarkCallOverhead/CtxGetCurrent/c", res[1].Name)
	assert.InDelta(t, 8.02, res[1].NsOp, 1e-9)
}

func TestParseFloor(t *testing.T) {
	out := "info\tdevice\tNVIDIA H200\n" +
		"info\tdriver\t13.0\n" +
		"bench: noise line\n" +
		"floor\tlaunch/empty\t3187.250\t200000\n" +
		"floor\tcall/CtxGetCurrent\t8.1\n" +
		"floor\tbad\tnotanumber\t1\n" +
		"skip\talloc/pinned-pool/4KiB\tCUDA_ERROR_NOT_SUPPORTED\n"
	f, err := ParseFloor(strings.NewReader(out))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"device": "NVIDIA H200", "driver": "13.0"}, f.Info)
	assert.Equal(t, map[string]Result{
		"launch/empty":       {Name: "launch/empty", Iters: 200000, NsOp: 3187.25},
		"call/CtxGetCurrent": {Name: "call/CtxGetCurrent", NsOp: 8.1},
	}, f.Results)
	assert.Equal(t, map[string]string{"alloc/pinned-pool/4KiB": "CUDA_ERROR_NOT_SUPPORTED"}, f.Skips)
}
