package cudnn

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cudnn/cudnnraw"
)

// ConvMode says whether a convolution flips its filter.
type ConvMode int

const (
	// CrossCorrelation slides the filter as it is (CUDNN_CROSS_CORRELATION): what deep
	// learning frameworks call convolution. It is the zero value.
	CrossCorrelation ConvMode = iota
	// Convolution flips the filter in both spatial dimensions (CUDNN_CONVOLUTION): the
	// mathematical convolution.
	Convolution
)

func (m ConvMode) cudnn() cudnnraw.CudnnConvolutionMode {
	if m == Convolution {
		return cudnnraw.CUDNN_CONVOLUTION
	}
	return cudnnraw.CUDNN_CROSS_CORRELATION
}

// Conv is the geometry of a 2-D convolution: zero padding added on each side, the
// stride of the filter over the padded input and the dilation of the filter (its
// taps are Dilation elements apart). A zero stride or dilation is 1, so the zero Conv
// is an unpadded cross-correlation with unit strides.
type Conv struct {
	PadH, PadW           int
	StrideH, StrideW     int // 0 is 1
	DilationH, DilationW int // 0 is 1
	Mode                 ConvMode
}

// or1 is a stride or dilation with 0 read as 1.
func or1(v int) int {
	if v == 0 {
		return 1
	}
	return v
}

// normal returns c with its strides and dilations spelled out: the same convolution,
// one key in the algorithm cache.
func (c Conv) normal() Conv {
	c.StrideH, c.StrideW = or1(c.StrideH), or1(c.StrideW)
	c.DilationH, c.DilationW = or1(c.DilationH), or1(c.DilationW)
	return c
}

func (c Conv) check() error {
	for _, v := range []int{c.PadH, c.PadW, c.StrideH, c.StrideW, c.DilationH, c.DilationW} {
		if v < 0 || v > maxInt32 {
			return fmt.Errorf("%w: convolution %+v: paddings, strides and dilations must be non-negative", cuda.ErrInvalidArgument, c)
		}
	}
	if c.Mode != CrossCorrelation && c.Mode != Convolution {
		return fmt.Errorf("%w: convolution mode %d", cuda.ErrInvalidArgument, int(c.Mode))
	}
	return nil
}

// ConvolutionOutputShape returns the shape of the output of convolving an x-shaped
// input with a w-shaped filter: N×K×P×Q with P = (H + 2·PadH − ((R−1)·DilationH + 1)) /
// StrideH + 1, Q likewise (cudnnGetConvolution2dForwardOutputDim, computed in Go).
// The channels of x and w must agree, and the dilated filter must fit in the padded
// input; otherwise the error matches cuda.ErrInvalidArgument.
func ConvolutionOutputShape(x Tensor4D, w Filter, c Conv) (Tensor4D, error) {
	y, err := outputShape(x, w, c)
	if err != nil {
		return Tensor4D{}, wrap("convolution output shape", err)
	}
	return y, nil
}

func outputShape(x Tensor4D, w Filter, c Conv) (Tensor4D, error) {
	if err := x.check("x"); err != nil {
		return Tensor4D{}, err
	}
	if err := w.check("w"); err != nil {
		return Tensor4D{}, err
	}
	if err := c.check(); err != nil {
		return Tensor4D{}, err
	}
	if x.C != w.C {
		return Tensor4D{}, fmt.Errorf("%w: x (%v) has %d channels, the filter (%v) %d", cuda.ErrInvalidArgument, x, x.C, w, w.C)
	}
	c = c.normal()
	out := func(in, pad, k, dil, stride int) int {
		span := (k-1)*dil + 1 // int is 64-bit: no overflow from int32 operands
		if in+2*pad < span {
			return 0
		}
		return (in+2*pad-span)/stride + 1
	}
	y := Tensor4D{N: x.N, C: w.K, H: out(x.H, c.PadH, w.R, c.DilationH, c.StrideH), W: out(x.W, c.PadW, w.S, c.DilationW, c.StrideW)}
	if y.H == 0 || y.W == 0 {
		return Tensor4D{}, fmt.Errorf("%w: the dilated filter (%v, dilation %d×%d) is larger than the padded input (%v, padding %d×%d)",
			cuda.ErrInvalidArgument, w, c.DilationH, c.DilationW, x, c.PadH, c.PadW)
	}
	return y, y.check("y")
}

