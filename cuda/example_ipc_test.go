package cuda_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gocuda/gocuda/cuda"
)

// GPU memory handed from one process to another through a shared pool. Both sides
// run here in one process for the example's sake; in practice the importer is
// another process, which DialIPC connects from. (It needs a GPU, so it is compiled
// but not run by go test.)
func Example_ipc() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		fmt.Println("no GPU:", err)
		return
	}
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dir, err := os.MkdirTemp("", "gpu-ipc") // mode 0700
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "sock")

	// The exporter: a shared pool, listening for the one importer it allows.
	pool, err := ctx.NewSharedPool()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	ln, err := pool.Listen(path, cuda.IPCPeers{PIDs: []int{os.Getpid()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ln.Close()
	s, _ := ctx.NewStream()
	defer s.Close()
	buf, err := pool.Alloc(s, 4<<10)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer buf.Close()
	go func() {
		exp, err := ln.Accept(cctx)
		if err != nil {
			return
		}
		defer exp.Close()
		_ = buf.Memset32Async(s, 42)
		lease, err := exp.Send(cctx, s, buf) // the importer's reads wait for the memset
		if err == nil {
			_ = lease.Wait(cctx) // given back: later writes wait for the importer's reads
		}
	}()

	// The importer: its buffer is ordinary device memory of its context.
	imp, err := cuda.DialIPC(cctx, ctx, path)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer imp.Close()
	b, err := imp.Receive(cctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	out := make([]uint32, 4)
	if err := cuda.CopyFromDevice(out, b); err != nil {
		fmt.Println(err)
		return
	}
	_ = b.Close() // gives it back
	fmt.Println(out)
}
