package nccl_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/nccl"
)

// Sum a buffer over every GPU of this process: one communicator per GPU, the
// all-reduces of all of them issued by one goroutine in one group. (Compiled, not
// run: it needs GPUs and NCCL.)
func Example() {
	n, err := cuda.DeviceCount()
	if err != nil || n == 0 {
		fmt.Println("no GPU:", err)
		return
	}
	devices := make([]cuda.Device, n)
	for i := range devices {
		devices[i] = cuda.Device(i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	comms, err := nccl.NewComms(ctx, devices...)
	if err != nil {
		fmt.Println(err)
		return
	}
	streams := make([]*cuda.Stream, n)
	bufs := make([]*cuda.DeviceBuffer, n)
	for i, c := range comms {
		defer c.Close()
		streams[i], _ = c.Context().NewStream()
		defer streams[i].Close()
		v := float32(i + 1)
		bufs[i], _ = cuda.AllocFrom(streams[i], []float32{v, v, v, v})
		defer bufs[i].Close()
	}
	err = nccl.Group(func() error {
		for i, c := range comms {
			if err := nccl.AllReduce[float32](c, streams[i], bufs[i], bufs[i], nccl.Sum); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	out := make([]float32, 4)
	for i, c := range comms {
		if err := c.Wait(ctx, streams[i]); err != nil {
			fmt.Println(err)
			return
		}
	}
	_ = cuda.CopyFromDevice(out, bufs[0])
	fmt.Println(out) // 1+2+…+n in each element
}

// One rank per process: each process runs this with its rank in $RANK, the number of
// ranks in $NRANKS and rank 0's address in $RANK0_ADDR (host:port). Rank 0 listens
// there and hands NCCL's id to the others, which retry until it is up; a rank that
// never comes makes the others fail with a *nccl.TimeoutError after the context's
// deadline. (Compiled, not run.)
func ExampleJoin() {
	rank, _ := strconv.Atoi(os.Getenv("RANK"))
	nranks, _ := strconv.Atoi(os.Getenv("NRANKS"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rv := &nccl.TCPRendezvous{Addr: os.Getenv("RANK0_ADDR")}
	c, err := nccl.Join(ctx, rv, rank, nranks, cuda.Device(0)) // one GPU per process
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	s, _ := c.Context().NewStream()
	defer s.Close()
	grad, _ := cuda.AllocFor[float32](s, 1024)
	defer grad.Close()
	// … compute this rank's gradient into grad …
	if err := nccl.AllReduce[float32](c, s, grad, grad, nccl.Avg); err != nil {
		fmt.Println(err)
		return
	}
	// Wait, not s.Synchronize: if another process dies, the collective would never
	// finish; Wait returns its error (or the context's) and aborts the communicator.
	if err := c.Wait(ctx, s); err != nil {
		fmt.Println(err)
		return
	}
}

// Send and receive in a ring: each rank sends its buffer to the next rank and
// receives from the previous one; the send and the receive of a rank go in one group,
// so that they progress together. (Here a ring of one rank, which sends to itself;
// with nccl.Join every process runs the same. Compiled, not run.)
func ExampleGroup() {
	comms, err := nccl.NewComms(context.Background(), cuda.Device(0))
	if err != nil {
		fmt.Println(err)
		return
	}
	c := comms[0]
	defer c.Close()
	s, _ := c.Context().NewStream()
	defer s.Close()
	send, _ := cuda.AllocFor[float32](s, 256)
	defer send.Close()
	recv, _ := cuda.AllocFor[float32](s, 256)
	defer recv.Close()
	next, prev := (c.Rank()+1)%c.Size(), (c.Rank()+c.Size()-1)%c.Size()
	err = nccl.Group(func() error {
		if err := nccl.Send[float32](c, s, send, next); err != nil {
			return err
		}
		return nccl.Recv[float32](c, s, recv, prev)
	})
	if err == nil {
		err = c.Wait(context.Background(), s)
	}
	fmt.Println(err)
}
