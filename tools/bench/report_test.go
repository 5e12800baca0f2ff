package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testWorkloads() []Workload {
	return []Workload{
		{ID: "call/CtxGetCurrent", Desc: "one call", CFunc: "w_call",
			Go: GoBench{Pkg: "cuda", Bench: "CallOverhead", Match: `^BenchmarkCallOverhead/CtxGetCurrent/go$`}},
		{ID: "alloc/device/4KiB", Desc: "alloc", CFunc: "w_alloc", Go: allocGo("device", "4KiB", false)},
		{ID: "alloc/device-pool/4KiB", Desc: "alloc pool", CFunc: "w_alloc_pool", Go: allocGo("device", "4KiB", true)},
		{ID: "graph/graph10", Desc: "graph", CFunc: "w_graph"},
	}
}

func testInputs() (FloorOutput, map[string][]Result, map[string]RawResult) {
	floor := FloorOutput{
		Results: map[string]Result{
			"call/CtxGetCurrent": {Name: "call/CtxGetCurrent", Iters: 1000, NsOp: 10},
			"alloc/device/4KiB":  {Name: "alloc/device/4KiB", Iters: 10, NsOp: 8000},
		},
		Skips: map[string]string{"alloc/device-pool/4KiB": "CUDA_ERROR_NOT_SUPPORTED"},
		Info:  map[string]string{"device": "NVIDIA H200", "driver": "13.0"},
	}
	pkg := map[string][]Result{"cuda": {
		{Name: "BenchmarkCallOverhead/CtxGetCurrent/c", Iters: 5, NsOp: 9},
		{Name: "BenchmarkCallOverhead/CtxGetCurrent/go", Iters: 7, NsOp: 55},
		{Name: "BenchmarkAlloc/device-pool/4KiB", Iters: 8, NsOp: 2500},
		{Name: "BenchmarkAlloc/device/4KiB", Iters: 9, NsOp: 8800},
	}}
	raw := map[string]RawResult{
		"call/CtxGetCurrent": {Result: Result{Name: "BenchmarkRaw/call/CtxGetCurrent", Iters: 100, NsOp: 52}},
		"graph/graph10":      {Err: "cuGraphLaunch: boom"},
	}
	return floor, pkg, raw
}

func TestJoin(t *testing.T) {
	floor, pkg, raw := testInputs()
	rows, err := Join(testWorkloads(), floor, pkg, raw)
	require.NoError(t, err)
	require.Len(t, rows, 4)

	call := rows[0]
	assert.Equal(t, "BenchmarkCallOverhead/CtxGetCurrent/go", call.GoBench)
	assert.InDelta(t, 55, *call.GoNs, 1e-9)
	assert.InDelta(t, 5.5, *call.Ratio, 1e-9)
	assert.InDelta(t, 5.2, *call.RawRatio, 1e-9)
	assert.Equal(t, int64(1000), call.FloorIters)

	dev := rows[1] // gocuda has no plain cuMemAlloc path: no Go side
	assert.Empty(t, dev.GoBench)
	assert.Nil(t, dev.Ratio)
	assert.Nil(t, dev.RawNs)
	assert.Nil(t, dev.RawRatio)

	pool := rows[2] // the pool row takes cuda's BenchmarkAlloc/device
	assert.Equal(t, "BenchmarkAlloc/device/4KiB", pool.GoBench)
	assert.Nil(t, pool.FloorNs)
	assert.Equal(t, "CUDA_ERROR_NOT_SUPPORTED", pool.FloorSkip)
	assert.Nil(t, pool.Ratio)

	g := rows[3]
	assert.Empty(t, g.GoBench)
	assert.Nil(t, g.GoNs)
	assert.Nil(t, g.FloorNs)
	assert.Equal(t, "cuGraphLaunch: boom", g.RawError)
}

