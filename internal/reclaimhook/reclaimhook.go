// Package reclaimhook lets the library packages give back what they cache whenever
// everything that can be released is being released: package resource runs the
// registered functions at the start of every resource.Reclaim (which the cuda
// package's out-of-memory path calls too), before it collects garbage, so that what
// they drop is destroyed in that same Reclaim.
package reclaimhook

import "sync"

var (
	mu    sync.Mutex
	funcs []func()
)

// Register adds f, to run at every Reclaim. f must not call CUDA: it only drops
// references (the releases run in resource.Reclaim).
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
