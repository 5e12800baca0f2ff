package nvtx_test

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/nvtx"
	"github.com/gocuda/gocuda/nvtx/nvtxtest"
)

// childEnv marks the subprocess that runs without a tool.
const childEnv = "GONVTX_TEST_NO_TOOL"

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(childEnv) != "":
		os.Unsetenv("NVTX_INJECTION64_PATH")
	case os.Getenv("NVTX_INJECTION64_PATH") != "":
		// A real tool (ncu, nsys) is attached: the tests of the stand-in skip.
	default:
		if err := nvtxtest.Install(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

// standIn skips a test that reads the stand-in's records where it is not the tool.
func standIn(t *testing.T) {
	if !nvtxtest.Installed() {
		t.Skip("the stand-in injection is not the tool of this process")
	}
}

// since returns the events recorded after the first n.
func since(n int) []nvtxtest.Event { return nvtxtest.Events()[n:] }

// Ranges, marks and category names reach the tool with their domain, name, color,
// category and payload, in NVTX version 3's attributes.
func TestRangesReachTheTool(t *testing.T) {
	standIn(t)
	require.True(t, nvtx.Enabled())
	n := len(nvtxtest.Events())
	d := nvtx.NewDomain("gocuda-test")
	assert.Same(t, d, nvtx.NewDomain("gocuda-test"), "one domain per name")
	d.NameCategory(7, "copies")
	r := d.Start("copy", nvtx.Color(0xff76b900), nvtx.Category(7), nvtx.Payload(-3))
	nvtx.Mark("tick", nvtx.PayloadFloat(2.5))
	r.End()
	def := nvtx.Start("step")
	def.End()

	ev := since(n)
	require.Len(t, ev, 6)
	assert.Equal(t, nvtxtest.Event{Kind: "category", Domain: "gocuda-test", Name: "copies", Category: 7, ThreadID: ev[0].ThreadID}, ev[0])
	assert.Equal(t, "start", ev[1].Kind)
	assert.Equal(t, "gocuda-test", ev[1].Domain)
	assert.Equal(t, "copy", ev[1].Name)
	assert.Equal(t, uint32(0xff76b900), ev[1].Color)
	assert.Equal(t, uint32(7), ev[1].Category)
	assert.Equal(t, int32(2), ev[1].PayloadType)
	assert.Equal(t, uint64(math.MaxUint64-2), ev[1].Payload, "-3 as int64")
	assert.Equal(t, int32(3), ev[1].Version)
	assert.Equal(t, nvtxtest.Event{Kind: "mark", Name: "tick", PayloadType: 3, Payload: math.Float64bits(2.5), Version: 3, ThreadID: ev[2].ThreadID}, ev[2])
	assert.Equal(t, "end", ev[3].Kind)
	assert.Equal(t, ev[1].ID, ev[3].ID, "the range's id")
	assert.Equal(t, "", ev[4].Domain, "the default domain")
	assert.Equal(t, "step", ev[4].Name)
	assert.Equal(t, ev[4].ID, ev[5].ID)
}

// A range started on one thread ends on another as one range: start/end, not
// push/pop, which NVTX ties to a thread.
func TestRangeEndsOnAnotherThread(t *testing.T) {
	standIn(t)
	n := len(nvtxtest.Events())
	// The starting goroutine keeps its thread until the range has ended on
	// another goroutine's locked thread.
	ranges := make(chan nvtx.Range)
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		ranges <- nvtx.Start("moves")
		<-done
	}()
	r := <-ranges
	ended := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		r.End()
		close(ended)
	}()
	<-ended
	close(done)
	ev := since(n)
	require.Len(t, ev, 2)
	assert.Equal(t, ev[0].ID, ev[1].ID)
	assert.NotEqual(t, ev[0].ThreadID, ev[1].ThreadID, "started and ended on two threads")
}

// Many goroutines: every range ends with its own id.
func TestConcurrentRanges(t *testing.T) {
	standIn(t)
	n := len(nvtxtest.Events())
	d := nvtx.NewDomain("concurrent")
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				d.Start(fmt.Sprintf("g%d-%d", g, i%4)).End()
			}
		})
	}
	wg.Wait()
	open := map[uint64]int{}
	for _, e := range since(n) {
		switch e.Kind {
		case "start":
			open[e.ID]++
		case "end":
			open[e.ID]--
		}
	}
	assert.Len(t, open, 8*500)
	for id, c := range open {
		require.Zero(t, c, "range %d", id)
	}
}

// Without a tool nothing is loaded or called, and nothing is allocated: run in a
// child process started without NVTX_INJECTION64_PATH.
func TestNoTool(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		standIn(t)
		cmd := exec.Command(os.Args[0], "-test.run=^TestNoTool$", "-test.v")
		cmd.Env = append(os.Environ(), childEnv+"=1")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Contains(t, string(out), "--- PASS: TestNoTool")
		t.Logf("%s", out)
		return
	}
	require.False(t, nvtx.Enabled())
	d := nvtx.NewDomain("quiet")
	allocs := testing.AllocsPerRun(1000, func() {
		d.Start("r", nvtx.Color(1), nvtx.Payload(2)).End()
		d.Mark("m")
	})
	assert.Zero(t, allocs)
	res := testing.Benchmark(func(b *testing.B) {
		for b.Loop() {
			d.Start("r").End()
		}
	})
	t.Logf("Start+End without a tool: %.1f ns", float64(res.T.Nanoseconds())/float64(res.N))
}

// BenchmarkStartEnd is a range's cost with a tool (here the stand-in) attached.
func BenchmarkStartEnd(b *testing.B) {
	d := nvtx.NewDomain("bench")
	for b.Loop() {
		d.Start("step").End()
	}
}
