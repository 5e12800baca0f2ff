package cufft

import (
	_ "embed"
	"fmt"
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cudalib"
	"github.com/gocuda/gocuda/cufft/cufftraw"
)

// Option is a transform's option: a Norm, or a Layout.
type Option interface {
	apply(*settings)
}

// Norm is the scaling of a transform's result, named as NumPy's and CuPy's norm
// argument: by 1/n (n: the product of the sizes) on the inverse transforms
// (Backward), on the forward ones (Forward), or by 1/√n on both (Ortho). Without a
// Norm option, transforms are unnormalized as in cuFFT (and FFTW): a round trip
// multiplies by n (NumPy's default, Backward, is not cuFFT's).
//
// cuFFT has no scaling of its own (short of its callbacks), so a Norm costs a second
// pass over the output after the transform: one more kernel (hand-written PTX, loaded
// once per context, no NVRTC) that reads and writes each of its elements — for a
// memory-bound transform, about as much again as one pass of the transform over its
// output. A transform whose Norm does not scale it (a forward transform with
// Backward) costs nothing more.
type Norm int

// Norms.
const (
	Unnormalized Norm = iota // cuFFT's: no scaling (the default)
	Backward                 // inverse transforms scaled by 1/n (NumPy's default)
	Ortho                    // both directions scaled by 1/√n: the transform is unitary
	Forward                  // forward transforms scaled by 1/n
)

func (n Norm) apply(s *settings) { s.norm = n }

// Layout is cufftPlanMany's advanced data layout, for strided and interleaved data:
// element (j0, j1, j2) of batch b of the input lies at
// b·InDist + ((j0·InEmbed[1] + j1)·InEmbed[2] + j2)·InStride elements from its start
// (for a rank-r transform, embeds and indices of r dimensions), and so for the output.
// An embed is the storage's sizes (at least the transform's sizes in every dimension
// but the first, which cuFFT does not read); nil takes the transform's (for a
// real-to-complex transform's complex side, the half sizes). A zero stride is 1, and a
// zero distance is the storage's: stride·Π embed.
type Layout struct {
	InEmbed, OutEmbed   []int
	InStride, OutStride int
	InDist, OutDist     int
}

func (l Layout) apply(s *settings) { s.layout = &l }

// settings are a call's options, settled: its norm, the plan's layout, and how many
// elements its input and output span.
type settings struct {
	norm   Norm
	layout *Layout

	inLen, outLen int
	in, out       side // the settled layout (tight without a Layout)
}

// side is one side's settled layout.
type side struct {
	embed        [3]int
	stride, dist int
}

// settle checks a transform's sizes, batch and options; inSizes and outSizes are its
// sides' logical sizes (the half sizes for a real transform's complex side).
func settle(op string, sizes []int, batch int, opts []Option, inSizes, outSizes []int) (settings, error) {
	var st settings
	if _, err := count(op, sizes, batch); err != nil {
		return st, err
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&st)
		}
	}
	if st.norm < Unnormalized || st.norm > Forward {
		return st, fmt.Errorf("cufft: %s: %w: norm %d", op, cuda.ErrInvalidArgument, int(st.norm))
	}
	var l Layout
	if st.layout != nil {
		l = *st.layout
	}
	var err error
	if st.in, st.inLen, err = settleSide(inSizes, batch, l.InEmbed, l.InStride, l.InDist); err != nil {
		return st, fmt.Errorf("cufft: %s: %w: input layout: %w", op, cuda.ErrInvalidArgument, err)
	}
	if st.out, st.outLen, err = settleSide(outSizes, batch, l.OutEmbed, l.OutStride, l.OutDist); err != nil {
		return st, fmt.Errorf("cufft: %s: %w: output layout: %w", op, cuda.ErrInvalidArgument, err)
	}
	return st, nil
}

// settleSide fills in a side's defaults and returns it with the elements it spans.
func settleSide(sizes []int, batch int, embed []int, stride, dist int) (side, int, error) {
	var sd side
	if embed == nil {
		embed = sizes
	}
	if len(embed) != len(sizes) {
		return sd, 0, fmt.Errorf("embed %v for sizes %v", embed, sizes)
	}
	if stride == 0 {
		stride = 1
	}
	if stride < 0 || dist < 0 {
		return sd, 0, fmt.Errorf("stride %d, distance %d", stride, dist)
	}
	storage, last := 1, 0 // elements of one batch's storage, and its last element's offset
	for d, e := range embed {
		if e < 1 || d > 0 && e < sizes[d] || e > math.MaxInt32 {
			return sd, 0, fmt.Errorf("embed %v for sizes %v", embed, sizes)
		}
		storage *= e
		if storage > math.MaxInt32 {
			return sd, 0, fmt.Errorf("embed %v: more than 2³¹ elements", embed)
		}
		last = last*e + sizes[d] - 1
		sd.embed[d] = e
	}
	if dist == 0 {
		dist = stride * storage
	}
	if dist > math.MaxInt32 || stride*storage > math.MaxInt32 {
		return sd, 0, fmt.Errorf("stride %d, distance %d: more than 2³¹ elements", stride, dist)
	}
	sd.stride, sd.dist = stride, dist
	return sd, (batch-1)*dist + last*stride + 1, nil
}