// DefaultWorkspaceLimit is the most device memory, in bytes, that an algorithm chosen
// for Convolve may use as workspace, unless WorkspaceLimit says otherwise.
const DefaultWorkspaceLimit = 256 << 20

// ConvOption configures how Convolve chooses its algorithm.
type ConvOption func(*convConfig)

// convConfig is the options: part of the algorithm cache's key.
type convConfig struct {
	find        bool
	limit       int
	tensorCores bool
	fixed       bool
	algo        cudnnraw.CudnnConvolutionFwdAlgo
}

// FindAlgorithm chooses the algorithm by running every candidate on the call's
// operands and taking the fastest (cudnnFindConvolutionForwardAlgorithmEx), instead
// of by cuDNN's heuristics. It runs once per context, shapes, type and options (the
// choice is cached): that call waits for the trials to finish, with a scratch output
// (y is not touched) and the largest workspace within the limit, both from the
// device's pool.
func FindAlgorithm() ConvOption { return func(c *convConfig) { c.find = true } }

// WorkspaceLimit bounds the workspace, in bytes, of the algorithm chosen (default
// DefaultWorkspaceLimit); algorithms that need more are passed over.
func WorkspaceLimit(bytes int) ConvOption { return func(c *convConfig) { c.limit = bytes } }

// TensorCores lets float32 convolutions use TF32 tensor cores (CUDNN_DEFAULT_MATH on
// GPUs that have them): faster, with about 10 bits of mantissa in the products. By
// default float32 convolutions are computed in full float32 (CUDNN_FMA_MATH); float64
// ones are not affected.
func TensorCores() ConvOption { return func(c *convConfig) { c.tensorCores = true } }

// ConvAlgorithm is a forward convolution algorithm of cuDNN.
type ConvAlgorithm = cudnnraw.CudnnConvolutionFwdAlgo

// Forward convolution algorithms, for Algorithm.
const (
	ImplicitGEMM        ConvAlgorithm = cudnnraw.CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM
	ImplicitPrecompGEMM ConvAlgorithm = cudnnraw.CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM
	GEMM                ConvAlgorithm = cudnnraw.CUDNN_CONVOLUTION_FWD_ALGO_GEMM
	Direct              ConvAlgorithm = cudnnraw.CUDNN_CONVOLUTION_FWD_ALGO_DIRECT
	FFT                 ConvAlgorithm = cudnnraw.CUDNN_CONVOLUTION_FWD_ALGO_FFT
	FFTTiling           ConvAlgorithm = cudnnraw.CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING
	Winograd            ConvAlgorithm = cudnnraw.CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD
	WinogradNonfused    ConvAlgorithm = cudnnraw.CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED
)

// Algorithm uses algorithm a without choosing; the workspace limit does not apply.
// cuDNN's error (such as cudnnraw.ErrNotSupported) is returned if a cannot compute
// the convolution.
func Algorithm(a ConvAlgorithm) ConvOption {
	return func(c *convConfig) { c.fixed, c.algo = true, a }
}

func convOptions(opts []ConvOption) (convConfig, error) {
	cfg := convConfig{limit: DefaultWorkspaceLimit}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.limit < 0 {
		return cfg, fmt.Errorf("%w: workspace limit %d", cuda.ErrInvalidArgument, cfg.limit)
	}
	if cfg.fixed && (cfg.algo < 0 || cfg.algo >= cudnnraw.CUDNN_CONVOLUTION_FWD_ALGO_COUNT) {
		return cfg, fmt.Errorf("%w: algorithm %d", cuda.ErrInvalidArgument, int(cfg.algo))
	}
	if cfg.fixed {
		cfg.find, cfg.limit = false, 0 // neither applies: one key per algorithm
	}
	return cfg, nil
}

