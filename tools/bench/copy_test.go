package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The copy rows: every direction, kind and size, in GB/s, each taking the name
// cuda's BenchmarkCopyBW prints for it, and floor.cu sizing them the same.
func TestCopyRows(t *testing.T) {
	ws, err := Select(workloads, `^copy/`)
	require.NoError(t, err)
	require.Len(t, ws, 24)
	_, src := floorTable(t)
	sizeC := map[string]string{"4KiB": "4u << 10", "1MiB": "1u << 20", "64MiB": "64u << 20", "1GiB": "1u << 30"}
	for _, w := range ws {
		parts := strings.Split(w.ID, "/")
		require.Len(t, parts, 4, w.ID)
		dir, kind, size := parts[1], parts[2], parts[3]
		assert.Contains(t, []string{"h2d", "d2h"}, dir)
		assert.Contains(t, copyKinds, kind)
		assert.Positive(t, w.Bytes, w.ID)
		r, ok, err := MatchGo(w.Go, map[string][]Result{"cuda": {
			{Name: "BenchmarkCopyBW/" + dir + "/" + kind + "/" + size},
			{Name: "BenchmarkCopyBW/" + dir + "/" + kind + "/" + size + "0"},
		}})
		require.NoError(t, err)
		require.True(t, ok, w.ID)
		assert.Equal(t, "BenchmarkCopyBW/"+dir+"/"+kind+"/"+size, r.Name)
		// floor.cu's function copies the row's size in the row's direction and kind.
		def := regexp.MustCompile(`static double ` + w.CFunc + `\(long n\) \{ return copy_run\(n, \(size_t\)\(([^)]+)\), (\d), (\w+)\); \}`).FindStringSubmatch(src)
		if assert.NotNil(t, def, "floor.cu's %s", w.CFunc) {
			assert.Equal(t, sizeC[size], def[1], w.ID)
			assert.Equal(t, map[string]string{"h2d": "1", "d2h": "0"}[dir], def[2], w.ID)
			assert.Equal(t, map[string]string{"pageable-warm": "kCopyWarm", "pageable-fresh": "kCopyFresh", "pinned": "kCopyPinned"}[kind], def[3], w.ID)
		}
	}
}

// The copy rows print GB/s beside the time and the ratio of bandwidths, Go / C.
func TestCopyReport(t *testing.T) {
	ws, err := Select(workloads, `^copy/(h2d/pinned/64MiB|d2h/pageable-warm/4KiB)$`)
	require.NoError(t, err)
	require.Len(t, ws, 2)
	floor := FloorOutput{Results: map[string]Result{
		"copy/h2d/pinned/64MiB":       {NsOp: 1220000},
		"copy/d2h/pageable-warm/4KiB": {NsOp: 5000},
	}}
	pkg := map[string][]Result{"cuda": {
		{Name: "BenchmarkCopyBW/h2d/pinned/64MiB", Iters: 400, NsOp: 1250000},
		{Name: "BenchmarkCopyBW/d2h/pageable-warm/4KiB", Iters: 100000, NsOp: 5200},
	}}
	rows, err := Join(ws, floor, pkg, map[string]RawResult{"copy/h2d/pinned/64MiB": {Result: Result{NsOp: 1220000}}})
	require.NoError(t, err)
	h2d := rows[slicesIndex(rows, "copy/h2d/pinned/64MiB")]
	assert.InDelta(t, float64(64<<20)/1220000, *h2d.FloorGBs, 1e-9)
	assert.InDelta(t, float64(64<<20)/1250000, *h2d.GoGBs, 1e-9)
	assert.InDelta(t, 1220000.0/1250000, *h2d.GBsRatio, 1e-9)
	assert.InDelta(t, 1250000.0/1220000, *h2d.Ratio, 1e-9, "the time ratio stays")
	var b strings.Builder
	require.NoError(t, WriteTable(&b, rows))
	assert.Regexp(t, `(?m)^copy/h2d/pinned/64MiB\s+1\.22 ms \(55\.0 GB/s\)\s+1\.25 ms \(53\.7 GB/s\)\s+0\.98× GB/s\s+1\.22 ms \(55\.0 GB/s\)\s+1\.00× GB/s\s+BenchmarkCopyBW/h2d/pinned/64MiB$`, b.String())
	assert.Regexp(t, `(?m)^copy/d2h/pageable-warm/4KiB\s+5\.00 µs \(0\.8 GB/s\)\s+5\.20 µs \(0\.8 GB/s\)\s+0\.96× GB/s\s+—\s+—\s+BenchmarkCopyBW/d2h/pageable-warm/4KiB$`, b.String())
	var md strings.Builder
	require.NoError(t, WriteMarkdown(&md, Report{PCIe: "PCIe 0000:1b:00.0: Gen5 x16 (32 GT/s): limit 63.0 GB/s per direction", Rows: rows}))
	assert.Contains(t, md.String(), "limit 63.0 GB/s per direction.")
	assert.Contains(t, md.String(), "| `copy/h2d/pinned/64MiB` | 1.22 ms (55.0 GB/s) |")
}

func slicesIndex(rows []Row, id string) int {
	for i, r := range rows {
		if r.ID == id {
			return i
		}
	}
	return -1
}

func TestReadPCIeLink(t *testing.T) {
	root := t.TempDir()
	dev := filepath.Join(root, "bus", "pci", "devices", "0000:1b:00.0")
	require.NoError(t, os.MkdirAll(dev, 0o755))
	write := func(name, v string) { require.NoError(t, os.WriteFile(filepath.Join(dev, name), []byte(v), 0o644)) }
	write("current_link_speed", "32.0 GT/s PCIe\n")
	write("current_link_width", "16\n")
	write("max_link_speed", "32.0 GT/s PCIe\n")
	write("max_link_width", "16\n")
	l := ReadPCIeLink(root, "0000:1B:00.0") // cuDeviceGetPCIBusId's upper case
	require.NoError(t, l.CurrentErr)
	assert.Equal(t, 32.0, l.Speed)
	assert.Equal(t, 16, l.Width)
	assert.Equal(t, "PCIe 0000:1b:00.0: Gen5 x16 (32 GT/s): limit 63.0 GB/s per direction", l.String())

	// An idle GPU slows its link: the maximum is shown too.
	write("current_link_speed", "2.5 GT/s PCIe\n")
	l = ReadPCIeLink(root, "0000:1b:00.0")
	assert.Equal(t, "PCIe 0000:1b:00.0: Gen1 x16 (2.5 GT/s): limit 4.0 GB/s per direction; max Gen5 x16: 63.0 GB/s", l.String())

	l = ReadPCIeLink(root, "0000:99:00.0")
	assert.Error(t, l.CurrentErr)
	assert.Contains(t, l.String(), "link unknown")

	assert.InDelta(t, 31.5, linkGBps(16, 16), 0.05)  // Gen4 x16
	assert.InDelta(t, 7.88, linkGBps(8, 8), 0.01)    // Gen3 x8
	assert.InDelta(t, 121.0, linkGBps(64, 16), 0.01) // Gen6 x16, FLIT
	assert.Equal(t, 6, pcieGen(64))
}
