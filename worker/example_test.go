package worker_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/worker"
)

// Handlers are registered in every process of the program: the parent checks the
// name, a worker runs the handler.
func init() {
	worker.Handle("upper", func(ctx context.Context, req []byte) ([]byte, error) {
		return bytes.ToUpper(req), nil // GPU work goes here: a context, a kernel, copies
	})
}

// A program's main calls worker.Main first (this package's TestMain does), then
// starts a pool and sends it requests.
func Example() {
	// func main() {
	//	worker.Main() // in a worker process: serves, never returns
	//	...
	ctx := context.Background()
	p, err := worker.Start(ctx, worker.Options{Workers: 2, Spares: 1})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	out, err := p.Call(ctx, "upper", []byte("hello, worker"), worker.Retry())
	var fault *cuda.FaultError
	switch {
	case errors.As(err, &fault):
		// The request's worker faulted (and was replaced): the request failed on
		// the GPU, typed as in a single process (fault.Result, fault.Op).
		log.Printf("faulted: %v", fault.Result)
	case errors.Is(err, worker.ErrWorkerLost), errors.Is(err, worker.ErrRestartLimit):
		log.Printf("no answer: %v", err)
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Println(string(out))
	}
	// Output: HELLO, WORKER
}
