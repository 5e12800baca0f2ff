package nccl_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/gocuda/gocuda/cublas"
	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/nccl"
)

// Data-parallel training of a linear model y ≈ X·w by gradient descent on the mean
// squared error: each GPU holds a shard of the samples, computes the gradient of its
// shard (cuBLAS), and an all-reduce sums the shards' gradients, so that every GPU
// applies the gradient of all the data and keeps the same w. The result equals the
// single-GPU run (up to the order of the floating-point sums). One goroutine drives
// each GPU here; trainRank is also what one process per GPU runs, with a communicator
// from nccl.Join. (Compiled, not run: it needs GPUs and NCCL.)
func Example_dataParallel() {
	n, err := cuda.DeviceCount()
	if err != nil || n == 0 {
		fmt.Println("no GPU:", err)
		return
	}
	devices := make([]cuda.Device, n)
	for i := range devices {
		devices[i] = cuda.Device(i)
	}
	X, y := linearData()
	parallel, err := trainOnDevices(devices, X, y)
	if err != nil {
		fmt.Println(err)
		return
	}
	single, err := trainOnDevices(devices[:1], X, y)
	if err != nil {
		fmt.Println(err)
		return
	}
	diff := 0.0
	for i := range parallel {
		diff = math.Max(diff, math.Abs(parallel[i]-single[i]))
	}
	fmt.Printf("w on %d GPUs: %.4f, on one: %.4f, largest difference %.1g\n", n, parallel, single, diff)
}

// The model: samples of features and targets from w* = [1, -2, 0.5, 3], with a
// deterministic perturbation.
const (
	samples  = 840 // divisible by 1 to 8 ranks
	features = 4
	steps    = 60
	rate     = 0.5
)

// linearData returns X (samples×features, row-major) and y.
func linearData() (X, y []float64) {
	wStar := []float64{1, -2, 0.5, 3}
	X = make([]float64, samples*features)
	y = make([]float64, samples)
	for i := range samples {
		for j := range features {
			X[i*features+j] = math.Sin(float64(i*features+j) * 0.37)
		}
		for j := range features {
			y[i] += X[i*features+j] * wStar[j]
		}
		y[i] += 0.01 * math.Cos(float64(i))
	}
	return X, y
}

// trainOnDevices trains on the devices, one rank and one goroutine each, and returns
// rank 0's w.
func trainOnDevices(devices []cuda.Device, X, y []float64) ([]float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	comms, err := nccl.NewComms(ctx, devices...)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	ws := make([][]float64, len(comms))
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for i, c := range comms {
		wg.Go(func() { ws[i], errs[i] = trainRank(ctx, c, X, y) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			for _, c := range comms {
				c.Abort() // the other ranks' collectives would wait for ever
			}
			return nil, err
		}
	}
	return ws[0], nil
}

// trainRank runs the training on c's rank, with its shard of X and y, and returns w.
func trainRank(ctx context.Context, c *nccl.Comm, X, y []float64) ([]float64, error) {
	s, err := c.Context().NewStream()
	if err != nil {
		return nil, err
	}
	defer s.Close()
	m := samples / c.Size()
	lo := c.Rank() * m
	upload := func(v []float64) *cuda.DeviceBuffer {
		b, e := cuda.AllocFrom(s, v)
		if e != nil && err == nil {
			err = e
		}
		return b
	}
	x := upload(X[lo*features : (lo+m)*features]) // as column-major, features×m
	ys := upload(y[lo : lo+m])
	w := upload(make([]float64, features))
	r := upload(make([]float64, m))
	g := upload(make([]float64, features))
	for _, b := range []*cuda.DeviceBuffer{x, ys, w, r, g} {
		if b != nil {
			defer b.Close()
		}
	}
	if err != nil {
		return nil, err
	}
	for range steps {
		// r = Xw - y; g = Xᵀr / samples (all the samples: the all-reduce sums the shards).
		if err := cuda.CopyAsync(s, r, ys); err != nil {
			return nil, err
		}
		if err := cublas.Gemv(s, cublas.Trans, features, m, 1.0, x, features, w, -1.0, r); err != nil {
			return nil, err
		}
		if err := cublas.Gemv(s, cublas.NoTrans, features, m, 1.0/samples, x, features, r, 0.0, g); err != nil {
			return nil, err
		}
		if err := nccl.AllReduce[float64](c, s, g, g, nccl.Sum); err != nil {
			return nil, err
		}
		if err := cublas.Axpy(s, features, -rate, g, w); err != nil {
			return nil, err
		}
	}
	if err := c.Wait(ctx, s); err != nil {
		return nil, err
	}
	out := make([]float64, features)
	if err := cuda.CopyFromDevice(out, w); err != nil {
		return nil, err
	}
	return out, nil
}
