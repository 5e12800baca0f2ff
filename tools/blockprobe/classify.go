package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

// Resource is one [[resource]] row of a headers/*.toml spec.
type Resource struct {
	Lib      string   `toml:"-"` // the spec's file name without .toml, e.g. "cublas"
	Type     string   `toml:"type"`
	Go       string   `toml:"go"`
	Create   []string `toml:"create"`
	Destroy  string   `toml:"destroy"`
	Blocking bool     `toml:"blocking"`
	Why      string   `toml:"why"`
}

// LoadResources reads the [[resource]] rows of every *.toml in dir, in file-name order.
func LoadResources(dir string) ([]Resource, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.toml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no *.toml in %s (give -headers)", dir)
	}
	sort.Strings(files)
	var out []Resource
	for _, f := range files {
		var spec struct {
			Resource []Resource `toml:"resource"`
		}
		if _, err := toml.DecodeFile(f, &spec); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		lib := strings.TrimSuffix(filepath.Base(f), ".toml")
		for _, r := range spec.Resource {
			r.Lib = lib
			out = append(out, r)
		}
	}
	return out, nil
}

// BlockThresholdMs is the caller time above which a release counts as blocked. The spin
// kernel lasts about 500 ms, so a release that waits for it takes ~500 ms and one that does
// not takes microseconds; 1 ms sits far from both.
const BlockThresholdMs = 1.0

// Verdict is the outcome of one probe.
type Verdict string

// The verdicts. Failed reports which of them make -check exit non-zero.
const (
	VerdictOK              Verdict = "ok"
	VerdictBlocksUnclassed Verdict = "RECLASSIFY: blocked, classed non-blocking"
	VerdictDoesNotBlock    Verdict = "RECLASSIFY: did not block, classed blocking"
	VerdictNoProbe         Verdict = "no probe"
	VerdictError           Verdict = "error"
	// VerdictInfo is a measurement of another release than the row's destroy
	// (Probe.Release): reported with whether it blocked, never judged.
	VerdictInfo Verdict = "not judged (not the row's destroy)"
)

// Failed reports whether v fails -check.
func (v Verdict) Failed() bool { return v != VerdictOK && v != VerdictInfo }

// blockedText says whether a release that held its caller callerMs blocked.
func blockedText(callerMs float64) string {
	if callerMs > BlockThresholdMs {
		return "blocked"
	}
	return "did not block"
}

// Classify compares what was measured with the resource table's class: a release classed
// non-blocking must not block its caller for more than BlockThresholdMs while unrelated GPU
// work runs; one classed blocking must (else it is a candidate to reclassify as non-blocking).
func Classify(blocking bool, callerMs float64) Verdict {
	blocked := callerMs > BlockThresholdMs
	switch {
	case blocked == blocking:
		return VerdictOK
	case blocked:
		return VerdictBlocksUnclassed
	default:
		return VerdictDoesNotBlock
	}
}

// Outcome is one printed row: a release (or the reference call), its class and what happened.
type Outcome struct {
	Name     string // the destroy function, with the variant in parentheses, e.g. "cuMemFree_v2 (managed)"
	Lib      string
	Blocking bool // the class in the resource table
	Measured bool // false: no probe or an error; the times are then meaningless
	CallerMs float64
	OtherMs  float64 // a kernel launch from another OS thread, issued ~20 ms into the release
	Verdict  Verdict
	Detail   string // the error, for VerdictError; "blocked" or "did not block", for VerdictInfo
	Info     bool   // another release than the row's destroy: not judged
}

func class(blocking bool) string {
	if blocking {
		return "blocking"
	}
	return "non-blocking"
}

// classText is the outcome's class as printed: the row's, or "none" for a release that
// is not the row's destroy and so has no class of its own.
func (o Outcome) classText() string {
	if o.Info {
		return "none"
	}
	return class(o.Blocking)
}

func ms(measured bool, v float64) string {
	if !measured {
		return "-"
	}
	return fmt.Sprintf("%.3f", v)
}

func (o Outcome) verdictText() string {
	if o.Detail != "" {
		return string(o.Verdict) + ": " + o.Detail
	}
	return string(o.Verdict)
}

// Line is the outcome's output line:
// block<TAB><destroy><TAB>classed <class><TAB>caller <ms> ms<TAB>other-thread launch <ms> ms<TAB><verdict>.
func (o Outcome) Line() string {
	return fmt.Sprintf("block\t%s\tclassed %s\tcaller %s ms\tother-thread launch %s ms\t%s",
		o.Name, o.classText(), ms(o.Measured, o.CallerMs), ms(o.Measured, o.OtherMs), o.verdictText())
}

// WriteTSV writes the outcomes as a tab-separated table with a header line.
func WriteTSV(path string, outs []Outcome) error {
	var b strings.Builder
	b.WriteString("destroy\tlib\tclass\tcaller_ms\tother_thread_launch_ms\tverdict\n")
	for _, o := range outs {
		fmt.Fprintf(&b, "%s\t%s\t%s\t%s\t%s\t%s\n", o.Name, o.Lib, o.classText(), ms(o.Measured, o.CallerMs), ms(o.Measured, o.OtherMs), o.verdictText())
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// Markdown renders the outcomes as a markdown table.
func Markdown(outs []Outcome, spinMs float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Each release called while a %.0f ms spin kernel runs on an unrelated stream; "+
		"a kernel launch from another OS thread is issued meanwhile. Blocked = caller > %g ms.\n\n", spinMs, BlockThresholdMs)
	b.WriteString("| release | lib | classed | caller | other-thread launch | verdict |\n|---|---|---|---|---|---|\n")
	for _, o := range outs {
		c, t := ms(o.Measured, o.CallerMs), ms(o.Measured, o.OtherMs)
		if o.Measured {
			c, t = c+" ms", t+" ms"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", o.Name, o.Lib, o.classText(), c, t,
			strings.ReplaceAll(o.verdictText(), "|", `\|`))
	}
	return b.String()
}