// key returns the plan key of a transform with these settings.
func (st *settings) key(typ cufftraw.CufftType, batch int, sizes []int) planKey {
	k := planKey{typ: typ, batch: batch, sizes: key(sizes)}
	if st.layout != nil {
		k.embedded = true
		k.inEmbed, k.outEmbed = st.in.embed, st.out.embed
		k.inStride, k.outStride, k.inDist, k.outDist = st.in.stride, st.out.stride, st.in.dist, st.out.dist
	}
	return k
}

// scale applies the norm to the output of the transform just queued on s: sizes
// are the transform's, outSizes its output's logical sizes; c is 1 for real output,
// 2 for complex, and double tells its precision.
func (st *settings) scale(op string, s *cuda.Stream, k planKey, out cuda.Memory, sizes, outSizes []int, inverse bool, es scalars) error {
	c, double := es.c, es.double
	n := 1
	for _, d := range sizes {
		n *= d
	}
	var a float64
	switch {
	case st.norm == Ortho:
		a = 1 / math.Sqrt(float64(n))
	case st.norm == Backward && inverse, st.norm == Forward && !inverse:
		a = 1 / float64(n)
	default:
		return nil
	}
	// Right-aligned into three dimensions: leading ones.
	l := [3]uint64{1, 1, 1}
	e := [3]uint64{1, 1, 1}
	r := len(outSizes)
	for d := range r {
		l[3-r+d], e[3-r+d] = uint64(outSizes[d]), uint64(st.out.embed[d])
	}
	total := uint64(k.batch) * l[0] * l[1] * l[2] * uint64(c)
	f, err := scaler(s.Context(), double)
	if err != nil {
		return fmt.Errorf("cufft: %s: norm: %w", op, err)
	}
	const block = 256
	grid := int(min((total+block-1)/block, 1<<16))
	var scalar any = float32(a)
	if double {
		scalar = a
	}
	err = f.Launch(s, cuda.D1(grid), cuda.D1(block), 0, out, total, uint64(c), l[2], l[1], l[0], e[2], e[1],
		uint64(st.out.stride), uint64(st.out.dist), scalar)
	if err != nil {
		return fmt.Errorf("cufft: %s: norm: %w", op, err)
	}
	return nil
}

// halfSizes returns the logical sizes of a real transform's complex side: the last
// dimension's non-redundant half.
func halfSizes(sizes []int) []int {
	if len(sizes) == 0 {
		return nil
	}
	h := append([]int(nil), sizes...)
	h[len(h)-1] = h[len(h)-1]/2 + 1
	return h
}

// scalars are an element type's scalars: c of them (1 real, 2 complex), float64s
// if double.
type scalars struct {
	c      int
	double bool
}

// elemScalars returns T's scalars.
func elemScalars[T Complex | Real]() scalars {
	var z T
	c := 1
	switch any(z).(type) {
	case complex64, complex128:
		c = 2
	}
	return scalars{c, int(unsafe.Sizeof(z))/c == 8}
}

// scalePTX holds the scaling kernels (scale.ptx).
//
//go:embed scale.ptx
var scalePTX []byte

// scalers are the scaling kernels, loaded in each context at first use.
var scalers = cudalib.NewKernels(scalePTX)

// scaler returns the scaling kernel of ctx for float32 or float64.
func scaler(ctx *cuda.Context, double bool) (*cuda.Function, error) {
	if double {
		return scalers.Function(ctx, "scale_f64")
	}
	return scalers.Function(ctx, "scale_f32")
}

// PlanStats counts the plans this process's transforms made (cufftMakePlanMany) and
// the calls that found a made plan in the cache (a stream's or a context's) instead:
// a workload that repeats its transforms shows Reused growing and Created not.
type PlanStats struct {
	Created, Reused uint64
}

var stats struct{ created, reused atomic.Uint64 }

// Stats returns the plan counts so far.
func Stats() PlanStats {
	return PlanStats{Created: stats.created.Load(), Reused: stats.reused.Load()}
}
