package resourcetest_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/resource"
	"github.com/gocuda/gocuda/resource/resourcetest"
)

// fakeTB records what CheckLeaks reports instead of failing the real test.
type fakeTB struct {
	testing.TB
	errors   []string
	cleanups []func()
}

func (f *fakeTB) Helper()           {}
func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Errorf(format string, args ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}

func (f *fakeTB) finish() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

type handle struct {
	id  int
	reg *resource.Registration
}

//go:noinline
func leakyConstructor(n int) {
	for i := 0; i < n; i++ {
		h := &handle{id: i}
		h.reg = resource.ResourceFinalizer(func(*handle) {}, h, true, resource.Kind("fakeDestroy"))
	}
}

//go:noinline
func tidyConstructor() {
	h := &handle{}
	h.reg = resource.ResourceFinalizer(func(*handle) {}, h, false)
	_ = h.reg.Release()
}

func TestCheckLeaksFailsALeakyTest(t *testing.T) {
	ft := &fakeTB{TB: t}
	resourcetest.CheckLeaks(ft)
	leakyConstructor(3)
	tidyConstructor()
	ft.finish()
	require.Len(t, ft.errors, 1)
	assert.Contains(t, ft.errors[0], "3 object(s) released by the finalizer")
	assert.Contains(t, ft.errors[0], "3 × fakeDestroy created at")
	assert.Contains(t, ft.errors[0], "leakyConstructor")
	assert.NotContains(t, ft.errors[0], "tidyConstructor")
}

func TestCheckLeaksPassesATidyTest(t *testing.T) {
	prev := resource.EnableLeakTracking(false)
	defer resource.EnableLeakTracking(prev)
	leakyConstructor(2) // before CheckLeaks: not tracked, not blamed
	ft := &fakeTB{TB: t}
	resourcetest.CheckLeaks(ft)
	tidyConstructor()
	ft.finish()
	assert.Empty(t, ft.errors)
	assert.False(t, resource.EnableLeakTracking(prev), "setting restored")
}

func TestCheckLeaksOnRealTest(t *testing.T) {
	resourcetest.CheckLeaks(t)
	tidyConstructor()
}
