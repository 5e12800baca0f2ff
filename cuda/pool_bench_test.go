package cuda_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/stretchr/testify/require"
)

// The benchmarks of issue #11, each beside a C workload of tools/floor (the rows of
// tools/bench/workloads.go say which).

// BenchmarkStreamPool acquires a pooled stream and releases it (C: stream/pool).
func BenchmarkStreamPool(b *testing.B) {
	_, m, _ := loadKernels(b)
	ctx := m.Context()
	bg := context.Background()
	for b.Loop() {
		s, err := ctx.AcquireStream(bg)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// taskKernels are the kernels of the task and pipeline benchmarks.
type taskKernels struct {
	ctx                *cuda.Context
	add, readSum, fill *cuda.Function
	x                  *cuda.HostBuffer // 256 uint32, x[i] = i
	want               uint64           // sum(x + 1)
	pipelineWant       uint64
}

func newTaskKernels(b *testing.B) *taskKernels {
	_, m, _ := loadKernels(b)
	k := &taskKernels{ctx: m.Context(), add: function(b, m, "add_u32"), readSum: function(b, m, "read_sum"),
		fill: function(b, m, "fill_u32")}
	x, err := k.ctx.AllocHost(1024)
	require.NoError(b, err)
	b.Cleanup(func() { x.Close() })
	xs := cuda.HostSlice[uint32](x)
	for i := range xs {
		xs[i] = uint32(i)
		k.want += uint64(i) + 1
	}
	k.x = x
	k.pipelineWant = 256
	return k
}

// task is one task of tasks/sum on s: sum(x + 1) for 256 uint32, as floor.cu's
// w_tasks_sum does (one 1032-byte allocation holds x and the sum).
func (k *taskKernels) task(s *cuda.Stream) error {
	buf, err := k.ctx.Alloc(s, 1032)
	if err != nil {
		return err
	}
	defer buf.Close()
	x, err := buf.Slice(0, 1024)
	if err != nil {
		return err
	}
	sum, err := buf.Slice(1024, 8)
	if err != nil {
		return err
	}
	res, err := k.ctx.AllocHost(8)
	if err != nil {
		return err
	}
	defer res.Close()
	if err := cuda.CopyAsync(s, x, k.x); err != nil {
		return err
	}
	if err := sum.Memset32Async(s, 0); err != nil {
		return err
	}
	if err := k.add.Launch(s, cuda.D1(1), cuda.D1(256), 0, x, uint32(1), uint64(256)); err != nil {
		return err
	}
	if err := k.readSum.Launch(s, cuda.D1(1), cuda.D1(256), 0, cuda.In(x), uint64(256), uint64(0), sum); err != nil {
		return err
	}
	if err := cuda.CopyAsync(s, res, sum); err != nil {
		return err
	}
	if err := s.Synchronize(); err != nil {
		return err
	}
	return checkSum(res, k.want)
}

// checkSum checks the sum in res, where kernels run (the fake driver's do not).
func checkSum(res *cuda.HostBuffer, want uint64) error {
	if got := cuda.HostSlice[uint64](res)[0]; got != want && !cudatest.FakeLoaded() {
		return fmt.Errorf("sum %d, want %d", got, want)
	}
	return nil
}

// BenchmarkTasks runs tasks of sum(x + 1) on small buffers: in 20,000 goroutines at
// a time, each with a pooled stream (WithStream), and the same tasks in one
// goroutine on one pooled stream. ns/op is per task (C: tasks/sum, one thread).
func BenchmarkTasks(b *testing.B) {
	k := newTaskKernels(b)
	bg := context.Background()
	b.Run("goroutines", func(b *testing.B) {
		const wave = 20_000
		var failed sync.Once
		for i := 0; i < b.N; i += wave {
			var wg sync.WaitGroup
			for range min(wave, b.N-i) {
				wg.Go(func() {
					err := k.ctx.WithStream(bg, func(_ context.Context, s *cuda.Stream) error { return k.task(s) })
					if err != nil {
						failed.Do(func() { b.Error(err) })
					}
				})
			}
			wg.Wait()
		}
		b.StopTimer()
		idle, _, created, _, peak := cuda.PoolStatsForTest(k.ctx)
		b.ReportMetric(float64(created), "streams-made")
		b.ReportMetric(float64(peak), "streams-peak")
		// The device pool's reserved memory: what the tasks' buffers (and the
		// streams' block caches) grew it to.
		if st, err := cuda.MemoryStatus(); err == nil {
			for _, c := range st.Contexts {
				if c.Primary && c.Device == k.ctx.Device() {
					b.ReportMetric(float64(c.Kinds[cuda.KindDevice].Reserved)/(1<<20), "pool-MiB")
				}
			}
		}
		b.ReportMetric(float64(idle), "streams-idle")
	})
	b.Run("one", func(b *testing.B) {
		err := k.ctx.WithStream(bg, func(_ context.Context, s *cuda.Stream) error {
			for b.Loop() {
				if err := k.task(s); err != nil {
					return err
				}
			}
			return nil
		})
		require.NoError(b, err)
	})
}

// BenchmarkPipeline passes small buffers from a producer to a consumer: the
// producer allocates and fills each on its stream, the consumer sums it on its own
// (ordered after the producer by the hand-off), copies the sum back and frees the
// buffer. "channels": the producer and the consumer are goroutines joined by a
// channel; "one": one goroutine does both. ns/op is per item (C: pipeline, one
// thread).
func BenchmarkPipeline(b *testing.B) {
	k := newTaskKernels(b)
	bg := context.Background()
	prod, err := k.ctx.AcquireStream(bg)
	require.NoError(b, err)
	defer prod.Close()
	produce := func() (*cuda.DeviceBuffer, error) {
		p, err := cuda.AllocFor[uint32](prod, 256)
		if err != nil {
			return nil, err
		}
		return p, k.fill.Launch(prod, cuda.D1(1), cuda.D1(256), 0, p, uint32(1), uint64(256))
	}
	b.Run("channels", func(b *testing.B) {
		const consumers = 4
		items := make(chan *cuda.DeviceBuffer, 2*consumers)
		errs := make(chan error, consumers)
		for range consumers {
			go func() {
				errs <- k.ctx.WithStream(bg, func(_ context.Context, s *cuda.Stream) error {
					c, err := newConsumer(k, s)
					if err != nil {
						return err
					}
					defer c.close()
					for p := range items {
						if err == nil {
							err = c.consume(p)
						} else {
							p.Close()
						}
					}
					return err
				})
			}()
		}
		for b.Loop() {
			p, err := produce()
			if err != nil {
				b.Fatal(err)
			}
			items <- p
		}
		close(items)
		for range consumers {
			require.NoError(b, <-errs)
		}
	})
	b.Run("one", func(b *testing.B) {
		s, err := k.ctx.AcquireStream(bg)
		require.NoError(b, err)
		defer s.Close()
		c, err := newConsumer(k, s)
		require.NoError(b, err)
		defer c.close()
		for b.Loop() {
			p, err := produce()
			if err != nil {
				b.Fatal(err)
			}
			if err := c.consume(p); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// consumer sums the pipeline's buffers on its stream.
type consumer struct {
	k     *taskKernels
	s     *cuda.Stream
	total *cuda.DeviceBuffer // allocated once
	res   *cuda.HostBuffer
}

func newConsumer(k *taskKernels, s *cuda.Stream) (*consumer, error) {
	sum, err := cuda.AllocFor[uint64](s, 1)
	if err != nil {
		return nil, err
	}
	res, err := k.ctx.AllocHost(8)
	if err != nil {
		sum.Close()
		return nil, err
	}
	return &consumer{k, s, sum, res}, nil
}

func (c *consumer) close() {
	c.total.Close()
	c.res.Close()
}

// consume sums p on the consumer's stream (after the producer's fill, by the
// hand-off), copies the sum back and frees p.
func (c *consumer) consume(p *cuda.DeviceBuffer) error {
	defer p.Close()
	return c.sum(p)
}

// sum sums p on the consumer's stream and copies the sum back.
func (c *consumer) sum(p *cuda.DeviceBuffer) error {
	if err := c.total.Memset32Async(c.s, 0); err != nil {
		return err
	}
	if err := c.k.readSum.Launch(c.s, cuda.D1(1), cuda.D1(256), 0, cuda.In(p), uint64(256), uint64(0), c.total); err != nil {
		return err
	}
	if err := cuda.CopyAsync(c.s, c.res, c.total); err != nil {
		return err
	}
	if err := c.s.Synchronize(); err != nil {
		return err
	}
	return checkSum(c.res, c.k.pipelineWant)
}
