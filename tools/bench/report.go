package main

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"text/tabwriter"
)

// Missing is printed where a number is absent (no Go benchmark, a skipped floor, ...).
const Missing = "—"

// RawResult is an in-process raw-layer measurement, or why there is none.
type RawResult struct {
	Result
	Err string
}

// Row is one workload's line of the report. Nil numbers are missing.
type Row struct {
	ID    string `json:"id"`
	Desc  string `json:"desc"`
	CFunc string `json:"c_func"`

	FloorNs    *float64 `json:"floor_ns"`
	FloorIters int64    `json:"floor_iters,omitempty"`
	FloorSkip  string   `json:"floor_skip,omitempty"`

	GoBench string   `json:"go_bench,omitempty"` // the package benchmark that matched
	GoNs    *float64 `json:"go_ns"`
	GoIters int64    `json:"go_iters,omitempty"`
	Ratio   *float64 `json:"ratio"` // GoNs / FloorNs
	// OneRatio is the Go side's median ratio to the same work in one goroutine on
	// one stream, in the same process (GoBench.Baseline).
	OneRatio *float64 `json:"one_ratio,omitempty"`

	RawNs    *float64 `json:"raw_ns"`
	RawIters int64    `json:"raw_iters,omitempty"`
	RawRatio *float64 `json:"raw_ratio"` // RawNs / FloorNs
	RawError string   `json:"raw_error,omitempty"`

	// The bandwidth rows (Workload.Bytes > 0): GB/s of each side, and the ratios of
	// bandwidths (Go / C: above 1 is faster than C, the inverse of Ratio).
	Bytes       int64    `json:"bytes,omitempty"`
	FloorGBs    *float64 `json:"floor_gbs,omitempty"`
	GoGBs       *float64 `json:"go_gbs,omitempty"`
	RawGBs      *float64 `json:"raw_gbs,omitempty"`
	GBsRatio    *float64 `json:"gbs_ratio,omitempty"`
	RawGBsRatio *float64 `json:"raw_gbs_ratio,omitempty"`

	// RatioRange is the lowest and highest of the rounds' own GoverC ratios (bench
	// -rounds N > 1): how far the comparison moved between processes.
	RatioRange []float64 `json:"ratio_range,omitempty"`
}

// GoverC is the row's ratio as the table shows it: Go / C bandwidth for a copy row,
// Go / C time otherwise; nil without both sides.
func (r Row) GoverC() *float64 {
	if r.Bytes > 0 {
		return r.GBsRatio
	}
	return r.Ratio
}

// Report is everything one run produced, as written to bench.json.
type Report struct {
	Device    string `json:"device,omitempty"`
	Driver    string `json:"driver,omitempty"`
	Benchtime string `json:"benchtime,omitempty"`
	PCIe      string `json:"pcie,omitempty"` // device 0's link and its limit (PCIeLink.String)
	// FloorSched is the scheduling flag the floor's context was given (floor -blocking-sync),
	// "" for the driver's default.
	FloorSched string `json:"floor_sched,omitempty"`
	Rounds     int    `json:"rounds,omitempty"` // the rounds each number is the median of
	Date       string `json:"date,omitempty"`   // the day of the run, UTC (2006-01-02)
	Rows       []Row  `json:"rows"`
}

func ptr(v float64) *float64 { return &v }

func ratio(a, b *float64) *float64 {
	if a == nil || b == nil || *b <= 0 {
		return nil
	}
	return ptr(*a / *b)
}

// MatchGo returns the first result of pkgResults that g selects, or false.
func MatchGo(g GoBench, pkgResults map[string][]Result) (Result, bool, error) {
	if g.Match == "" {
		return Result{}, false, nil
	}
	m, err := regexp.Compile(g.Match)
	if err != nil {
		return Result{}, false, fmt.Errorf("Match %q: %w", g.Match, err)
	}
	var ex *regexp.Regexp
	if g.Exclude != "" {
		if ex, err = regexp.Compile(g.Exclude); err != nil {
			return Result{}, false, fmt.Errorf("Exclude %q: %w", g.Exclude, err)
		}
	}
	for _, r := range pkgResults[g.Pkg] {
		if m.MatchString(r.Name) && (ex == nil || !ex.MatchString(r.Name)) {
			return r, true, nil
		}
	}
	return Result{}, false, nil
}

