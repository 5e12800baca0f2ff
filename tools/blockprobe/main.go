// Command blockprobe measures, for every release function in the [[resource]] tables of
// headers/*.toml, whether it waits for unrelated GPU work: it makes the resource through the
// generated raw layer, starts a ~500 ms spin kernel on another stream, calls the release, and
// reports how long (a) the caller and (b) a kernel launch from another OS thread were held.
// With -check it exits non-zero when a release classed non-blocking blocked (> 1 ms), one
// classed blocking did not (candidates to reclassify), a row has no probe, or a probe failed.
// Another function that releases a row's resource (ncclCommAbort beside ncclCommDestroy) is
// measured and reported too, classed "none" and not judged: the row's class is its destroy's.
//
// Build here (bash tools/bench/build.sh), then on the GPU machine, from the repository root:
//
//	./.gpu/bench/blockprobe -check -o "$OUT"
//
// (or `go run ./tools/blockprobe -check` where Go and a GPU are both present). Output is one
// line per release: block<TAB><destroy><TAB>classed <class><TAB>caller <ms> ms<TAB>other-thread
// launch <ms> ms<TAB><verdict>; -o DIR also writes blockprobe.md and blockprobe.tsv there.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"
)

func init() {
	// The CUDA context is current per OS thread: keep main on one.
	runtime.LockOSThread()
}

func main() {
	headers := flag.String("headers", "headers", "directory of the *.toml specs")
	check := flag.Bool("check", false, "exit 1 when a measurement disagrees with its class, a probe is missing or fails")
	out := flag.String("o", "", "directory for blockprobe.md and blockprobe.tsv")
	spin := flag.Duration("spin", 500*time.Millisecond, "how long the spin kernel runs")
	only := flag.String("only", "", "regexp: only destroy functions that match")
	flag.Parse()
	outs, spinMs, err := run(*headers, *spin, *only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "blockprobe:", err)
		os.Exit(1)
	}
	if *out != "" {
		if err := os.MkdirAll(*out, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "blockprobe:", err)
			os.Exit(1)
		}
		if err := os.WriteFile(filepath.Join(*out, "blockprobe.md"), []byte(Markdown(outs, spinMs)), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "blockprobe:", err)
			os.Exit(1)
		}
		if err := WriteTSV(filepath.Join(*out, "blockprobe.tsv"), outs); err != nil {
			fmt.Fprintln(os.Stderr, "blockprobe:", err)
			os.Exit(1)
		}
	}
	failed := Failures(outs)
	fmt.Printf("blockprobe: %d rows, %d disagree, have no probe or failed\n", len(outs), len(failed))
	for _, o := range failed {
		fmt.Printf("  %s: %s\n", o.Name, o.verdictText())
	}
	if *check && len(failed) > 0 {
		os.Exit(1)
	}
}

// Failures returns the outcomes that fail -check.
func Failures(outs []Outcome) []Outcome {
	var f []Outcome
	for _, o := range outs {
		if o.Verdict.Failed() {
			f = append(f, o)
		}
	}
	return f
}

// Plan is one probe to run: which release, its class, how to make it.
type Plan struct {
	Name     string
	Lib      string
	Blocking bool
	Probe    *Probe // nil: no probe
	// Info marks a probe of another release than the row's destroy (Probe.Release):
	// measured and reported, never judged against Blocking.
	Info bool
}

// Plans lists what to probe for the resource rows: one plan per probe variant of each
// destroy function (a destroy with no probe gives one plan with a nil Probe), then the
// reference calls.
func Plans(rows []Resource) []Plan {
	var plans []Plan
	for _, r := range rows {
		ps := probes[r.Destroy]
		if len(ps) == 0 {
			plans = append(plans, Plan{Name: r.Destroy, Lib: r.Lib, Blocking: r.Blocking})
			continue
		}
		for i := range ps {
			name := r.Destroy
			if ps[i].Release != "" {
				name = ps[i].Release
			}
			if ps[i].Variant != "" {
				name += " (" + ps[i].Variant + ")"
			}
			plans = append(plans, Plan{Name: name, Lib: r.Lib, Blocking: r.Blocking, Probe: &ps[i], Info: ps[i].Release != ""})
		}
	}
	for i := range references {
		plans = append(plans, Plan{Name: references[i].Name, Lib: "cuda", Blocking: references[i].Blocking, Probe: &references[i].Probe})
	}
	return plans
}

