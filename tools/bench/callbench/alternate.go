package callbench

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// Side is one contestant of Alternate: Run does k iterations and returns the time
// they took (only what is to be timed).
type Side struct {
	Name string
	Run  func(k int) (time.Duration, error)
}

// Loop returns a Side that times k calls of f from Go.
func Loop(name string, f func() error) Side {
	return Side{Name: name, Run: func(k int) (time.Duration, error) {
		t0 := time.Now()
		for range k {
			if err := f(); err != nil {
				return 0, err
			}
		}
		return time.Since(t0), nil
	}}
}

// Alternate runs b.N iterations of each side in chunks of chunk iterations, the
// sides taking turns (their order rotating each round) with sync after each chunk,
// off the sides' clocks, so that all see the same state of the machine: the fair
// way to compare costs that move between processes and runs. It reports each
// side's mean time per iteration (NAME-ns/op), and its ratio to the first side's
// (NAME/FIRST) and difference from it (NAME-FIRST-ns). With three rounds or more it
// also reports the median of the rounds' ratios (NAME/FIRST-med): a burst of the
// machine's noise in one side's turn moves the ratio of the sums, not the median.
func Alternate(b *testing.B, chunk int, sync func() error, sides ...Side) {
	b.Helper()
	AlternateRounds(b, chunk, 0, sync, sides...)
}

// AlternateRounds is Alternate that runs at least rounds full rounds of chunk
// iterations per side, more when b.N asks for more, and logs every full round's
// ratios to the first side (the spread a judgement by the median needs beside it).
// The per-iteration metrics divide by the iterations run.
func AlternateRounds(b *testing.B, chunk, rounds int, sync func() error, sides ...Side) {
	b.Helper()
	times := make([]time.Duration, len(sides))
	round := make([]time.Duration, len(sides))
	ratios := make([][]float64, len(sides)) // per side, each full round's ratio to the first side
	b.ResetTimer()
	done := 0
	for r := 0; done < b.N || r < rounds; r++ {
		k := chunk
		if r >= rounds {
			k = min(chunk, b.N-done)
		}
		for j := range sides {
			i := (j + r) % len(sides)
			d, err := sides[i].Run(k)
			if err != nil {
				b.Fatalf("%s: %v", sides[i].Name, err)
			}
			times[i] += d
			round[i] = d
			if err := sync(); err != nil {
				b.Fatal(err)
			}
		}
		done += k
		if k == chunk && round[0] > 0 {
			for i := 1; i < len(sides); i++ {
				ratios[i] = append(ratios[i], float64(round[i])/float64(round[0]))
			}
		}
	}
	b.StopTimer()
	for i, s := range sides {
		b.ReportMetric(float64(times[i].Nanoseconds())/float64(done), s.Name+"-ns/op")
		if i > 0 {
			if rounds > 0 {
				b.Logf("%s/%s by round: %s", s.Name, sides[0].Name, formatRatios(ratios[i]))
			}
			b.ReportMetric(float64(times[i])/float64(times[0]), s.Name+"/"+sides[0].Name)
			b.ReportMetric(float64((times[i]-times[0]).Nanoseconds())/float64(done), s.Name+"-"+sides[0].Name+"-ns")
			if len(ratios[i]) >= 3 {
				b.ReportMetric(median(ratios[i]), s.Name+"/"+sides[0].Name+"-med")
			}
		}
	}
}

func formatRatios(v []float64) string {
	var b strings.Builder
	for i, x := range v {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.3f", x)
	}
	return b.String()
}

// median returns the median of v (the mean of the middle two for an even count),
// sorting v.
func median(v []float64) float64 {
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}