// Convolve computes y = alpha·conv(x, w) + beta·y on s, where x is an
// xs-shaped tensor, w a ws-shaped filter and y a tensor of the shape
// ConvolutionOutputShape(xs, ws, conv) gives: cudnnConvolutionForward. x, w and y
// hold T (y must not overlap x or w); with beta 0, y is not read.
//
// The algorithm is chosen once per context, shapes, T and options, and cached: by
// cuDNN's heuristics (cudnnGetConvolutionForwardAlgorithm_v7), by trial with
// FindAlgorithm, or fixed with Algorithm, within WorkspaceLimit. The workspace it
// needs comes from the device's pool on s and is freed, stream-ordered, once the
// convolution is queued. float32 convolutions are computed in full float32 unless
// TensorCores is given.
//
// Bad arguments (sizes, channels that disagree, memory of another element type or too
// small, overlap) are errors matching cuda.ErrInvalidArgument, before any CUDA call.
// cuDNN's failures are its Status, and a function the installed cuDNN lacks (older
// than the headers) a *dl.SymbolError, wrapped as "cudnn: convolution forward: ...".
func Convolve[T Float](s *cuda.Stream, conv Conv, alpha T, x cuda.Memory, xs Tensor4D, w cuda.Memory, ws Filter,
	beta T, y cuda.Memory, opts ...ConvOption) error {
	const op = "convolution forward"
	fail := func(err error) error { return wrap(op, err) }
	cfg, err := convOptions(opts)
	if err != nil {
		return fail(err)
	}
	ys, err := outputShape(xs, ws, conv)
	if err != nil {
		return fail(err)
	}
	if err := cuda.CheckEnqueue(s); err != nil {
		return fail(err)
	}
	px, err := operand[T](s, "x", x, xs.Len())
	if err != nil {
		return fail(err)
	}
	pw, err := operand[T](s, "w", w, ws.Len())
	if err != nil {
		return fail(err)
	}
	py, err := operand[T](s, "y", y, ys.Len())
	if err != nil {
		return fail(err)
	}
	size := elemSize[T]()
	if overlap(px, xs.Len()*size, py, ys.Len()*size) || overlap(pw, ws.Len()*size, py, ys.Len()*size) {
		return fail(fmt.Errorf("%w: y overlaps x or w", cuda.ErrInvalidArgument))
	}

	dt := dataType[T]()
	var d descs
	defer d.destroy()
	var cd convDescs
	if cd.x, err = d.tensor(dt, xs); err != nil {
		return fail(err)
	}
	if cd.w, err = d.filter(dt, ws); err != nil {
		return fail(err)
	}
	if cd.c, err = d.convolution(dt, conv); err != nil {
		return fail(err)
	}
	if cd.y, err = d.tensor(dt, ys); err != nil {
		return fail(err)
	}

	ctx := s.Context()
	key := algoKey{ctx: ctx.Handle(), dev: ctx.Device(), dt: dt, x: xs, w: ws, conv: conv.normal(), cfg: cfg}
	ch, err := choose(key, func() (choice, error) {
		return selectAlgorithm(s, cfg, dt, cd, x, px, w, pw, ys.Len()*size)
	})
	if err != nil {
		return fail(err)
	}

	uses := []cuda.Use{cuda.Reads(x), cuda.Reads(w), cuda.Writes(y)}
	var wp unsafe.Pointer
	if ch.workspace > 0 {
		buf, err := ctx.Alloc(s, int(ch.workspace))
		if err != nil {
			return fail(fmt.Errorf("workspace: %w", err))
		}
		defer buf.Close() // after the convolution on s
		wp = devAddr(buf)
		uses = append(uses, cuda.Writes(buf))
	}
	return call(op, s, func(c cudaraw.CUcontext, h cudnnraw.CudnnHandle) error {
		if err := cudnnraw.SetConvolutionMathType(cd.c, ch.math); err != nil {
			return err
		}
		return cudnnraw.ConvolutionForwardIn(c, h, unsafe.Pointer(&alpha), cd.x, px, cd.w, pw, cd.c, ch.algo, wp, ch.workspace,
			unsafe.Pointer(&beta), cd.y, py)
	}, uses...)
}