func run(headers string, spin time.Duration, only string) ([]Outcome, float64, error) {
	rows, err := LoadResources(headers)
	if err != nil {
		return nil, 0, err
	}
	var filter *regexp.Regexp
	if only != "" {
		if filter, err = regexp.Compile(only); err != nil {
			return nil, 0, fmt.Errorf("-only: %w", err)
		}
	}
	env, err := NewEnv(spin)
	if err != nil {
		return nil, 0, err
	}
	lasted, err := env.SpinOnce()
	if err != nil {
		return nil, 0, fmt.Errorf("spin kernel: %w", err)
	}
	spinMs := float64(lasted.Microseconds()) / 1e3
	fmt.Printf("spin kernel lasts %.1f ms\n", spinMs)
	if lasted < spin/2 {
		return nil, spinMs, fmt.Errorf("spin kernel lasted %v, asked for %v", lasted, spin)
	}
	var outs []Outcome
	for _, p := range Plans(rows) {
		if filter != nil && !filter.MatchString(p.Name) {
			continue
		}
		outs = append(outs, probeOne(env, p))
	}
	SettleVariants(outs)
	for _, o := range outs {
		fmt.Println(o.Line())
	}
	return outs, spinMs, nil
}

// SettleVariants judges a release over all its variants: a release classed blocking is
// right if any way of making its object blocks (a fresh csrilu02 info's destroy does,
// an analysed one's does not), so its variants that did not block are ok too. Outcomes
// of other releases than a row's destroy (Info) neither settle nor are settled.
func SettleVariants(outs []Outcome) {
	base := func(name string) string { n, _, _ := strings.Cut(name, " ("); return n }
	blocked := map[string]bool{}
	for _, o := range outs {
		if o.Measured && !o.Info && o.CallerMs > BlockThresholdMs {
			blocked[base(o.Name)] = true
		}
	}
	for i := range outs {
		if outs[i].Verdict == VerdictDoesNotBlock && blocked[base(outs[i].Name)] {
			outs[i].Verdict = VerdictOK
			outs[i].Detail = "another variant blocks"
		}
	}
}

// probeOne measures one plan. A release classed non-blocking that blocked is measured once
// more (a one-off stall, e.g. a page fault or GC, only adds time); the faster try is kept.
// A plan of another release than the row's destroy (Info) is measured once and reported
// with VerdictInfo.
func probeOne(env *Env, p Plan) Outcome {
	o := Outcome{Name: p.Name, Lib: p.Lib, Blocking: p.Blocking, Info: p.Info}
	if p.Probe == nil {
		o.Verdict = VerdictNoProbe
		return o
	}
	tries := 1
	if !p.Blocking && !p.Info {
		tries = 2
	}
	for try := 0; try < tries; try++ {
		release, cleanup, err := p.Probe.Make(env)
		if err != nil {
			o.Verdict, o.Detail, o.Measured = VerdictError, "create: "+err.Error(), false
			return o
		}
		caller, other, err := env.Measure(release)
		cleanup()
		if err != nil {
			o.Verdict, o.Detail, o.Measured = VerdictError, err.Error(), false
			return o
		}
		c, t := float64(caller.Nanoseconds())/1e6, float64(other.Nanoseconds())/1e6
		if !o.Measured || c < o.CallerMs {
			o.CallerMs, o.OtherMs, o.Measured = c, t, true
		}
		if p.Info {
			o.Verdict, o.Detail = VerdictInfo, blockedText(o.CallerMs)
			break
		}
		o.Verdict = Classify(p.Blocking, o.CallerMs)
		if o.Verdict == VerdictOK {
			break
		}
	}
	return o
}
