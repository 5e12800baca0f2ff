package callbench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAlternate: every side runs b.N iterations in chunks, the sides' order rotates,
// a sync follows every chunk, and the metrics are each side's mean and its ratio to
// the first.
func TestAlternate(t *testing.T) {
	var order []string
	var iters [2]int
	side := func(i int, name string, per time.Duration) Side {
		return Side{Name: name, Run: func(k int) (time.Duration, error) {
			order = append(order, name)
			iters[i] += k
			return time.Duration(k) * per, nil
		}}
	}
	var syncs, n int
	res := testing.Benchmark(func(b *testing.B) {
		order, iters, syncs, n = nil, [2]int{}, 0, b.N
		Alternate(b, 7, func() error { syncs++; return nil }, side(0, "c", 100), side(1, "go", 150))
	})
	require.Positive(t, n)
	assert.Equal(t, [2]int{n, n}, iters, "b.N iterations of each side")
	chunks := (n + 6) / 7
	assert.Equal(t, 2*chunks, syncs, "a sync after every chunk")
	if chunks >= 2 {
		assert.Equal(t, []string{"c", "go", "go", "c"}, order[:4], "the order rotates")
	}
	assert.InDelta(t, 100, res.Extra["c-ns/op"], 1e-9)
	assert.InDelta(t, 150, res.Extra["go-ns/op"], 1e-9)
	assert.InDelta(t, 1.5, res.Extra["go/c"], 1e-9)
	assert.InDelta(t, 50, res.Extra["go-c-ns"], 1e-9)
	if chunks >= 4 {
		assert.InDelta(t, 1.5, res.Extra["go/c-med"], 1e-9)
	}
}

// TestAlternateMedian: a side slow in one turn of four moves the ratio of the sums but
// not the median of the full rounds' ratios; the last, partial round is left out of it.
func TestAlternateMedian(t *testing.T) {
	var calls int
	var goTime, cTime time.Duration
	c := Side{Name: "c", Run: func(k int) (time.Duration, error) {
		d := time.Duration(k) * 100
		cTime += d
		return d, nil
	}}
	slow := Side{Name: "go", Run: func(k int) (time.Duration, error) {
		calls++
		d := time.Duration(k) * 150
		if calls%4 == 0 || k < 7 {
			d *= 10
		}
		goTime += d
		return d, nil
	}}
	res := testing.Benchmark(func(b *testing.B) {
		calls, goTime, cTime = 0, 0, 0
		Alternate(b, 7, func() error { return nil }, c, slow)
	})
	require.GreaterOrEqual(t, calls, 3)
	assert.InDelta(t, float64(goTime)/float64(cTime), res.Extra["go/c"], 1e-9)
	assert.Greater(t, res.Extra["go/c"], 3.0, "the slow turns count in the sums")
	assert.InDelta(t, 1.5, res.Extra["go/c-med"], 1e-9, "the median of the rounds' ratios")
}

// TestAlternateRounds: at least the rounds asked for run in full whatever b.N is,
// and the per-iteration metrics divide by the iterations run.
func TestAlternateRounds(t *testing.T) {
	var iters [2]int
	side := func(i int, name string, per time.Duration) Side {
		return Side{Name: name, Run: func(k int) (time.Duration, error) {
			iters[i] += k
			return time.Duration(k) * per, nil
		}}
	}
	var n int
	res := testing.Benchmark(func(b *testing.B) {
		iters, n = [2]int{}, b.N
		AlternateRounds(b, 1000, 5, func() error { return nil }, side(0, "one", 100), side(1, "pipe", 120))
	})
	require.Positive(t, n)
	assert.GreaterOrEqual(t, iters[0], 5000, "five full rounds")
	assert.Equal(t, iters[0], iters[1])
	assert.InDelta(t, 100, res.Extra["one-ns/op"], 1e-9)
	assert.InDelta(t, 120, res.Extra["pipe-ns/op"], 1e-9)
	assert.InDelta(t, 1.2, res.Extra["pipe/one-med"], 1e-9)
}
