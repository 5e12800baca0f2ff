// Package resourcetest provides test helpers for package resource, kept
// apart so that resource itself does not import testing.
package resourcetest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gocuda/gocuda/resource"
)

// CheckLeaks turns leak tracking on for the rest of the test and, when
// the test ends, fails it if objects registered after the call were
// released by the finalizer path instead of being closed explicitly. Call
// it at the start of the test:
//
//	func TestBuffers(t *testing.T) {
//		resourcetest.CheckLeaks(t)
//		...
//	}
//
// At the end it runs resource.Reclaim, so everything unreachable by then
// is counted, and restores the previous leak-tracking setting. Objects
// still reachable at the end are not leaks yet. Leaks are tracked process
// wide: parallel tests that leak can be blamed on each other.
func CheckLeaks(t testing.TB) {
	t.Helper()
	prev := resource.EnableLeakTracking(true)
	before := counts(resource.Leaks())
	t.Cleanup(func() {
		t.Helper()
		defer resource.EnableLeakTracking(prev)
		if _, err := resource.Reclaim(); err != nil {
			t.Errorf("resourcetest: Reclaim: %v", err)
		}
		var leaked []resource.Leak
		total := uint64(0)
		for _, l := range resource.Leaks() {
			if n := l.Count - before[key(l)]; n > 0 {
				l.Count = n
				leaked = append(leaked, l)
				total += n
			}
		}
		if len(leaked) > 0 {
			t.Errorf("resourcetest: %d object(s) released by the finalizer instead of an explicit Close:\n%s",
				total, format(leaked))
		}
	})
}

type leakKey struct{ kind, stack string }

func key(l resource.Leak) leakKey { return leakKey{l.Kind, l.Stack} }

func counts(ls []resource.Leak) map[leakKey]uint64 {
	m := make(map[leakKey]uint64, len(ls))
	for _, l := range ls {
		m[key(l)] = l.Count
	}
	return m
}

func format(ls []resource.Leak) string {
	var b strings.Builder
	for _, l := range ls {
		fmt.Fprintf(&b, "%s\n", l)
		for _, line := range strings.Split(strings.TrimSuffix(l.Stack, "\n"), "\n") {
			fmt.Fprintf(&b, "\t%s\n", line)
		}
	}
	return b.String()
}
