package ctxswitch

import (
	"testing"

	"github.com/gocuda/gocuda/dl"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reset forgets what was registered and resolved (this test binary does not link
// the cuda package, so nothing else registers).
func reset(t *testing.T) {
	t.Helper()
	forget := func() {
		procs.Store(nil)
		addr.get.Store(0)
		addr.set.Store(0)
	}
	forget()
	t.Cleanup(forget)
}

func TestUnregistered(t *testing.T) {
	reset(t)
	_, _, err := Procs()
	assert.ErrorIs(t, err, errUnregistered)
}

// Any library does for the resolution: libc's getpid and getppid stand for the
// driver's pair.
func TestProcs(t *testing.T) {
	reset(t)
	libc := dl.NewLibrary("libc", "libc.so.6", "")
	get, set := libc.NewProc("getpid"), libc.NewProc("getppid")
	Register(get, set)
	g, s, err := Procs()
	require.NoError(t, err)
	wg, err := get.Addr()
	require.NoError(t, err)
	ws, err := set.Addr()
	require.NoError(t, err)
	assert.Equal(t, wg, g)
	assert.Equal(t, ws, s)
	g2, s2, err := Procs()
	require.NoError(t, err)
	assert.Equal(t, [2]uintptr{g, s}, [2]uintptr{g2, s2}, "cached")

	assert.PanicsWithValue(t, "ctxswitch: Register called twice", func() { Register(get, set) })
	assert.PanicsWithValue(t, "ctxswitch: Register with a nil proc", func() { Register(nil, set) })
}

func TestProcsError(t *testing.T) {
	reset(t)
	libc := dl.NewLibrary("libc", "libc.so.6", "")
	Register(libc.NewProc("getpid"), libc.NewProc("gocuda_ctxswitch_no_such_symbol"))
	_, _, err := Procs()
	var se *dl.SymbolError
	require.ErrorAs(t, err, &se)
	_, _, again := Procs()
	assert.Equal(t, err, again, "nothing cached on failure: the same error again")
}
