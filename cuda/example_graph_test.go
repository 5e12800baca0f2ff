package cuda_test

import (
	"fmt"
	"log"

	"github.com/gocuda/gocuda/cuda"
)

// Capture a few operations once and replay them: the temporary allocated in the
// capture, and the host data copied in, belong to the graph.
func ExampleContext_Capture() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		log.Fatal(err)
	}
	s, err := ctx.NewStream()
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	out, err := cuda.AllocFor[float32](s, 4)
	if err != nil {
		log.Fatal(err)
	}
	defer out.Close()

	host := []float32{1, 2, 3, 4}
	g, err := ctx.Capture(func(cs *cuda.Stream) error {
		tmp, err := cuda.AllocFor[float32](cs, 4)
		if err != nil {
			return err
		}
		defer tmp.Close() // kept by the graph until it no longer needs it
		if err := cuda.CopyToDeviceAsync(cs, tmp, host); err != nil {
			return err
		}
		return cuda.CopyAsync(cs, out, tmp)
	})
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()
	exec, err := g.Instantiate()
	if err != nil {
		log.Fatal(err)
	}
	defer exec.Close()

	host[0] = 100 // the graph copied host when it was captured
	for range 3 {
		if err := exec.Launch(s); err != nil {
			log.Fatal(err)
		}
	}
	got := make([]float32, 4)
	if err := cuda.CopyFromDevice(got, out); err != nil {
		log.Fatal(err)
	}
	fmt.Println(got)
	// Output: [1 2 3 4]
}

// An ExecCache replays code whose buffers change from call to call through one
// executable per key, updated in place instead of instantiated again.
func ExampleExecCache() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		log.Fatal(err)
	}
	s, err := ctx.NewStream()
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	cache := cuda.NewExecCache[string](ctx)
	defer cache.Close()
	for i := range 3 {
		b, err := cuda.AllocFor[uint32](s, 1024)
		if err != nil {
			log.Fatal(err)
		}
		v := uint32(i)
		err = cache.Launch(s, "fill", func(cs *cuda.Stream) error { return b.Memset32Async(cs, v) })
		if err != nil {
			log.Fatal(err)
		}
		got := make([]uint32, 1)
		if err := cuda.CopyFromDevice(got, b); err != nil {
			log.Fatal(err)
		}
		fmt.Println(got[0])
		b.Close() // freed once the cached executable moves on to the next buffer
	}
	fmt.Printf("%+v\n", cache.Stats())
	// Output:
	// 0
	// 1
	// 2
	// {Captures:3 Instantiations:1 Updates:2}
}

// Build a graph by hand: a memset, then two copies that depend on it and may run
// side by side, then a join.
func ExampleContext_NewGraph() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		log.Fatal(err)
	}
	s, err := ctx.NewStream()
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	var bufs [3]*cuda.DeviceBuffer
	for i := range bufs {
		if bufs[i], err = cuda.AllocFor[uint32](s, 256); err != nil {
			log.Fatal(err)
		}
		defer bufs[i].Close()
	}
	g, err := ctx.NewGraph()
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()
	set, err := g.AddMemset(bufs[0], 42)
	if err != nil {
		log.Fatal(err)
	}
	c1, err := g.AddCopy(bufs[1], bufs[0], set)
	if err != nil {
		log.Fatal(err)
	}
	c2, err := g.AddCopy(bufs[2], bufs[0], set)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := g.AddEmpty(c1, c2); err != nil {
		log.Fatal(err)
	}
	exec, err := g.Instantiate()
	if err != nil {
		log.Fatal(err)
	}
	defer exec.Close()
	if err := exec.Launch(s); err != nil {
		log.Fatal(err)
	}
	got := make([]uint32, 256)
	if err := cuda.CopyFromDevice(got, bufs[2]); err != nil {
		log.Fatal(err)
	}
	fmt.Println(got[0], got[255])
	// Output: 42 42
}

// A host node calls Go between GPU nodes of each replay: here it sums what a copy
// node brought into pinned memory, before the copy node after it runs.
func ExampleGraph_AddHost() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		log.Fatal(err)
	}
	s, err := ctx.NewStream()
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	dev, err := cuda.AllocFor[uint32](s, 256)
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	pinned, err := ctx.AllocHost(4 * 256)
	if err != nil {
		log.Fatal(err)
	}
	defer pinned.Close()
	g, err := ctx.NewGraph()
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()
	set, err := g.AddMemset(dev, 2)
	if err != nil {
		log.Fatal(err)
	}
	toHost, err := g.AddCopy(pinned, dev, set)
	if err != nil {
		log.Fatal(err)
	}
	var sum uint32
	_, err = g.AddHost(func() { // no GPU calls in here
		sum = 0
		for _, v := range cuda.HostSlice[uint32](pinned) {
			sum += v
		}
	}, toHost)
	if err != nil {
		log.Fatal(err)
	}
	exec, err := g.Instantiate()
	if err != nil {
		log.Fatal(err)
	}
	defer exec.Close()
	if err := exec.Launch(s); err != nil {
		log.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		log.Fatal(err)
	}
	fmt.Println(sum)
	// Output: 512
}