// convDescs are the descriptors of one convolution.
type convDescs struct {
	x, y cudnnraw.CudnnTensorDescriptor
	w    cudnnraw.CudnnFilterDescriptor
	c    cudnnraw.CudnnConvolutionDescriptor
}

// devAddr is a buffer's device address as the void * cuDNN takes.
func devAddr(b *cuda.DeviceBuffer) unsafe.Pointer {
	p, _ := cuda.DevicePtr[byte](b) // untyped memory from Alloc: no type to refuse
	return unsafe.Pointer(p)
}

// overlap reports whether na bytes at device address a and nb bytes at b share an
// address. (The addresses come from cuda.DevicePtr: Memory.Ptr would count as an
// address handed out for GOCUDA_STREAMCHECK.)
func overlap(a unsafe.Pointer, na int, b unsafe.Pointer, nb int) bool {
	pa, pb := uintptr(a), uintptr(b)
	return pa < pb+uintptr(nb) && pb < pa+uintptr(na)
}

// The algorithm cache: the choice of algorithm, its math type and workspace size per
// (context, device, shapes, type, options). Plain values, no CUDA resource: nothing
// to release. One goroutine chooses for a key while the others that need it wait;
// a failed choice is not kept (each waiter then tries itself).

// choice is a chosen algorithm.
type choice struct {
	algo      cudnnraw.CudnnConvolutionFwdAlgo
	math      cudnnraw.CudnnMathType
	workspace uint64
}

type algoKey struct {
	ctx  cudaraw.CUcontext
	dev  cuda.Device // a new context may reuse a destroyed one's handle
	dt   cudnnraw.CudnnDataType
	x    Tensor4D
	w    Filter
	conv Conv
	cfg  convConfig
}

type algoEntry struct {
	done chan struct{} // closed once chosen (ok) or failed
	ok   bool
	c    choice
}

// maxAlgoEntries bounds the cache: past it, the chosen entries are forgotten.
const maxAlgoEntries = 4096

// algos maps an algoKey to its *algoEntry. A sync.Map: a convolution looks its
// choice up without a lock or a write to memory that other goroutines share, so
// that convolutions from many goroutines do not serialize on the cache.
var (
	algos     sync.Map
	algoCount atomic.Int64 // entries in algos (about: adds and deletes race)
)

// choose returns k's cached choice, or makes it with sel.
func choose(k algoKey, sel func() (choice, error)) (choice, error) {
	for {
		v, ok := algos.Load(k)
		if !ok {
			if algoCount.Load() >= maxAlgoEntries {
				prune()
			}
			e := &algoEntry{done: make(chan struct{})}
			if v, ok = algos.LoadOrStore(k, e); !ok {
				algoCount.Add(1)
				return e.fill(k, sel)
			}
		}
		e := v.(*algoEntry)
		<-e.done
		if e.ok {
			return e.c, nil
		}
	}
}

// fill makes e's choice with sel, keeps it, and wakes the waiters; a failure (or a
// panic) removes e, so that the next call chooses again. The choice is written
// before done is closed, and read only after.
func (e *algoEntry) fill(k algoKey, sel func() (choice, error)) (c choice, err error) {
	ok := false
	defer func() {
		if ok {
			e.c, e.ok = c, true
		} else if algos.CompareAndDelete(k, e) {
			algoCount.Add(-1)
		}
		close(e.done)
	}()
	c, err = sel()
	ok = err == nil
	return c, err
}

// chosen reports whether e's choice is made (and then whether it succeeded).
func (e *algoEntry) chosen() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

