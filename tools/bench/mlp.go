package main

import (
	"errors"
	"fmt"
	"testing"
	"unsafe"

	"github.com/gocuda/gocuda/cublas"
	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/tools/internal/rawctx"
)

// The MLP workloads (cublas/sgemm-small, mlp/eager): ../shared/anchors/mlp.cu's network, the
// same in floor.cu, here on the raw layer and in mlp_bench_test.go on the idiomatic API.
// Per layer i: h[i+1] = W[i]·h[i] (cublasSgemm, N, N, m=256, n=16, k=256, column-major), then
// bias_relu<<<16, 256>>>(h[i+1], b[i], 256, 16). All memory is zeroed, as in mlp.cu.
const (
	mlpLayers     = 4
	mlpWidth      = 256     // rows of the activations, side of the weights
	mlpBatch      = 16      // columns of the activations
	mlpChunk      = 2000    // mlp/eager's passes per synchronization: mlp.cu's 2000
	mlpWarmup     = 20      // forward passes before timing, as mlp.cu (cuBLAS loads kernels at first use)
	biasThreads   = 256     // bias_relu's block
	blasWorkspace = 4 << 20 // the cuBLAS handle's workspace, as mlp.cu sets it
)

// biasBlocks is bias_relu's grid: (256*16+255)/256 as in mlp.cu.
const biasBlocks = (mlpWidth*mlpBatch + biasThreads - 1) / biasThreads

const sgemmSmallDesc = "one cublasSgemm_v2 of the MLP's layer shape (N, N, m=256, n=16, k=256: a 256x256 weight " +
	"times a 256x16 activation) on one non-blocking stream; timed: n calls, then one stream sync; gocuda: cublas.Gemm[float32]"

const mlpEagerDesc = "one eager forward pass of ../shared/anchors/mlp.cu's MLP (4 layers of 256x256, batch 16) on one " +
	"non-blocking stream: per layer cublasSgemm_v2 + bias_relu<<<16, 256>>>; timed as mlp.cu's per-iter: passes in chunks " +
	"of 2000, each chunk then a stream sync, all on the clock; gocuda: cublas.Gemm[float32] + Function.Launch (cuda.In for the bias)"

const mlpFusedDesc = "one forward pass of the same MLP with each layer one cuBLASLt matmul whose epilogue adds the " +
	"bias and applies ReLU (CUBLASLT_EPILOGUE_RELU_BIAS): 4 calls a pass; timed as mlp/eager; the C and raw sides " +
	"are mlp/eager's unfused pass (4 cublasSgemm_v2 + 4 bias_relu launches); gocuda: cublas.Matmul[float32] with " +
	"Epilogue{Act: ReLU, Bias}"

const mlpGraphDesc = "one forward pass of the same MLP captured once into a graph (cuStreamBeginCapture on the " +
	"stream, the eager pass, cuStreamEndCapture, cuGraphInstantiate) and replayed with cuGraphLaunch; timed as mlp/eager; " +
	"gocuda: Context.Capture of the eager pass, Exec.Launch"

// rawNet is the MLP workloads' state on the raw layer, as floor.cu's: a cuBLAS handle bound
// to Env.S1 with its workspace, and the network's memory.
type rawNet struct {
	blas cublasraw.CublasHandle
	w, b [mlpLayers]cudaraw.CUdeviceptr
	h    [mlpLayers + 1]cudaraw.CUdeviceptr
	ws   cudaraw.CUdeviceptr
	args [mlpLayers]*[4]unsafe.Pointer // bias_relu's kernelParams, into pinned biasArgs
	// scal holds SGEMM's alpha = 1 and beta = 0: an object of its own, free of Go
	// pointers, so that cgo may be handed pointers into it.
	scal *[2]float32
}

// biasArgs holds bias_relu's arguments; it is pinned, so kernelParams may point into it.
type biasArgs struct {
	h, b       cudaraw.CUdeviceptr
	rows, cols int32
}

// devF32 converts a device address to the *float32 that the cuBLAS bindings take for it (vet-clean).
func devF32(d cudaraw.CUdeviceptr) *float32 { return *(**float32)(unsafe.Pointer(&d)) }

// mlpNet returns the MLP workloads' raw state, made at the first call, on the calling
// workload's thread with the context current. Made here rather than in NewEnv so that
// a missing libcublas fails only the cuBLAS rows.
func (e *Env) mlpNet() (*rawNet, error) {
	if e.mlp == nil && e.mlpErr == nil {
		e.mlp, e.mlpErr = newRawNet(e)
	}
	return e.mlp, e.mlpErr
}

