package worker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A worker's "not run" may come before its fault's answer (the worker refuses a
// request between seeing the fault and writing its answer): from then on the pool
// sends it nothing, so that a call waits for another worker instead of being sent
// back to the one that refuses until its resends run out.
func TestNotRunStopsDispatch(t *testing.T) {
	p := &Pool{procs: make(map[*proc]struct{}), changed: make(chan struct{})}
	w := &proc{p: p, state: stateActive, pending: make(map[uint64]chan reply)}
	p.procs[w] = struct{}{}
	got, ch, err := p.dispatch(t.Context(), 1)
	require.NoError(t, err)
	require.Same(t, w, got)
	p.reply(w, 1, reply{status: replyNotRun})
	assert.Equal(t, byte(replyNotRun), (<-ch).status)

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, _, err = p.dispatch(ctx, 2)
	require.ErrorIs(t, err, context.DeadlineExceeded, "a request went to the worker that refuses")
	assert.Empty(t, w.pending)
}