// A row of a two-sided benchmark takes its Go number and its ratio to one goroutine
// from the metrics GoBench names, and the table shows the ratio beside the number.
func TestJoinBaseline(t *testing.T) {
	ws := []Workload{{ID: "pipeline/ring", Go: shapeGo("ring", "pipe")}}
	pkg := map[string][]Result{"cuda": {{Name: "BenchmarkPipelineShapes/ring", Iters: 1, NsOp: 30000,
		Extra: map[string]float64{"one-ns/op": 9500, "pipe-ns/op": 12000, "pipe/one-med": 1.25}}}}
	floor := FloorOutput{Results: map[string]Result{"pipeline/ring": {NsOp: 10000}}}
	rows, err := Join(ws, floor, pkg, nil)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	assert.InDelta(t, 12000, *rows[0].GoNs, 1e-9)
	assert.InDelta(t, 1.2, *rows[0].Ratio, 1e-9)
	assert.InDelta(t, 1.25, *rows[0].OneRatio, 1e-9)
	assert.Equal(t, "12.00 µs (1.25× one goroutine)", cells(rows[0])[2])

	pkg["cuda"][0].Extra = nil // an older binary: no such metrics
	rows, err = Join(ws, floor, pkg, nil)
	require.NoError(t, err)
	assert.Nil(t, rows[0].GoNs)
	assert.Nil(t, rows[0].OneRatio)
}

func TestJoinBadRegexp(t *testing.T) {
	_, err := Join([]Workload{{ID: "x", Go: GoBench{Pkg: "cuda", Match: "("}}}, FloorOutput{}, nil, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "workload x")
}

func TestFormat(t *testing.T) {
	assert.Equal(t, Missing, FormatNs(nil))
	assert.Equal(t, "52.3 ns", FormatNs(ptr(52.31)))
	assert.Equal(t, "3.19 µs", FormatNs(ptr(3187)))
	assert.Equal(t, "46.30 ms", FormatNs(ptr(46.3e6)))
	assert.Equal(t, "1.50 s", FormatNs(ptr(1.5e9)))
	assert.Equal(t, Missing, FormatRatio(nil))
	assert.Equal(t, "1.06×", FormatRatio(ptr(1.0612)))
	assert.Nil(t, ratio(ptr(1), ptr(0)))
	assert.Nil(t, ratio(nil, ptr(1)))
}

func TestWriteTable(t *testing.T) {
	floor, pkg, raw := testInputs()
	rows, err := Join(testWorkloads(), floor, pkg, raw)
	require.NoError(t, err)
	var b bytes.Buffer
	require.NoError(t, WriteTable(&b, rows))
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	require.Len(t, lines, 5)
	assert.Regexp(t, `^workload\s+C floor\s+gocuda\s+ratio\s+raw layer\s+raw ratio\s+Go benchmark$`, lines[0])
	assert.Regexp(t, `^call/CtxGetCurrent\s+10\.0 ns\s+55\.0 ns\s+5\.50×\s+52\.0 ns\s+5\.20×\s+BenchmarkCallOverhead/CtxGetCurrent/go$`, lines[1])
	assert.Regexp(t, `^alloc/device-pool/4KiB\s+— \(CUDA_ERROR_NOT_SUPPORTED\)\s+8\.80 µs\s+—\s+—\s+—\s+BenchmarkAlloc/device/4KiB$`, lines[3])
	assert.Regexp(t, `^graph/graph10\s+—\s+—\s+—\s+— \(error\)\s+—\s+—$`, lines[4])
}

func TestWriteMarkdown(t *testing.T) {
	floor, pkg, raw := testInputs()
	rows, err := Join(testWorkloads(), floor, pkg, raw)
	require.NoError(t, err)
	var b bytes.Buffer
	require.NoError(t, WriteMarkdown(&b, Report{Device: "NVIDIA H200", Driver: "13.0", Benchtime: "500ms", Date: "2026-12-04", Rows: rows}))
	md := b.String()
	assert.True(t, strings.HasPrefix(md, "# Benchmarks\n\n"), md)
	assert.Contains(t, md, "Measured on NVIDIA H200, driver 13.0, benchtime 500ms, 2026-12-04.")
	assert.Equal(t, 1, strings.Count(md, "Measured on"), "the machine once")
	assert.Contains(t, md, "\n## call\n\n| workload")
	assert.Contains(t, md, "\n## graph\n\n| workload")
	assert.Less(t, strings.Index(md, "## call"), strings.Index(md, "`call/CtxGetCurrent`"))
	assert.Less(t, strings.Index(md, "`call/CtxGetCurrent`"), strings.Index(md, "## graph"))
	assert.Contains(t, md, "| workload | C floor | gocuda | ratio | raw layer | raw ratio | Go benchmark |\n|---|---|---|---|---|---|---|\n")
	assert.Contains(t, md, "| `call/CtxGetCurrent` | 10.0 ns | 55.0 ns | 5.50× | 52.0 ns | 5.20× | `BenchmarkCallOverhead/CtxGetCurrent/go` |\n")
	assert.Contains(t, md, "| `graph/graph10` | — | — | — | — (error) | — | — |\n")
	assert.NotContains(t, md, "The C floor's context")

	b.Reset()
	require.NoError(t, WriteMarkdown(&b, Report{Device: "NVIDIA H200", FloorSched: "CU_CTX_SCHED_BLOCKING_SYNC", Rows: rows}))
	assert.Contains(t, b.String(), " The C floor's context has CU_CTX_SCHED_BLOCKING_SYNC.\n\n## ")
}