// Join lines the three measurements of each workload up by ID and computes the ratios.
// pkgResults is keyed by package directory (GoBench.Pkg), raw by workload ID.
func Join(ws []Workload, floor FloorOutput, pkgResults map[string][]Result, raw map[string]RawResult) ([]Row, error) {
	rows := make([]Row, 0, len(ws))
	for _, w := range ws {
		row := Row{ID: w.ID, Desc: w.Desc, CFunc: w.CFunc}
		if f, ok := floor.Results[w.ID]; ok {
			row.FloorNs, row.FloorIters = ptr(f.NsOp), f.Iters
		} else if why, ok := floor.Skips[w.ID]; ok {
			row.FloorSkip = why
		}
		g, ok, err := MatchGo(w.Go, pkgResults)
		if err != nil {
			return nil, fmt.Errorf("workload %s: %w", w.ID, err)
		}
		if ok {
			row.GoBench, row.GoNs, row.GoIters = g.Name, ptr(g.NsOp), g.Iters
			if w.Go.Metric != "" {
				row.GoNs = metric(g, w.Go.Metric)
			}
			row.OneRatio = metric(g, w.Go.Baseline)
		}
		if r, ok := raw[w.ID]; ok {
			if r.Err != "" {
				row.RawError = r.Err
			} else {
				row.RawNs, row.RawIters = ptr(r.NsOp), r.Iters
			}
		}
		row.Ratio = ratio(row.GoNs, row.FloorNs)
		row.RawRatio = ratio(row.RawNs, row.FloorNs)
		if w.Bytes > 0 {
			row.Bytes = w.Bytes
			row.FloorGBs, row.GoGBs, row.RawGBs = GBps(w.Bytes, row.FloorNs), GBps(w.Bytes, row.GoNs), GBps(w.Bytes, row.RawNs)
			row.GBsRatio, row.RawGBsRatio = ratio(row.GoGBs, row.FloorGBs), ratio(row.RawGBs, row.FloorGBs)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// metric returns r's metric of the unit, or nil.
func metric(r Result, unit string) *float64 {
	if v, ok := r.Extra[unit]; ok && unit != "" {
		return ptr(v)
	}
	return nil
}

// FormatNs renders nanoseconds per op with a unit that keeps 3-4 significant digits.
func FormatNs(ns *float64) string {
	if ns == nil {
		return Missing
	}
	v := *ns
	switch {
	case v < 1e3:
		return fmt.Sprintf("%.1f ns", v)
	case v < 1e6:
		return fmt.Sprintf("%.2f µs", v/1e3)
	case v < 1e9:
		return fmt.Sprintf("%.2f ms", v/1e6)
	default:
		return fmt.Sprintf("%.2f s", v/1e9)
	}
}

// FormatRatio renders a ratio as "1.23×".
func FormatRatio(r *float64) string {
	if r == nil {
		return Missing
	}
	return fmt.Sprintf("%.2f×", *r)
}

func orMissing(s string) string {
	if s == "" {
		return Missing
	}
	return s
}

// tableHeader is the column set of the text and markdown tables.
var tableHeader = []string{"workload", "C floor", "gocuda", "ratio", "raw layer", "raw ratio", "Go benchmark"}

// FormatBW renders a time per operation with its bandwidth: "1.23 ms (54.6 GB/s)".
func FormatBW(ns, gbs *float64) string {
	if gbs == nil {
		return FormatNs(ns)
	}
	return fmt.Sprintf("%s (%.1f GB/s)", FormatNs(ns), *gbs)
}

// FormatBWRatio renders a ratio of bandwidths, Go / C: "1.03× GB/s".
func FormatBWRatio(r *float64) string {
	if r == nil {
		return Missing
	}
	return fmt.Sprintf("%.2f× GB/s", *r)
}

func cells(r Row) []string {
	bw := r.Bytes > 0
	timeOrBW := func(ns, gbs *float64) string {
		if bw {
			return FormatBW(ns, gbs)
		}
		return FormatNs(ns)
	}
	ratioOf := func(t, b *float64) string {
		if bw {
			return FormatBWRatio(b)
		}
		return FormatRatio(t)
	}
	floor := timeOrBW(r.FloorNs, r.FloorGBs)
	if r.FloorNs == nil && r.FloorSkip != "" {
		floor = Missing + " (" + r.FloorSkip + ")"
	}
	raw := timeOrBW(r.RawNs, r.RawGBs)
	if r.RawError != "" {
		raw = Missing + " (error)"
	}
	rat := ratioOf(r.Ratio, r.GBsRatio)
	if len(r.RatioRange) == 2 {
		rat += fmt.Sprintf(" (%.2f–%.2f)", r.RatioRange[0], r.RatioRange[1])
	}
	goNs := timeOrBW(r.GoNs, r.GoGBs)
	if r.OneRatio != nil {
		goNs += fmt.Sprintf(" (%.2f× one goroutine)", *r.OneRatio)
	}
	return []string{r.ID, floor, goNs, rat, raw,
		ratioOf(r.RawRatio, r.RawGBsRatio), orMissing(r.GoBench)}
}

// WriteTable prints the rows as an aligned text table.
func WriteTable(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(tableHeader, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(cells(r), "\t"))
	}
	return tw.Flush()
}

// WriteMarkdown writes the report as BENCHMARKS.md: the machine and the date once,
// then one table per area (the workload ID's first element: launch, alloc, copy, ...),
// in the order the areas first appear, each row beside the C floor.
func WriteMarkdown(w io.Writer, rep Report) error {
	var b strings.Builder
	b.WriteString("# Benchmarks\n\n")
	b.WriteString("Written by `tools/bench` (`bash tools/bench/build.sh` where Go is, then `./.gpu/bench/bench` on the GPU machine, from the repository root). ")
	b.WriteString("Per operation; C floor = tools/floor (raw driver API in C), gocuda = the package's Go benchmark, " +
		"raw layer = the same loop on gocuda's generated bindings; ratio = Go / C time, " +
		"or for the copy rows Go / C bandwidth (\"× GB/s\": above 1 is faster than C); " +
		"\"(N× one goroutine)\" beside a gocuda number: the median of alternated rounds' ratios to the same work " +
		"done by one goroutine on one stream in the same process.")
	var what []string
	if rep.Device != "" {
		what = append(what, rep.Device)
	}
	if rep.Driver != "" {
		what = append(what, "driver "+rep.Driver)
	}
	if rep.Benchtime != "" {
		what = append(what, "benchtime "+rep.Benchtime)
	}
	if rep.Date != "" {
		what = append(what, rep.Date)
	}
	if len(what) > 0 {
		fmt.Fprintf(&b, " Measured on %s.", strings.Join(what, ", "))
	}
	if rep.PCIe != "" {
		fmt.Fprintf(&b, " %s.", rep.PCIe)
	}
	if rep.FloorSched != "" {
		fmt.Fprintf(&b, " The C floor's context has %s.", rep.FloorSched)
	}
	if rep.Rounds > 1 {
		fmt.Fprintf(&b, " Each number is the median of %d rounds of the three sides in turn; "+
			"in parentheses, the range of the rounds' own ratios.", rep.Rounds)
	}
	b.WriteString("\n")
	var areas []string
	byArea := map[string][]Row{}
	for _, r := range rep.Rows {
		a, _, _ := strings.Cut(r.ID, "/")
		if _, ok := byArea[a]; !ok {
			areas = append(areas, a)
		}
		byArea[a] = append(byArea[a], r)
	}
	for _, a := range areas {
		b.WriteString("\n## " + a + "\n\n")
		b.WriteString("| " + strings.Join(tableHeader, " | ") + " |\n")
		b.WriteString("|" + strings.Repeat("---|", len(tableHeader)) + "\n")
		for _, r := range byArea[a] {
			c := cells(r)
			c[0] = "`" + c[0] + "`"
			if r.GoBench != "" {
				c[6] = "`" + c[6] + "`"
			}
			for i := range c {
				c[i] = strings.ReplaceAll(c[i], "|", `\|`)
			}
			b.WriteString("| " + strings.Join(c, " | ") + " |\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON writes the report as indented JSON.
func WriteJSON(w io.Writer, rep Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(rep)
}

// WriteBenchFormat writes every number in the standard benchmark format, so that benchstat
// can read the file: BenchmarkFloor/<id> (C), the package benchmarks under their own names,
// and BenchmarkRaw/<id> (in-process raw layer). procs is the -GOMAXPROCS suffix (0: none).
func WriteBenchFormat(w io.Writer, rep Report, procs int) error {
	suffix := ""
	if procs > 0 {
		suffix = fmt.Sprintf("-%d", procs)
	}
	line := func(name string, n int64, ns float64) {
		fmt.Fprintf(w, "%s%s\t%8d\t%12.2f ns/op\n", name, suffix, n, ns)
	}
	fmt.Fprintln(w, "pkg: github.com/gocuda/gocuda/tools/bench")
	for _, r := range rep.Rows {
		if r.FloorNs != nil {
			line("BenchmarkFloor/"+r.ID, max(r.FloorIters, 1), *r.FloorNs)
		}
	}
	for _, r := range rep.Rows {
		if r.RawNs != nil {
			line("BenchmarkRaw/"+r.ID, max(r.RawIters, 1), *r.RawNs)
		}
	}
	seen := map[string]bool{}
	for _, r := range rep.Rows {
		if r.GoNs != nil && !seen[r.GoBench] {
			seen[r.GoBench] = true
			line(r.GoBench, max(r.GoIters, 1), *r.GoNs)
		}
	}
	return nil
}
