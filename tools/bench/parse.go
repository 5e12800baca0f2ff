package main

import (
	"bufio"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// Result is one measurement: nanoseconds per operation over Iters operations.
type Result struct {
	Name  string  // benchmark name (GOMAXPROCS suffix removed) or floor workload ID
	Iters int64   // operations in the timed run
	NsOp  float64 // nanoseconds per operation
	// Extra holds a benchmark line's other metrics by unit (b.ReportMetric's), nil
	// without any.
	Extra map[string]float64
}

// FloorOutput is what tools/floor printed: its results, skips and info lines.
type FloorOutput struct {
	Results map[string]Result // by workload ID
	Skips   map[string]string // workload ID -> reason
	Info    map[string]string // e.g. "device" -> "NVIDIA H200", "driver" -> "13.0"
}

// ParseFloor reads floor's tab-separated lines (floor/skip/info); other lines are ignored.
func ParseFloor(r io.Reader) (FloorOutput, error) {
	out := FloorOutput{Results: map[string]Result{}, Skips: map[string]string{}, Info: map[string]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Split(strings.TrimRight(sc.Text(), "\r"), "\t")
		if len(f) < 3 {
			continue
		}
		switch f[0] {
		case "floor":
			ns, err := strconv.ParseFloat(strings.TrimSpace(f[2]), 64)
			if err != nil {
				continue
			}
			res := Result{Name: f[1], NsOp: ns}
			if len(f) > 3 {
				res.Iters, _ = strconv.ParseInt(strings.TrimSpace(f[3]), 10, 64)
			}
			out.Results[f[1]] = res
		case "skip":
			out.Skips[f[1]] = f[2]
		case "info":
			out.Info[f[1]] = f[2]
		}
	}
	return out, sc.Err()
}

var procSuffix = regexp.MustCompile(`-\d+$`)

// ParseBenchLine parses one line of `go test -bench` output in the standard format,
// "BenchmarkName-8   1000000   52.3 ns/op [more value unit pairs]". ok is false for any
// other line. The -GOMAXPROCS suffix is removed from the name.
func ParseBenchLine(line string) (r Result, ok bool) {
	f := strings.Fields(line)
	if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
		return Result{}, false
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return Result{}, false
	}
	r = Result{Name: procSuffix.ReplaceAllString(f[0], ""), Iters: n, NsOp: -1}
	for i := 2; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return Result{}, false
		}
		if f[i+1] == "ns/op" {
			r.NsOp = v
			continue
		}
		if r.Extra == nil {
			r.Extra = map[string]float64{}
		}
		r.Extra[f[i+1]] = v
	}
	if r.NsOp < 0 {
		return Result{}, false
	}
	return r, true
}

// ParseBench returns every benchmark result line in r, in order.
func ParseBench(r io.Reader) ([]Result, error) {
	var out []Result
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if res, ok := ParseBenchLine(sc.Text()); ok {
			out = append(out, res)
		}
	}
	return out, sc.Err()
}