func TestWriteJSON(t *testing.T) {
	floor, pkg, raw := testInputs()
	rows, err := Join(testWorkloads(), floor, pkg, raw)
	require.NoError(t, err)
	var b bytes.Buffer
	require.NoError(t, WriteJSON(&b, Report{Device: "NVIDIA H200", Rows: rows}))
	var back struct {
		Device string           `json:"device"`
		Rows   []map[string]any `json:"rows"`
	}
	require.NoError(t, json.Unmarshal(b.Bytes(), &back))
	assert.Equal(t, "NVIDIA H200", back.Device)
	require.Len(t, back.Rows, 4)
	assert.Equal(t, "call/CtxGetCurrent", back.Rows[0]["id"])
	assert.InDelta(t, 5.5, back.Rows[0]["ratio"], 1e-9)
	assert.Nil(t, back.Rows[3]["floor_ns"]) // missing numbers are null, not 0
	assert.Contains(t, back.Rows[3], "floor_ns")
	assert.Equal(t, "cuGraphLaunch: boom", back.Rows[3]["raw_error"])
}

func TestWriteBenchFormat(t *testing.T) {
	floor, pkg, raw := testInputs()
	rows, err := Join(testWorkloads(), floor, pkg, raw)
	require.NoError(t, err)
	var b bytes.Buffer
	require.NoError(t, WriteBenchFormat(&b, Report{Rows: rows}, 16))
	// Every line it writes parses back as a benchmark line with the same numbers.
	res, err := ParseBench(&b)
	require.NoError(t, err)
	var names []string
	for _, r := range res {
		names = append(names, r.Name)
	}
	assert.Equal(t, []string{
		"BenchmarkFloor/call/CtxGetCurrent", "BenchmarkFloor/alloc/device/4KiB",
		"BenchmarkRaw/call/CtxGetCurrent",
		"BenchmarkCallOverhead/CtxGetCurrent/go", "BenchmarkAlloc/device/4KiB",
	}, names)
	assert.InDelta(t, 8000, res[1].NsOp, 1e-9)
	assert.Equal(t, int64(10), res[1].Iters)
}

// TestRatioRanges: with several rounds, each row with both sides gets the range of
// the rounds' own ratios, and the markdown shows it beside the median's ratio; the
// report names the rounds.
func TestRatioRanges(t *testing.T) {
	ws := testWorkloads()
	var floors []FloorOutput
	var pkgs []map[string][]Result
	var raws []map[string]RawResult
	for _, goNs := range []float64{40, 55, 70} {
		f, p, r := testInputs()
		p["cuda"][1].NsOp = goNs // call/CtxGetCurrent's Go side; its C side is 10 ns
		floors, pkgs, raws = append(floors, f), append(pkgs, p), append(raws, r)
	}
	rows, err := Join(ws, medianFloor(floors), medianPkg(pkgs), medianRaw(raws))
	require.NoError(t, err)
	require.NoError(t, setRatioRanges(rows, ws, floors, pkgs, raws))
	assert.Equal(t, []float64{4, 7}, rows[0].RatioRange)
	assert.InDeltaSlice(t, []float64{1.1, 1.1}, rows[1].RatioRange, 1e-9, "alloc/device/4KiB: the same in every round")
	assert.Nil(t, rows[2].RatioRange, "no C side")
	assert.Nil(t, rows[3].RatioRange, "no Go side")

	var b bytes.Buffer
	require.NoError(t, WriteMarkdown(&b, Report{Rounds: 3, Rows: rows}))
	md := b.String()
	assert.Contains(t, md, "| `call/CtxGetCurrent` | 10.0 ns | 55.0 ns | 5.50× (4.00–7.00) |")
	assert.Contains(t, md, "median of 3 rounds")

	rows[0].RatioRange = nil
	require.NoError(t, setRatioRanges(rows, ws, floors[:1], pkgs[:1], raws[:1]))
	assert.Nil(t, rows[0].RatioRange, "one round: no range")
}
