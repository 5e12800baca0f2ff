package resource

import (
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// fakeRes stands for a wrapper around a C handle.
type fakeRes struct {
	id  int
	reg *Registration
	tag *int // keep the type pointerful (no tiny allocations)
}

// newTestQueue returns an isolated queue whose worker stops with the test.
func newTestQueue(t testing.TB, delay time.Duration) *queue {
	q := newQueue(delay)
	t.Cleanup(q.close)
	return q
}

// collect runs a GC and waits for the finalizers it queued.
func collect() {
	runtime.GC()
	waitFinalizers(time.Second)
}

// goid returns the calling goroutine's id (tests only: slow).
func goid() uint64 {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	f := strings.Fields(string(buf))
	id, _ := strconv.ParseUint(f[1], 10, 64)
	return id
}

// stack returns the calling goroutine's stack.
func stack() string {
	buf := make([]byte, 16<<10)
	return string(buf[:runtime.Stack(buf, false)])
}

func onFinalizerGoroutine(s string) bool {
	return strings.Contains(s, "runtime.runFinalizers") || strings.Contains(s, "runtime.runfinq")
}

// recorder counts release calls per id.
type recorder struct {
	mu    sync.Mutex
	calls map[int]int
	order []int
}

func newRecorder() *recorder { return &recorder{calls: map[int]int{}} }

func (r *recorder) release(o *fakeRes) {
	r.mu.Lock()
	r.calls[o.id]++
	r.order = append(r.order, o.id)
	r.mu.Unlock()
}

func (r *recorder) count(id int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[id]
}

func (r *recorder) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.order)
}

// drop registers n objects with ids [base, base+n) and lets them become
// unreachable when it returns.
//
//go:noinline
func drop(q *queue, rec *recorder, base, n int, blocking bool, opts ...Option) {
	opts = append(opts, withQueue(q))
	for i := 0; i < n; i++ {
		o := &fakeRes{id: base + i}
		o.reg = ResourceFinalizer(rec.release, o, blocking, opts...)
	}
}

// keep registers an object and returns it.
//
//go:noinline
func keep(q *queue, rec *recorder, id int, blocking bool, opts ...Option) *fakeRes {
	o := &fakeRes{id: id}
	o.reg = ResourceFinalizer(rec.release, o, blocking, append(opts, withQueue(q))...)
	return o
}

// waitFired waits until n finalizer hooks fired on q.
func waitFired(t testing.TB, q *queue, n uint64) {
	t.Helper()
	require.Eventually(t, func() bool {
		collect()
		return q.fired.Load() >= n
	}, 5*time.Second, time.Millisecond, "finalizers did not fire: %v", q.status())
}

func unsafeObj[T any](p *T) unsafe.Pointer { return unsafe.Pointer(p) }
