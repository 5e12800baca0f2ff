package worker_test

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/worker"
)

// TestMain is a program's main as the package asks for it: worker.Main first, so
// that the test binary, started again by a pool, serves as a worker. The workers
// inherit the environment cudatest.Main sets up, so they run on the same fake
// driver as the tests (or on the GPU).
func TestMain(m *testing.M) {
	worker.Main()
	os.Exit(cudatest.Main(m))
}

var (
	//go:embed testdata/faults.ptx
	faultsPTX []byte
	//go:embed testdata/axpy.ptx
	axpyPTX []byte
)

// gpu is a worker's CUDA state, made by setupGPU: the primary context and the
// test kernels, and what each took to make.
var gpu struct {
	err         error // no driver: the GPU handlers fail with it
	ctx         *cuda.Context
	mods        []*cuda.Module
	fault, axpy *cuda.Function
	contextTime time.Duration
	moduleTime  time.Duration
}

// Environment variables the tests give workers through Options.Env.
const (
	envSetupFail  = "WORKER_TEST_SETUP_FAIL"
	envSetupSleep = "WORKER_TEST_SETUP_SLEEP"
)

func setupGPU() error {
	t0 := time.Now()
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		gpu.err = err
		return nil // a test without a driver still runs the handlers that need none
	}
	gpu.ctx, gpu.contextTime = ctx, time.Since(t0)
	t1 := time.Now()
	for _, img := range [][]byte{faultsPTX, axpyPTX} {
		m, err := ctx.LoadModule(img)
		if err != nil {
			return err
		}
		gpu.mods = append(gpu.mods, m)
	}
	if gpu.fault, err = gpu.mods[0].Function("fault_illegal_address"); err != nil {
		return err
	}
	if gpu.axpy, err = gpu.mods[1].Function("axpy_f32"); err != nil {
		return err
	}
	gpu.moduleTime = time.Since(t1)
	return nil
}

// cleanupGPU unloads the modules and fails on any driver API violation the fake
// recorded in the worker: the pool reports it as an exit error.
func cleanupGPU() error {
	var errs []error
	for _, m := range gpu.mods {
		errs = append(errs, m.Close())
	}
	if cudatest.Strict() {
		if n, text := cudatest.Violations(); n > 0 {
			errs = append(errs, fmt.Errorf("%d driver API violation(s) in worker %d:\n%s", n, os.Getpid(), text))
		}
	}
	return errors.Join(errs...)
}

// canceled counts the requests whose context a worker saw canceled.
var canceled atomic.Int64

func init() {
	worker.Setup(func(ctx context.Context) error {
		if msg := os.Getenv(envSetupFail); msg != "" {
			return errors.New(msg)
		}
		if d, err := time.ParseDuration(os.Getenv(envSetupSleep)); err == nil {
			time.Sleep(d)
		}
		return setupGPU()
	}, cleanupGPU)

	worker.Handle("echo", func(ctx context.Context, req []byte) ([]byte, error) { return req, nil })
	worker.Handle("pid", func(ctx context.Context, req []byte) ([]byte, error) {
		return []byte(strconv.Itoa(os.Getpid())), nil
	})
	// slow-pid answers the request with the worker's pid after a few milliseconds,
	// so that concurrent calls spread over the workers.
	worker.Handle("slow-pid", func(ctx context.Context, req []byte) ([]byte, error) {
		time.Sleep(5 * time.Millisecond)
		return fmt.Appendf(nil, "%d:%s", os.Getpid(), req), nil
	})
	worker.Handle("fail", func(ctx context.Context, req []byte) ([]byte, error) {
		return nil, fmt.Errorf("bad input %q", req)
	})
	worker.Handle("panic", func(ctx context.Context, req []byte) ([]byte, error) { panic("boom") })
	worker.Handle("crash", func(ctx context.Context, req []byte) ([]byte, error) { os.Exit(7); return nil, nil })
	worker.Handle("hang", func(ctx context.Context, req []byte) ([]byte, error) { select {} })
	// wait returns when its context ends, counting the cancellation.
	worker.Handle("wait", func(ctx context.Context, req []byte) ([]byte, error) {
		<-ctx.Done()
		canceled.Add(1)
		return nil, ctx.Err()
	})
	worker.Handle("canceled", func(ctx context.Context, req []byte) ([]byte, error) {
		return []byte(strconv.FormatInt(canceled.Load(), 10)), nil
	})
	// block-on waits for its context in the worker whose pid the request names and
	// answers with its pid in any other.
	worker.Handle("block-on", func(ctx context.Context, req []byte) ([]byte, error) {
		if string(req) == strconv.Itoa(os.Getpid()) {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return []byte(strconv.Itoa(os.Getpid())), nil
	})
	// raw-fault returns the driver's sticky error as a library would, untyped.
	worker.Handle("raw-fault", func(ctx context.Context, req []byte) ([]byte, error) {
		return nil, fmt.Errorf("some library: %w", cudaraw.ErrIllegalAddress)
	})
	worker.Handle("gpu-echo", gpuEcho)
	worker.Handle("fault", fault)
	worker.Handle("axpy", axpy)
	worker.Handle("phases", func(ctx context.Context, req []byte) ([]byte, error) {
		return fmt.Appendf(nil, "%d %d", gpu.contextTime, gpu.moduleTime), nil
	})
}

// onStream runs f on a stream of the worker's primary context.
func onStream(ctx context.Context, f func(s *cuda.Stream) ([]byte, error)) ([]byte, error) {
	if gpu.err != nil {
		return nil, gpu.err
	}
	s, err := gpu.ctx.AcquireStream(ctx)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return f(s)
}

// gpuEcho answers the request with its bytes after a round trip through device
// memory.
func gpuEcho(ctx context.Context, req []byte) ([]byte, error) {
	return onStream(ctx, func(s *cuda.Stream) ([]byte, error) {
		b, err := cuda.AllocFor[byte](s, max(len(req), 1))
		if err != nil {
			return nil, err
		}
		defer b.Close()
		out := make([]byte, len(req))
		if err := cuda.CopyToDeviceAsync(s, b, req); err != nil {
			return nil, err
		}
		if err := cuda.CopyFromDeviceAsync(s, out, b); err != nil {
			return nil, err
		}
		return out, s.SynchronizeContext(ctx)
	})
}

// fault runs a kernel that stores to an address no allocation has: a sticky
// CUDA_ERROR_ILLEGAL_ADDRESS that ends the worker's primary context.
func fault(ctx context.Context, req []byte) ([]byte, error) {
	return onStream(ctx, func(s *cuda.Stream) ([]byte, error) {
		if err := gpu.fault.Launch(s, cuda.D1(1), cuda.D1(1), 0); err != nil {
			return nil, err
		}
		if err := s.SynchronizeContext(ctx); err != nil {
			return nil, fmt.Errorf("fault kernel: %w", err)
		}
		return nil, errors.New("fault kernel: no fault")
	})
}
