package main

import (
	"errors"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"github.com/gocuda/gocuda/cublas"
	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/dl"
	"github.com/gocuda/gocuda/tools/bench/callbench"
	"github.com/stretchr/testify/require"
)

// BenchmarkMLPProbe splits mlp/eager's gap to C into its parts: the same forward pass with
// each half (SGEMM, bias_relu) on the idiomatic API or the raw layer, each half alone, and
// the idiomatic pass on a locked OS thread. Timed as BenchmarkMLP/eager. pair and
// sgemm-pair set the idiomatic pass (and cublas/sgemm-small's one SGEMM) beside the
// same calls from a C loop and from the raw layer in this process: the goals' ratios
// without the differences between processes. sgemm-pair also runs the raw SGEMM on a
// handle with a pool workspace, and inside cuda.Enqueue with Gemm's uses.
func BenchmarkMLPProbe(b *testing.B) {
	n := newGoNet(b)
	ctx := n.s.Context()
	// A raw handle bound to the network's stream, with a workspace of the same size.
	var h cublasraw.CublasHandle
	var ws cudaraw.CUdeviceptr
	require.NoError(b, ctx.Locked(func() error {
		if err := cublasraw.Create(&h); err != nil {
			return err
		}
		var d cudaraw.CUdeviceptr
		if err := cudaraw.MemAlloc(&d, blasWorkspace); err != nil {
			return err
		}
		ws = d
		if err := cublasraw.SetStream(h, n.s.Handle()); err != nil {
			return err
		}
		return cublasraw.SetWorkspace(h, *(*unsafe.Pointer)(unsafe.Pointer(&ws)), blasWorkspace)
	}))
	b.Cleanup(func() {
		_ = ctx.Locked(func() error {
			_ = n.s.Synchronize()
			return errors.Join(cublasraw.Destroy(h), cudaraw.MemFree(ws))
		})
	})
	scal := &[2]float32{1, 0}
	var w, bb [mlpLayers]cudaraw.CUdeviceptr
	var hh [mlpLayers + 1]cudaraw.CUdeviceptr
	ptr := func(m cuda.Memory) cudaraw.CUdeviceptr {
		p, err := cuda.DevicePtr[float32](m)
		require.NoError(b, err)
		return cudaraw.CUdeviceptr(uintptr(unsafe.Pointer(p)))
	}
	for i := range mlpLayers {
		w[i], bb[i] = ptr(n.w[i]), ptr(n.b[i])
	}
	for i := range hh {
		hh[i] = ptr(n.h[i])
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	var args [mlpLayers]*[4]unsafe.Pointer
	for i := range mlpLayers {
		a := &biasArgs{h: hh[i+1], b: bb[i], rows: mlpWidth, cols: mlpBatch}
		pin.Pin(a)
		args[i] = &[4]unsafe.Pointer{unsafe.Pointer(&a.h), unsafe.Pointer(&a.b), unsafe.Pointer(&a.rows), unsafe.Pointer(&a.cols)}
	}
	rawGemm := func(i int) error {
		return cublasraw.Sgemm(h, cublas.NoTrans, cublas.NoTrans, mlpWidth, mlpBatch, mlpWidth, &scal[0],
			devF32(w[i]), mlpWidth, devF32(hh[i]), mlpWidth, &scal[1], devF32(hh[i+1]), mlpWidth)
	}
	rawBias := func(i int) error {
		return cudaraw.LaunchKernel(n.bias.Handle(), biasBlocks, 1, 1, biasThreads, 1, 1, 0, n.s.Handle(), &args[i][0], nil)
	}
	goBias := func(i int) error {
		return n.bias.Launch(n.s, cuda.D1(biasBlocks), cuda.D1(biasThreads), 0,
			n.h[i+1], cuda.In(n.b[i]), int32(mlpWidth), int32(mlpBatch))
	}
	// c: the same pass from C (callbench.MLP), on the raw handle and the same buffers.
	proc := func(l *dl.Library, name string) uintptr {
		a, err := l.NewProc(name).Addr()
		require.NoError(b, err)
		return a
	}
	cm := &callbench.MLP{Sgemm: proc(cublasraw.Library(), "cublasSgemm_v2"), Launch: proc(cudaraw.Library(), "cuLaunchKernel"),
		Handle: uintptr(h), Stream: uintptr(n.s.Handle()), Bias: uintptr(n.bias.Handle()), Args: args[:],
		Width: mlpWidth, Batch: mlpBatch, Blocks: biasBlocks, Threads: biasThreads}
	for i := range mlpLayers {
		cm.W = append(cm.W, uintptr(w[i]))
	}
	for i := range hh {
		cm.H = append(cm.H, uintptr(hh[i]))
	}
	// c1: cublas/sgemm-small's one SGEMM (layer 0's) from C.
	c1 := *cm
	c1.Bias, c1.Args, c1.W, c1.H = 0, nil, cm.W[:1], cm.H[:2]
	none := func(int) error { return nil }
	// locked: the pass runs on a locked OS thread with the context current (needed by
	// the raw halves; the idiomatic ones find it current).
	run := func(name string, locked bool, gemm, bias func(int) error) {
		b.Run(name, func(b *testing.B) {
			if locked {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				require.NoError(b, cudaraw.CtxSetCurrent(ctx.Handle()))
			}
			b.ResetTimer()
			for done := 0; done < b.N; done += mlpChunk {
				for range min(mlpChunk, b.N-done) {
					for i := range mlpLayers {
						if err := gemm(i); err != nil {
							b.Fatal(err)
						}
						if err := bias(i); err != nil {
							b.Fatal(err)
						}
					}
				}
				if err := n.s.Synchronize(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// pair: the idiomatic pass and the raw one on the same buffers and stream, in
	// alternating chunks (see alternate).
	b.Run("pair", func(b *testing.B) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		require.NoError(b, cudaraw.CtxSetCurrent(ctx.Handle()))
		callbench.Alternate(b, 200, n.s.Synchronize, callbench.Side{Name: "c", Run: cm.Loop},
			callbench.Loop("raw", passOf(rawGemm, rawBias)), callbench.Loop("go", passOf(n.gemm, goBias)))
	})
	// sgemm-pair's raw-poolws: a second raw handle whose workspace is pool memory, as
	// the idiomatic handles' is (the raw one's is cuMemAlloc memory).
	var h2 cublasraw.CublasHandle
	wsPool, err := cuda.AllocFor[byte](n.s, blasWorkspace)
	require.NoError(b, err)
	b.Cleanup(func() { wsPool.Close() })
	require.NoError(b, ctx.Locked(func() error {
		if err := cublasraw.Create(&h2); err != nil {
			return err
		}
		if err := cublasraw.SetStream(h2, n.s.Handle()); err != nil {
			return err
		}
		p, err := cuda.DevicePtr[byte](wsPool)
		if err != nil {
			return err
		}
		return cublasraw.SetWorkspace(h2, unsafe.Pointer(p), blasWorkspace)
	}))
	b.Cleanup(func() {
		_ = ctx.Locked(func() error { _ = n.s.Synchronize(); return cublasraw.Destroy(h2) })
	})
	b.Run("sgemm-pair", func(b *testing.B) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		require.NoError(b, cudaraw.CtxSetCurrent(ctx.Handle()))
		poolGemm := func() error {
			return cublasraw.Sgemm(h2, cublas.NoTrans, cublas.NoTrans, mlpWidth, mlpBatch, mlpWidth, &scal[0],
				devF32(w[0]), mlpWidth, devF32(hh[0]), mlpWidth, &scal[1], devF32(hh[1]), mlpWidth)
		}
		// enqueue and enqueue-ws: the raw calls inside cuda.Enqueue with the uses
		// that cublas.Gemm declares (and its workspace's), so the gap between raw and
		// go splits into the hand-off and the handle cache around it.
		uses := []cuda.Use{cuda.Reads(n.w[0]), cuda.Reads(n.h[0]), cuda.Writes(n.h[1])}
		usesWS := append(slices.Clone(uses), cuda.Writes(wsPool))
		callbench.Alternate(b, 400, n.s.Synchronize, callbench.Side{Name: "c", Run: c1.Loop},
			callbench.Loop("raw", func() error { return rawGemm(0) }),
			callbench.Loop("raw-poolws", poolGemm),
			callbench.Loop("enqueue", func() error {
				return cuda.Enqueue(n.s, func(cudaraw.CUcontext, cudaraw.CUstream) error { return rawGemm(0) }, uses...)
			}),
			callbench.Loop("enqueue-ws", func() error {
				return cuda.Enqueue(n.s, func(cudaraw.CUcontext, cudaraw.CUstream) error { return poolGemm() }, usesWS...)
			}),
			callbench.Loop("go", func() error { return n.gemm(0) }))
	})
	// factors: raw passes that differ from bench's raw layer (tools/bench/mlp.go, cuMemAlloc
	// memory, its own stream and handle) in one thing at a time, beside the idiomatic pass:
	// pool memory (AllocFor) against cuMemAlloc memory on one stream and handle, and a
	// stream of ours against the raw layer's on cuMemAlloc memory.
	b.Run("factors", func(b *testing.B) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		require.NoError(b, cudaraw.CtxSetCurrent(ctx.Handle()))
		e, err := NewEnv()
		require.NoError(b, err)
		defer e.pinner.Unpin()
		rn, err := e.mlpNet()
		require.NoError(b, err)
		plainGemm := func(i int) error { // the raw layer's memory, on the network's stream and handle
			return cublasraw.Sgemm(h, cublas.NoTrans, cublas.NoTrans, mlpWidth, mlpBatch, mlpWidth, &scal[0],
				devF32(rn.w[i]), mlpWidth, devF32(rn.h[i]), mlpWidth, &scal[1], devF32(rn.h[i+1]), mlpWidth)
		}
		plainBias := func(i int) error {
			return cudaraw.LaunchKernel(e.Bias, biasBlocks, 1, 1, biasThreads, 1, 1, 0, n.s.Handle(), &rn.args[i][0], nil)
		}
		sync := func() error {
			return errors.Join(n.s.Synchronize(), cudaraw.StreamSynchronize(e.S1))
		}
		callbench.Alternate(b, 200, sync,
			callbench.Loop("plain-raw", func() error { return rn.forward(e) }),
			callbench.Loop("plain-ours", passOf(plainGemm, plainBias)),
			callbench.Loop("pool-ours", passOf(rawGemm, rawBias)),
			callbench.Loop("go", passOf(n.gemm, goBias)))
	})
	run("go-go", false, n.gemm, goBias)
	run("go-go-locked", true, n.gemm, goBias)
	run("raw-raw", true, rawGemm, rawBias)
	run("raw-go", true, rawGemm, goBias)
	run("go-raw", true, n.gemm, rawBias)
	run("go-none", false, n.gemm, none)
	run("raw-none", true, rawGemm, none)
	run("none-go", false, none, goBias)
	run("none-raw", true, none, rawBias)
}

// passOf returns one forward pass made of gemm and bias, layer by layer.
func passOf(gemm, bias func(int) error) func() error {
	return func() error {
		for i := range mlpLayers {
			if err := gemm(i); err != nil {
				return err
			}
			if err := bias(i); err != nil {
				return err
			}
		}
		return nil
	}
}
