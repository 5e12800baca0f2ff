package cuda_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/tools/bench/callbench"
	"github.com/stretchr/testify/require"
)

// The pipeline shapes of issue #39, each beside the same work done by one goroutine
// on one stream in the same process (callbench.AlternateRounds: chunks of items,
// the sides alternating, at least pipelineRounds full rounds, every round's ratio
// logged). The metrics: pipe-ns/op (or goroutines-ns/op) per item, and pipe/one-med,
// the median of the rounds' ratios, which tools/bench shows beside C.

const (
	pipelineChunk  = 2000 // items per side and round
	pipelineRounds = 7
	wave           = 20_000 // goroutines of the goroutines row, per round
	waveRounds     = 5
)

// BenchmarkPipelineShapes: "alloc-per-item": a producer allocates a 1 KiB buffer per
// item on its stream and fills it, a consumer goroutine on another stream sums it,
// copies the sum back and closes the buffer; "four-consumers": the same with four
// consumer goroutines, each on its stream; "ring": the producer recycles a ring of
// buffers that the consumer hands back (no allocation per item); "goroutines":
// tasks/sum's task in 20,000 goroutines at a time, each on a pooled stream.
func BenchmarkPipelineShapes(b *testing.B) {
	k := newTaskKernels(b)
	bg := context.Background()
	// Streams of their own, not the pool's, which lends a few at a time and
	// the goroutines row needs.
	acquire := func() *cuda.Stream {
		s, err := k.ctx.NewStream()
		require.NoError(b, err)
		b.Cleanup(func() { s.Close() })
		return s
	}
	one := acquire()
	oneC, err := newConsumer(k, one)
	require.NoError(b, err)
	b.Cleanup(oneC.close)
	fill := func(s *cuda.Stream, p *cuda.DeviceBuffer) error {
		return k.fill.Launch(s, cuda.D1(1), cuda.D1(256), 0, p, uint32(1), uint64(256))
	}
	alloc := func(s *cuda.Stream) (*cuda.DeviceBuffer, error) {
		p, err := cuda.AllocFor[uint32](s, 256)
		if err != nil {
			return nil, err
		}
		if err := fill(s, p); err != nil {
			p.Close()
			return nil, err
		}
		return p, nil
	}
	oneAlloc := callbench.Loop("one", func() error {
		p, err := alloc(one)
		if err != nil {
			return err
		}
		return oneC.consume(p)
	})
	settle := func() error { return k.ctx.Synchronize() }

	b.Run("alloc-per-item", func(b *testing.B) {
		p := startPipe(b, k, acquire, 1, nil)
		callbench.AlternateRounds(b, pipelineChunk, pipelineRounds, settle, oneAlloc,
			p.side(func() (*cuda.DeviceBuffer, error) { return alloc(p.prod) }))
	})
	b.Run("four-consumers", func(b *testing.B) {
		p := startPipe(b, k, acquire, 4, nil)
		callbench.AlternateRounds(b, pipelineChunk, pipelineRounds, settle, oneAlloc,
			p.side(func() (*cuda.DeviceBuffer, error) { return alloc(p.prod) }))
	})
	b.Run("ring", func(b *testing.B) {
		const ringSize = 8
		free := make(chan *cuda.DeviceBuffer, ringSize)
		p := startPipe(b, k, acquire, 1, free)
		for range ringSize {
			buf, err := cuda.AllocFor[uint32](p.prod, 256)
			require.NoError(b, err)
			b.Cleanup(func() { buf.Close() })
			free <- buf
		}
		mine, err := cuda.AllocFor[uint32](one, 256)
		require.NoError(b, err)
		b.Cleanup(func() { mine.Close() })
		oneRing := callbench.Loop("one", func() error {
			if err := fill(one, mine); err != nil {
				return err
			}
			return oneC.sum(mine)
		})
		callbench.AlternateRounds(b, pipelineChunk, pipelineRounds, settle, oneRing,
			p.side(func() (*cuda.DeviceBuffer, error) {
				buf := <-free
				return buf, fill(p.prod, buf)
			}))
	})
	b.Run("goroutines", func(b *testing.B) {
		oneTask := callbench.Loop("one", func() error { return k.task(one) })
		many := callbench.Side{Name: "goroutines", Run: func(n int) (time.Duration, error) {
			var first atomic.Pointer[error]
			var wg sync.WaitGroup
			t0 := time.Now()
			for range n {
				wg.Go(func() {
					err := k.ctx.WithStream(bg, func(_ context.Context, s *cuda.Stream) error { return k.task(s) })
					if err != nil {
						first.CompareAndSwap(nil, &err)
					}
				})
			}
			wg.Wait()
			d := time.Since(t0)
			if e := first.Load(); e != nil {
				return 0, *e
			}
			return d, nil
		}}
		callbench.AlternateRounds(b, wave, waveRounds, settle, oneTask, many)
	})
}

// pipe is a producer's stream and its consumer goroutines, which run until the
// benchmark ends.
type pipe struct {
	prod  *cuda.Stream
	items chan *cuda.DeviceBuffer
	done  chan struct{}
	count atomic.Int64 // items consumed in the current chunk
	want  atomic.Int64
	err   atomic.Pointer[error]
}

// startPipe starts n consumers; with free, a consumer hands each buffer back there
// instead of closing it.
func startPipe(b *testing.B, k *taskKernels, acquire func() *cuda.Stream, n int, free chan *cuda.DeviceBuffer) *pipe {
	p := &pipe{prod: acquire(), items: make(chan *cuda.DeviceBuffer, 2*n), done: make(chan struct{}, 1)}
	var wg sync.WaitGroup
	for range n {
		c, err := newConsumer(k, acquire())
		require.NoError(b, err)
		wg.Go(func() {
			defer c.close()
			for buf := range p.items {
				var err error
				if free != nil {
					err = c.sum(buf)
					free <- buf
				} else {
					err = c.consume(buf)
				}
				if err != nil {
					p.err.CompareAndSwap(nil, &err)
				}
				if p.count.Add(1) == p.want.Load() {
					p.done <- struct{}{}
				}
			}
		})
	}
	b.Cleanup(func() { close(p.items); wg.Wait() })
	return p
}