func newRawNet(e *Env) (*rawNet, error) {
	n := &rawNet{scal: &[2]float32{1, 0}}
	alloc := func(p *cudaraw.CUdeviceptr, elems uint64) rawctx.Step {
		return rawctx.Step{What: "cuMemAlloc + cuMemsetD8", Do: func() error {
			var d cudaraw.CUdeviceptr // a local: cgo checks the whole object an out-parameter points into
			if err := cudaraw.MemAlloc(&d, elems*4); err != nil {
				return err
			}
			*p = d
			return cudaraw.MemsetD8(d, 0, elems*4)
		}}
	}
	var steps []rawctx.Step
	for i := range mlpLayers {
		steps = append(steps, alloc(&n.w[i], mlpWidth*mlpWidth), alloc(&n.b[i], mlpWidth))
	}
	for i := range n.h {
		steps = append(steps, alloc(&n.h[i], mlpWidth*mlpBatch))
	}
	var h cublasraw.CublasHandle
	steps = append(steps,
		rawctx.Step{What: "cublasCreate", Do: func() error { return cublasraw.Create(&h) }},
		rawctx.Step{What: "cuMemAlloc", Do: func() error {
			var d cudaraw.CUdeviceptr
			err := cudaraw.MemAlloc(&d, blasWorkspace)
			n.ws = d
			return err
		}},
		rawctx.Step{What: "cublasSetStream", Do: func() error { return cublasraw.SetStream(h, e.S1) }},
		rawctx.Step{What: "cublasSetWorkspace", Do: func() error {
			return cublasraw.SetWorkspace(h, *(*unsafe.Pointer)(unsafe.Pointer(&n.ws)), blasWorkspace)
		}},
	)
	if err := rawctx.Run(steps...); err != nil {
		return nil, err
	}
	n.blas = h
	for i := range mlpLayers {
		a := &biasArgs{h: n.h[i+1], b: n.b[i], rows: mlpWidth, cols: mlpBatch}
		e.pinner.Pin(a)
		n.args[i] = &[4]unsafe.Pointer{unsafe.Pointer(&a.h), unsafe.Pointer(&a.b), unsafe.Pointer(&a.rows), unsafe.Pointer(&a.cols)}
	}
	for range mlpWarmup {
		if err := n.forward(e); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	if err := cudaraw.StreamSynchronize(e.S1); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	return n, nil
}

// gemm queues layer i's SGEMM on the handle's stream (Env.S1): h[i+1] = W[i]·h[i].
func (n *rawNet) gemm(i int) error {
	return cublasraw.Sgemm(n.blas, cublas.NoTrans, cublas.NoTrans, mlpWidth, mlpBatch, mlpWidth, &n.scal[0],
		devF32(n.w[i]), mlpWidth, devF32(n.h[i]), mlpWidth, &n.scal[1], devF32(n.h[i+1]), mlpWidth)
}

// forward queues one forward pass on e.S1.
func (n *rawNet) forward(e *Env) error {
	for i := range mlpLayers {
		if err := n.gemm(i); err != nil {
			return fmt.Errorf("cublasSgemm: %w", err)
		}
		if err := cudaraw.LaunchKernel(e.Bias, biasBlocks, 1, 1, biasThreads, 1, 1, 0, e.S1, &n.args[i][0], nil); err != nil {
			return fmt.Errorf("cuLaunchKernel(bias_relu): %w", err)
		}
	}
	return nil
}

// rawSgemmSmall is floor.cu's w_cublas_sgemm_small: b.N SGEMMs, then the sync, on the clock.
func rawSgemmSmall(b *testing.B, e *Env) error {
	b.StopTimer() // the first run makes the network
	n, err := e.mlpNet()
	if err != nil {
		return err
	}
	b.StartTimer()
	for range b.N {
		if err := n.gemm(0); err != nil {
			return err
		}
	}
	return cudaraw.StreamSynchronize(e.S1)
}

// rawMLPEager is floor.cu's w_mlp_eager: b.N forward passes in chunks of mlpChunk, each chunk
// followed by the sync, all on the clock.
func rawMLPEager(b *testing.B, e *Env) error {
	b.StopTimer()
	n, err := e.mlpNet()
	if err != nil {
		return err
	}
	b.StartTimer()
	for done := 0; done < b.N; done += mlpChunk {
		for range min(mlpChunk, b.N-done) {
			if err := n.forward(e); err != nil {
				return err
			}
		}
		if err := cudaraw.StreamSynchronize(e.S1); err != nil {
			return err
		}
	}
	return nil
}

// rawMLPGraph is floor.cu's w_mlp_graph: the forward pass captured on Env.S1 once (off the
// clock, with 20 warm-up replays), then b.N replays in chunks of mlpChunk, each chunk followed
// by the sync, on the clock.
func rawMLPGraph(b *testing.B, e *Env) error {
	b.StopTimer()
	if err := e.mlpGraph(); err != nil {
		return err
	}
	b.StartTimer()
	for done := 0; done < b.N; done += mlpChunk {
		for range min(mlpChunk, b.N-done) {
			if err := cudaraw.GraphLaunch(e.mlpExec, e.S1); err != nil {
				return err
			}
		}
		if err := cudaraw.StreamSynchronize(e.S1); err != nil {
			return err
		}
	}
	return nil
}

// mlpGraph captures the forward pass on Env.S1 into Env.mlpExec at its first call, with
// 20 warm-up replays.
func (e *Env) mlpGraph() error {
	n, err := e.mlpNet()
	if err != nil || e.mlpExec != 0 {
		return err
	}
	var g cudaraw.CUgraph
	if err := cudaraw.StreamBeginCapture(e.S1, cudaraw.CU_STREAM_CAPTURE_MODE_RELAXED); err != nil {
		return fmt.Errorf("cuStreamBeginCapture: %w", err)
	}
	ferr := n.forward(e)
	if err := cudaraw.StreamEndCapture(e.S1, &g); err != nil || ferr != nil {
		return fmt.Errorf("capturing the forward pass: %w", errors.Join(ferr, err))
	}
	err = cudaraw.GraphInstantiateWithFlags(&e.mlpExec, g, 0)
	if derr := cudaraw.GraphDestroy(g); err == nil {
		err = derr
	}
	if err != nil {
		return fmt.Errorf("cuGraphInstantiateWithFlags: %w", err)
	}
	for range mlpWarmup {
		if err := cudaraw.GraphLaunch(e.mlpExec, e.S1); err != nil {
			return fmt.Errorf("cuGraphLaunch: %w", err)
		}
	}
	return cudaraw.StreamSynchronize(e.S1)
}

// rawMLPGraphIter is one replay of the captured forward pass (mlp/graph-submit, -latency).
func rawMLPGraphIter(e *Env) error {
	if err := e.mlpGraph(); err != nil {
		return err
	}
	return cudaraw.GraphLaunch(e.mlpExec, e.S1)
}
