package streamslot

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/gocuda/gocuda/internal/rescore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// evicted collects the handles a library's evict received.
type evicted struct {
	mu sync.Mutex
	hs []unsafe.Pointer
}

func (e *evicted) evict(h unsafe.Pointer) {
	e.mu.Lock()
	e.hs = append(e.hs, h)
	e.mu.Unlock()
}

func (e *evicted) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.hs)
}

// The tests' two libraries (NewLib makes at most Max in a process, and tests may
// run several times).
var (
	testEvicted       = new(evicted)
	testLib, _        = NewLib(func(h unsafe.Pointer) { testEvicted.evict(h) })
	testOther, okLibs = NewLib(func(unsafe.Pointer) {})
)

// newLib returns the test library, with no evicted handles yet.
func newLib(t *testing.T) (Lib, *evicted) {
	require.True(t, okLibs)
	testEvicted.mu.Lock()
	testEvicted.hs = nil
	testEvicted.mu.Unlock()
	return testLib, testEvicted
}

func count(lib Lib) int {
	n := 0
	Each(lib, func(unsafe.Pointer) { n++ })
	return n
}

func TestSlots(t *testing.T) {
	lib, ev := newLib(t)
	other := testOther
	var s Slots
	a, b := unsafe.Pointer(new(int)), unsafe.Pointer(new(int))
	assert.Nil(t, s.Take(lib))
	assert.True(t, s.Keep(lib, a))
	assert.False(t, s.Keep(lib, b), "one handle per library")
	assert.True(t, s.Keep(other, b), "and one for each library")
	assert.Equal(t, 1, count(lib))
	assert.Equal(t, a, s.Take(lib))
	assert.Nil(t, s.Take(lib))
	assert.Zero(t, count(lib))
	assert.True(t, s.Keep(lib, a))
	assert.Equal(t, a, s.Peek(lib), "peeking does not take")
	assert.Equal(t, a, s.Take(lib))
	assert.True(t, s.Keep(lib, a))

	// Close evicts every library's handle and keeps nothing more.
	s.Close()
	assert.Equal(t, []unsafe.Pointer{a}, ev.hs)
	assert.Nil(t, s.Take(other), "evicted (the other library's evict got it)")
	assert.False(t, s.Keep(lib, b))
	assert.Zero(t, count(lib))
	runtime.KeepAlive(&s)
}

func TestReclaimDrops(t *testing.T) {
	lib, ev := newLib(t)
	var s1, s2 Slots
	require.True(t, s1.Keep(lib, unsafe.Pointer(new(int))))
	require.True(t, s2.Keep(lib, unsafe.Pointer(new(int))))
	assert.Equal(t, 2, count(lib))
	rescore.RunReclaim()
	assert.Zero(t, count(lib))
	assert.Nil(t, s1.Take(lib))
	assert.Nil(t, s2.Take(lib))
	assert.Zero(t, ev.count(), "dropped, not evicted")
	require.True(t, s1.Keep(lib, unsafe.Pointer(new(int))))
	assert.Equal(t, 1, count(lib), "listed again")
	runtime.KeepAlive(&s1)
	runtime.KeepAlive(&s2)
}

// An unreachable stream's slots leave the list: listing does not keep them alive.
func TestUnreachable(t *testing.T) {
	lib, _ := newLib(t)
	func() {
		s := new(Slots)
		require.True(t, s.Keep(lib, unsafe.Pointer(new(int))))
	}()
	for range 10 {
		runtime.GC()
		if count(lib) == 0 {
			break
		}
	}
	assert.Zero(t, count(lib))
}

// Keeps racing a Close and a Reclaim: every handle ends exactly once — taken back by
// the goroutine, evicted by the Close, or dropped by the Reclaim — and none is left
// on the closed slots.
func TestKeepRacesClose(t *testing.T) {
	lib, ev := newLib(t)
	for range 200 {
		s := new(Slots)
		var kept atomic.Int32
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 50 {
					h := s.Take(lib)
					if h == nil {
						h = unsafe.Pointer(new(int))
					}
					if s.Keep(lib, h) {
						kept.Add(1)
					}
				}
			})
		}
		wg.Go(s.Close)
		wg.Go(rescore.RunReclaim)
		wg.Wait()
		assert.Nil(t, s.Take(lib), "nothing kept on closed slots")
		assert.False(t, s.Keep(lib, unsafe.Pointer(new(int))))
	}
	assert.LessOrEqual(t, ev.count(), 200, "at most one evicted per Close")
}

// A value that embeds a Home, as the cuda package's stream state does (and a
// *cuda.Stream through it), is a Stream whose Slots Of finds.
func TestOf(t *testing.T) {
	lib, _ := newLib(t)
	type state struct{ Home }
	type handle struct{ *state }
	s := &handle{&state{}}
	sl := Of(s)
	assert.Same(t, sl, Of(s.state), "one Slots, from either")
	h := unsafe.Pointer(new(int))
	assert.True(t, sl.Keep(lib, h))
	assert.Equal(t, h, Of(s).Take(lib))
}