// side produces n items with produce and returns once the consumers have finished
// them.
func (p *pipe) side(produce func() (*cuda.DeviceBuffer, error)) callbench.Side {
	return callbench.Side{Name: "pipe", Run: func(n int) (time.Duration, error) {
		p.count.Store(0)
		p.want.Store(int64(n))
		t0 := time.Now()
		for range n {
			buf, err := produce()
			if err != nil {
				return 0, err
			}
			p.items <- buf
		}
		<-p.done
		d := time.Since(t0)
		if e := p.err.Load(); e != nil {
			return 0, *e
		}
		return d, nil
	}}
}

// BenchmarkCrossStreamFree measures, on the raw layer, ways of giving a 1 KiB block
// used on stream B back to allocations on stream A (each item: A fills the block, B
// waits for A and uses it, B is synchronized): "pool": cuMemAllocAsync on A and
// cuMemFreeAsync on B (the pool's reuse); "event": a block list in front, each block
// with an event recorded on B at its release and taken again once a query finds it
// done; "fixed": one block, no allocation (the floor of the other two); call/...:
// the calls of the "event" way alone.
func BenchmarkCrossStreamFree(b *testing.B) {
	k := newTaskKernels(b)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	require.NoError(b, cudaraw.CtxSetCurrent(k.ctx.Handle()))
	sa, err := k.ctx.NewStream()
	require.NoError(b, err)
	defer sa.Close()
	sb, err := k.ctx.NewStream()
	require.NoError(b, err)
	defer sb.Close()
	a, bs := sa.Handle(), sb.Handle()
	newEvent := func() cudaraw.CUevent {
		var ev cudaraw.CUevent
		require.NoError(b, cudaraw.EventCreate(&ev, uint32(cudaraw.CU_EVENT_DISABLE_TIMING)))
		b.Cleanup(func() { _ = cudaraw.EventDestroy(ev) })
		return ev
	}
	handoff := newEvent()
	use := func(p cudaraw.CUdeviceptr) error {
		if err := cudaraw.MemsetD32Async(p, 1, 256, a); err != nil {
			return err
		}
		if err := cudaraw.EventRecord(handoff, a); err != nil {
			return err
		}
		if err := cudaraw.StreamWaitEvent(bs, handoff, 0); err != nil {
			return err
		}
		return cudaraw.MemsetD32Async(p, 2, 128, bs)
	}
	b.Run("pool", func(b *testing.B) {
		for b.Loop() {
			var p cudaraw.CUdeviceptr
			if err := cudaraw.MemAllocAsync(&p, 1024, a); err != nil {
				b.Fatal(err)
			}
			if err := use(p); err != nil {
				b.Fatal(err)
			}
			if err := cudaraw.MemFreeAsync(p, bs); err != nil {
				b.Fatal(err)
			}
			if err := cudaraw.StreamSynchronize(bs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("event", func(b *testing.B) {
		type block struct {
			p  cudaraw.CUdeviceptr
			ev cudaraw.CUevent
		}
		var list []block
		var spare []cudaraw.CUevent
		for b.Loop() {
			var blk block
			if n := len(list); n > 0 {
				switch err := cudaraw.EventQuery(list[0].ev); {
				case err == nil:
					blk = list[0]
					list = list[1:]
					spare = append(spare, blk.ev)
				case !errors.Is(err, cudaraw.ErrNotReady):
					b.Fatal(err)
				}
			}
			if blk.p == 0 {
				if err := cudaraw.MemAllocAsync(&blk.p, 1024, a); err != nil {
					b.Fatal(err)
				}
			}
			if err := use(blk.p); err != nil {
				b.Fatal(err)
			}
			if n := len(spare); n > 0 {
				blk.ev, spare = spare[n-1], spare[:n-1]
			} else {
				blk.ev = newEvent()
			}
			if err := cudaraw.EventRecord(blk.ev, bs); err != nil {
				b.Fatal(err)
			}
			list = append(list, blk)
			if err := cudaraw.StreamSynchronize(bs); err != nil {
				b.Fatal(err)
			}
		}
		for _, blk := range list {
			_ = cudaraw.MemFreeAsync(blk.p, bs)
		}
	})
	// The calls the "event" way adds, one at a time (B idle).
	b.Run("call/EventRecord", func(b *testing.B) {
		for b.Loop() {
			if err := cudaraw.EventRecord(handoff, bs); err != nil {
				b.Fatal(err)
			}
		}
	})
	require.NoError(b, cudaraw.StreamSynchronize(bs))
	b.Run("call/EventQuery", func(b *testing.B) {
		for b.Loop() {
			if err := cudaraw.EventQuery(handoff); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("call/StreamQuery", func(b *testing.B) {
		for b.Loop() {
			if err := cudaraw.StreamQuery(bs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fixed", func(b *testing.B) {
		var p cudaraw.CUdeviceptr
		require.NoError(b, cudaraw.MemAllocAsync(&p, 1024, a))
		defer cudaraw.MemFreeAsync(p, a)
		for b.Loop() {
			if err := use(p); err != nil {
				b.Fatal(err)
			}
			if err := cudaraw.StreamSynchronize(bs); err != nil {
				b.Fatal(err)
			}
		}
	})
}