// prune forgets the chosen entries (those being chosen stay).
func prune() {
	algos.Range(func(k, v any) bool {
		if v.(*algoEntry).chosen() && algos.CompareAndDelete(k, v) {
			algoCount.Add(-1)
		}
		return true
	})
}

// cachedChoices returns the cached choices of ctx (tests).
func cachedChoices(ctx *cuda.Context) []choice {
	var out []choice
	algos.Range(func(k, v any) bool {
		if e := v.(*algoEntry); k.(algoKey).ctx == ctx.Handle() && e.chosen() && e.ok {
			out = append(out, e.c)
		}
		return true
	})
	return out
}

// baseMath is the math type the descriptor has while an algorithm is chosen: full
// float32 (FMA) unless tensor cores are allowed.
func baseMath(dt cudnnraw.CudnnDataType, cfg convConfig) cudnnraw.CudnnMathType {
	if dt == cudnnraw.CUDNN_DATA_FLOAT && !cfg.tensorCores {
		return cudnnraw.CUDNN_FMA_MATH
	}
	return cudnnraw.CUDNN_DEFAULT_MATH
}

// runMath is the math type an algorithm runs with: the one cuDNN reports for it,
// unless full float32 was asked for (cuDNN may report DEFAULT, which would allow TF32).
func runMath(base, reported cudnnraw.CudnnMathType) cudnnraw.CudnnMathType {
	if base == cudnnraw.CUDNN_FMA_MATH {
		return cudnnraw.CUDNN_FMA_MATH
	}
	return reported
}

// workspaceSize returns the workspace algo needs with math type m (set on the
// descriptor).
func workspaceSize(c cudaraw.CUcontext, h cudnnraw.CudnnHandle, d convDescs, algo cudnnraw.CudnnConvolutionFwdAlgo, m cudnnraw.CudnnMathType) (uint64, error) {
	if err := cudnnraw.SetConvolutionMathType(d.c, m); err != nil {
		return 0, err
	}
	var size uint64
	err := cudnnraw.GetConvolutionForwardWorkspaceSizeIn(c, h, d.x, d.w, d.c, d.y, algo, &size)
	return size, err
}

