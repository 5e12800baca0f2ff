// Package oom lets the library packages give back what they cache when the cuda
// package finds the device out of memory: cuda runs the registered functions before
// resource.Reclaim, so that what they drop is released in that Reclaim.
package oom

import "sync"

var (
	mu    sync.Mutex
	funcs []func()
)

// Register adds f, to run at every out-of-memory reclaim. f must not call CUDA: it
// only drops references (the releases run in resource.Reclaim).
func Register(f func()) {
	mu.Lock()
	funcs = append(funcs, f)
	mu.Unlock()
}

// Run runs the registered functions.
func Run() {
	mu.Lock()
	fs := append([]func(){}, funcs...)
	mu.Unlock()
	for _, f := range fs {
		f()
	}
}
