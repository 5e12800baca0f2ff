package cuda_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
)

// Close against every IPC operation (race_test.go's races): a Send against the
// buffer's Close and the export's, a Receive and an imported buffer's Close against
// the import's. On the strict fake no driver call may use a destroyed event or pool
// or freed memory, and the exporter's free may not come before the importer's.

// ipcRaceSide is one race's objects.
type ipcRaceSide struct {
	pool  *cuda.SharedPool
	exp   *cuda.IPCExport
	imp   *cuda.IPCImport
	b     *cuda.DeviceBuffer // the exporter's buffer
	lease *cuda.IPCLease
	got   *cuda.DeviceBuffer // the importer's
}

func TestRaceCloseIPC(t *testing.T) {
	ctx, s := memSetup(t)
	n := races(t)
	pairs := min(n, 300) // a pair per race: a socket, a listener, two goroutines
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel) // after the races, which run in parallel once this returns

	// One pair for the buffer races.
	pool, exp, imp := ipcPair(t, ctx)
	t.Cleanup(func() {
		assert.NoError(t, imp.Close())
		assert.NoError(t, exp.Close())
	})
	runRaces(t, n, raceKind[*ipcRaceSide]{
		name: "Send/buffer Close",
		setup: func(t *testing.T) *ipcRaceSide {
			b, err := pool.Alloc(s, 4096)
			require.NoError(t, err)
			return &ipcRaceSide{b: b}
		},
		op: func(x *ipcRaceSide) (err error) {
			x.lease, err = exp.Send(cctx, s, x.b)
			return err
		},
		close: func(x *ipcRaceSide) error { return x.b.Close() },
		done: func(x *ipcRaceSide) {
			if x.lease == nil {
				return
			}
			got, err := imp.Receive(cctx)
			require.NoError(t, err)
			require.NoError(t, got.Close())
			require.NoError(t, x.lease.Wait(cctx))
		},
	})

	pair := func(t *testing.T, send bool) *ipcRaceSide {
		p, e, i := ipcPair(t, ctx)
		x := &ipcRaceSide{pool: p, exp: e, imp: i}
		var err error
		x.b, err = p.Alloc(s, 4096)
		require.NoError(t, err)
		if send {
			x.lease, err = e.Send(cctx, s, x.b)
			require.NoError(t, err)
		}
		return x
	}
	// end closes what the race left: the importer's side first.
	end := func(x *ipcRaceSide) {
		if x.got != nil {
			if err := x.got.Close(); err != nil {
				require.ErrorIs(t, err, cuda.ErrClosed)
			}
		}
		if err := x.imp.Close(); err != nil {
			require.ErrorIs(t, err, cuda.ErrClosed)
		}
		if x.lease != nil {
			// Given back, or ended with the importer gone.
			if err := x.lease.Wait(cctx); err != nil {
				require.ErrorIs(t, err, cuda.ErrPeerGone)
			}
		}
		if err := x.exp.Close(); err != nil {
			require.ErrorIs(t, err, cuda.ErrClosed)
		}
		require.NoError(t, x.b.Close())
	}
	runRaces(t, pairs, raceKind[*ipcRaceSide]{
		name:  "Send/export Close",
		setup: func(t *testing.T) *ipcRaceSide { return pair(t, false) },
		op: func(x *ipcRaceSide) (err error) {
			x.lease, err = x.exp.Send(cctx, s, x.b)
			return err
		},
		close: func(x *ipcRaceSide) error { return x.exp.Close() },
		done:  end,
	})
	runRaces(t, pairs, raceKind[*ipcRaceSide]{
		name:  "Receive/import Close",
		setup: func(t *testing.T) *ipcRaceSide { return pair(t, true) },
		op: func(x *ipcRaceSide) (err error) {
			x.got, err = x.imp.Receive(cctx)
			return err
		},
		close: func(x *ipcRaceSide) error { return x.imp.Close() },
		done:  end,
	})
	runRaces(t, pairs, raceKind[*ipcRaceSide]{
		name: "imported buffer Close/import Close",
		setup: func(t *testing.T) *ipcRaceSide {
			x := pair(t, true)
			var err error
			x.got, err = x.imp.Receive(cctx)
			require.NoError(t, err)
			return x
		},
		op: func(x *ipcRaceSide) error {
			err := x.got.Close()
			if errors.Is(err, cuda.ErrClosed) {
				x.got = nil // the import's Close closed it
			}
			return err
		},
		close: func(x *ipcRaceSide) error { return x.imp.Close() },
		done: func(x *ipcRaceSide) {
			x.got = nil
			end(x)
		},
	})
}