// selectAlgorithm chooses the algorithm of a convolution as cfg says. find's trials
// read x and w (at px, pw) and write a scratch output of ybytes.
func selectAlgorithm(s *cuda.Stream, cfg convConfig, dt cudnnraw.CudnnDataType, d convDescs,
	x cuda.Memory, px unsafe.Pointer, w cuda.Memory, pw unsafe.Pointer, ybytes int) (choice, error) {
	base := baseMath(dt, cfg)
	var ch choice
	fail := func(err error) (choice, error) { return choice{}, fmt.Errorf("choosing an algorithm: %w", err) }
	switch {
	case cfg.fixed:
		err := run(s, func(c cudaraw.CUcontext, h cudnnraw.CudnnHandle) error {
			size, err := workspaceSize(c, h, d, cfg.algo, base)
			ch = choice{algo: cfg.algo, math: base, workspace: size}
			return err
		})
		if err != nil {
			return fail(err)
		}
		return ch, nil

	case !cfg.find:
		err := run(s, func(c cudaraw.CUcontext, h cudnnraw.CudnnHandle) error {
			perf, err := candidates(c, h, func(n int32, got *int32, p *cudnnraw.CudnnConvolutionFwdAlgoPerf) error {
				if err := cudnnraw.SetConvolutionMathType(d.c, base); err != nil {
					return err
				}
				return cudnnraw.GetConvolutionForwardAlgorithmIn(c, h, d.x, d.w, d.c, d.y, n, got, p)
			})
			if err != nil {
				return err
			}
			ch, err = pick(c, h, d, perf, base, uint64(cfg.limit))
			return err
		})
		if err != nil {
			return fail(err)
		}
		return ch, nil
	}

	// Find: the largest workspace any algorithm needs, within the limit, then the
	// trials, with a scratch output.
	var most uint64
	err := run(s, func(c cudaraw.CUcontext, h cudnnraw.CudnnHandle) error {
		for a := cudnnraw.CudnnConvolutionFwdAlgo(0); a < cudnnraw.CUDNN_CONVOLUTION_FWD_ALGO_COUNT; a++ {
			if size, err := workspaceSize(c, h, d, a, base); err == nil && size > most {
				most = size // an algorithm that cannot compute it is left out
			}
		}
		return cudnnraw.SetConvolutionMathType(d.c, base)
	})
	if err != nil {
		return fail(err)
	}
	most = min(most, uint64(cfg.limit))
	ctx := s.Context()
	scratch, err := ctx.Alloc(s, ybytes)
	if err != nil {
		return fail(fmt.Errorf("scratch output: %w", err))
	}
	defer scratch.Close() // after the trials on s
	uses := []cuda.Use{cuda.Reads(x), cuda.Reads(w), cuda.Writes(scratch)}
	var wp unsafe.Pointer
	if most > 0 {
		buf, err := ctx.Alloc(s, int(most))
		if err != nil {
			return fail(fmt.Errorf("workspace: %w", err))
		}
		defer buf.Close()
		wp = devAddr(buf)
		uses = append(uses, cuda.Writes(buf))
	}
	py := devAddr(scratch)
	err = run(s, func(c cudaraw.CUcontext, h cudnnraw.CudnnHandle) error {
		perf, err := candidates(c, h, func(n int32, got *int32, p *cudnnraw.CudnnConvolutionFwdAlgoPerf) error {
			return cudnnraw.FindConvolutionForwardAlgorithmExIn(c, h, d.x, px, d.w, pw, d.c, d.y, py, n, got, p, wp, most)
		})
		if err != nil {
			return err
		}
		// The run's own workspace is allocated anew: the limit bounds it, not most.
		ch, err = pick(c, h, d, perf, base, uint64(cfg.limit))
		return err
	}, uses...)
	if err != nil {
		return fail(err)
	}
	return ch, nil
}

// candidates returns the results of f, which fills up to n performance results (as
// many as cudnnGetConvolutionForwardAlgorithmMaxCount says) and their count.
func candidates(c cudaraw.CUcontext, h cudnnraw.CudnnHandle, f func(n int32, got *int32, p *cudnnraw.CudnnConvolutionFwdAlgoPerf) error) ([]cudnnraw.CudnnConvolutionFwdAlgoPerf, error) {
	var n int32
	if err := cudnnraw.GetConvolutionForwardAlgorithmMaxCountIn(c, h, &n); err != nil {
		return nil, err
	}
	n = max(n, int32(cudnnraw.CUDNN_CONVOLUTION_FWD_ALGO_COUNT))
	perf := make([]cudnnraw.CudnnConvolutionFwdAlgoPerf, n)
	var got int32
	if err := f(n, &got, &perf[0]); err != nil {
		return nil, err
	}
	return perf[:min(max(got, 0), n)], nil
}

// pick returns the first of perf (best first) that succeeded and whose workspace,
// with the math type it will run with, is within limit.
func pick(c cudaraw.CUcontext, h cudnnraw.CudnnHandle, d convDescs, perf []cudnnraw.CudnnConvolutionFwdAlgoPerf, base cudnnraw.CudnnMathType, limit uint64) (choice, error) {
	for _, p := range perf {
		if p.Status != cudnnraw.CUDNN_STATUS_SUCCESS {
			continue
		}
		m := runMath(base, p.MathType)
		size, err := workspaceSize(c, h, d, p.Algo, m)
		if err != nil || size > limit {
			continue
		}
		return choice{algo: p.Algo, math: m, workspace: size}, nil
	}
	return choice{}, fmt.Errorf("no algorithm within the workspace limit of %d bytes (of %d candidates): %w", limit, len(perf), cudnnraw.ErrNotSupported)
}
