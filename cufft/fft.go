package cufft

import (
	"fmt"
	"unsafe"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cudalib"
	"github.com/gocuda/gocuda/cufft/cufftraw"
)

// The idiomatic API: transforms of the cuda package's memory on a stream, with plans
// from a per-context cache keyed by the transform (type, sizes, batch).
//
// Sizes are the transform's dimensions, outermost first (rank 1 to 3); batch
// transforms lie one after another. A complex transform (FFT) reads and writes
// prod(sizes)·batch complex numbers; a real-to-complex one (RealToComplex) reads
// prod(sizes)·batch reals and writes prod(sizes[:rank-1])·(sizes[rank-1]/2+1)·batch
// complex numbers (the non-redundant half), which ComplexToReal reads back. As in
// cuFFT (and FFTW), transforms are unnormalized: an inverse after a forward
// transform multiplies by prod(sizes). In and out may be the same memory (in place;
// for the real transforms only with the padding cuFFT documents). The memory takes
// part in the cuda package's hand-off: in is read, out written.

// Complex is an element type of complex transforms: complex64 (C2C) or complex128
// (Z2Z).
type Complex interface {
	complex64 | complex128
}

// Real is an element type of real transforms: float32 (R2C, C2R) or float64 (D2Z,
// Z2D).
type Real interface {
	float32 | float64
}

// FFT computes a complex transform of in into out on s: forward (e^-2πi·jk/n) or,
// with inverse, backward (e^+2πi·jk/n): cufftExecC2C or cufftExecZ2Z. Options: a
// Norm, and a Layout for strided data.
func FFT[T Complex](s *cuda.Stream, sizes []int, batch int, in, out cuda.Memory, inverse bool, opts ...Option) error {
	r, ok := cudalib.Row[*complexRow[T], T](&transforms)
	if !ok {
		return noTransform[T, T]("c2c")
	}
	o, err := settle(r.op, sizes, batch, opts, sizes, sizes)
	if err != nil {
		return err
	}
	pi, err := operand[T](r.op, "in", in, o.inLen)
	if err != nil {
		return err
	}
	po, err := operand[T](r.op, "out", out, o.outLen)
	if err != nil {
		return err
	}
	dir := int32(cufftraw.CUFFT_FORWARD)
	if inverse {
		dir = cufftraw.CUFFT_INVERSE
	}
	k := o.key(r.typ, batch, sizes)
	err = exec(r.op, s, k, func(ctx cudaraw.CUcontext, p cufftraw.CufftHandle) error {
		return r.exec(ctx, p, pi, po, dir)
	}, in, out)
	if err != nil {
		return err
	}
	return o.scale(r.op, s, k, out, sizes, sizes, inverse, elemScalars[T]())
}

// RealToComplex computes the forward transform of real in into its non-redundant
// half in complex out on s: cufftExecR2C (R float32, C complex64) or cufftExecD2Z
// (float64, complex128). A mismatched pair of precisions is an error. Options: a
// Norm, and a Layout for strided data.
func RealToComplex[R Real, C Complex](s *cuda.Stream, sizes []int, batch int, in, out cuda.Memory, opts ...Option) error {
	r, ok := cudalib.Row[*realRow[R, C], R](&transforms)
	if !ok {
		return noTransform[R, C]("r2c")
	}
	op := r.forward.op
	hs := halfSizes(sizes)
	o, err := settle(op, sizes, batch, opts, sizes, hs)
	if err != nil {
		return err
	}
	pi, err := operand[R](op, "in", in, o.inLen)
	if err != nil {
		return err
	}
	po, err := operand[C](op, "out", out, o.outLen)
	if err != nil {
		return err
	}
	k := o.key(r.forward.typ, batch, sizes)
	err = exec(op, s, k, func(ctx cudaraw.CUcontext, p cufftraw.CufftHandle) error {
		return r.r2c(ctx, p, pi, po)
	}, in, out)
	if err != nil {
		return err
	}
	return o.scale(op, s, k, out, sizes, hs, false, elemScalars[C]())
}

// ComplexToReal computes the backward transform of the non-redundant half in complex
// in into real out on s: cufftExecC2R (complex64, float32) or cufftExecZ2D
// (complex128, float64). cuFFT may overwrite in. Options: a Norm, and a Layout for
// strided data.
func ComplexToReal[C Complex, R Real](s *cuda.Stream, sizes []int, batch int, in, out cuda.Memory, opts ...Option) error {
	r, ok := cudalib.Row[*realRow[R, C], R](&transforms)
	if !ok {
		return noTransform[C, R]("c2r")
	}
	op := r.backward.op
	hs := halfSizes(sizes)
	o, err := settle(op, sizes, batch, opts, hs, sizes)
	if err != nil {
		return err
	}
	pi, err := operand[C](op, "in", in, o.inLen)
	if err != nil {
		return err
	}
	po, err := operand[R](op, "out", out, o.outLen)
	if err != nil {
		return err
	}
	// in is written too: cuFFT's complex-to-real transforms use it as scratch.
	k := o.key(r.backward.typ, batch, sizes)
	err = exec(op, s, k, func(ctx cudaraw.CUcontext, p cufftraw.CufftHandle) error {
		return r.c2r(ctx, p, pi, po)
	}, nil, in, out)
	if err != nil {
		return err
	}
	return o.scale(op, s, k, out, sizes, sizes, true, elemScalars[R]())
}

// count checks a transform's sizes and batch and returns its element count.
func count(op string, sizes []int, batch int) (int, error) {
	if len(sizes) < 1 || len(sizes) > 3 || batch < 1 {
		return 0, fmt.Errorf("cufft: %s: %w: sizes %v (rank 1 to 3), batch %d", op, cuda.ErrInvalidArgument, sizes, batch)
	}
	n := batch
	for _, d := range sizes {
		if d < 1 || d > 1<<30 || n > (1<<62)/d {
			return 0, fmt.Errorf("cufft: %s: %w: sizes %v, batch %d", op, cuda.ErrInvalidArgument, sizes, batch)
		}
		n *= d
	}
	return n, nil
}

// operand checks that m is memory of T (or untyped) with room for n elements.
func operand[T any](op, name string, m cuda.Memory, n int) (*T, error) {
	if m == nil {
		return nil, fmt.Errorf("cufft: %s: %w: %s is nil", op, cuda.ErrInvalidArgument, name)
	}
	p, err := cuda.DevicePtr[T](m)
	if err != nil {
		return nil, fmt.Errorf("cufft: %s: %s: %w", op, name, err)
	}
	if size := int(unsafe.Sizeof(*new(T))); m.Size()/size < n {
		return nil, fmt.Errorf("cufft: %s: %w: %s needs %d elements, the memory holds %d", op, cuda.ErrInvalidArgument, name, n, m.Size()/size)
	}
	return p, nil
}

// Plans: a plan is made for one transform (cufftMakePlanMany, with the context
// current) and reused by every call of that transform in its context, one call at a
// time, from a cudalib pool keyed by the transform. Each stream keeps the plan of
// its last transform for its next call, if the plan needs no work area (without a
// lock shared with other streams); each context's cache keeps at most MaxIdlePlans
// more, of which a call takes the one last bound to its own stream when there is
// one, and a destroyed stream gives its plan to the cache. A plan the cache drops
// (all of them, and the streams' plans, at every resource.Reclaim) is left to its
// OwnedPlan, destroyed in resource.Reclaim (cufftDestroy waits for the GPU:
// headers/cufft.toml).
//
// Work area: a plan's scratch memory comes from the device's pool instead of
// cuFFT's own allocation (cufftSetAutoAllocation(0), cufftSetWorkArea), so it shows
// in cuda.MemoryStatus and goes back to the pool with its plan. Every call passes it
// to the hand-off as written memory: a plan that moves to another stream waits on
// the GPU for the old stream's last use of its work area.

// MaxIdlePlans is how many idle plans a context's cache keeps, besides the one each
// stream keeps.
const MaxIdlePlans = 16

// planKey identifies a transform; sizes holds up to three dimensions, and the
// layout is cufftMakePlanMany's advanced one when embedded (else the tight one).
type planKey struct {
	typ   cufftraw.CufftType
	batch int
	sizes [3]int

	embedded                             bool
	inEmbed, outEmbed                    [3]int
	inStride, outStride, inDist, outDist int
}

// rank returns the number of the transform's dimensions.
func (k planKey) rank() int {
	r := 0
	for r < len(k.sizes) && k.sizes[r] != 0 {
		r++
	}
	return r
}

func key(sizes []int) [3]int {
	var k [3]int
	copy(k[:], sizes)
	return k
}

// planState is what a plan holds besides its handle: its work area, and whether it
// is made for its transform yet (a new handle is not).
type planState struct {
	work *cuda.DeviceBuffer // nil when the transform needs none
	made bool
}

type plan = cudalib.Handle[planKey, cufftraw.CufftHandle, *cufftraw.OwnedPlan, planState]

// MaxIdlePlanBytes bounds the bytes of work area a context's idle plans hold: a plan
// that would pass it is dropped (and its work area goes back to the pool) rather
// than kept, so a few huge transforms cannot pin the device's memory.
const MaxIdlePlanBytes = 256 << 20

// plans are the idle plans, at most MaxIdlePlans and MaxIdlePlanBytes per context.
var plans = cudalib.NewKeyedPool[planKey, cufftraw.CufftHandle, *cufftraw.OwnedPlan, planState](MaxIdlePlans,
	func(_ planKey, h *cufftraw.CufftHandle) error { return cufftraw.Create(h) }, cufftraw.OwnPlan, false).
	LimitBytes(MaxIdlePlanBytes, func(p *plan) int64 {
		if p.State.work == nil {
			return 0
		}
		return int64(p.State.work.Size())
	})

// takePlan returns the plan of k that s keeps, an idle plan of k (preferably the one
// last bound to s), or a new one, made for k with its work area from the pool,
// allocated on s.
func takePlan(ctx *cuda.Context, s *cuda.Stream, k planKey, uses []cuda.Use) (*plan, error) {
	p, err := plans.Take(ctx, s, k, uses...)
	if err != nil {
		return nil, err
	}
	if p.State.made {
		stats.reused.Add(1)
	} else {
		if err := makePlan(ctx, s, k, p); err != nil {
			// Dropped, not given back (it is no plan of k): cufftDestroy may wait
			// for the GPU, so the plan's OwnedPlan destroys it in resource.Reclaim.
			if p.State.work != nil {
				p.State.work.Close()
			}
			return nil, fmt.Errorf("making a plan: %w", err)
		}
	}
	return p, nil
}

// makePlan makes the new plan p for k, with its work area from the pool, allocated
// on s.
func makePlan(ctx *cuda.Context, s *cuda.Stream, k planKey, p *plan) error {
	rank := k.rank()
	var dims [3]int32
	for i, d := range k.sizes[:rank] {
		dims[i] = int32(d)
	}
	var size uint64
	var inEmbed, outEmbed [3]int32
	var pin, pout *int32 // nil: the tight layout
	if k.embedded {
		for i := range rank {
			inEmbed[i], outEmbed[i] = int32(k.inEmbed[i]), int32(k.outEmbed[i])
		}
		pin, pout = &inEmbed[0], &outEmbed[0]
	}
	err := ctx.Locked(func() error {
		if err := cufftraw.SetAutoAllocation(p.Raw, 0); err != nil {
			return err
		}
		return cufftraw.MakePlanMany(p.Raw, int32(rank), &dims[0], pin, int32(k.inStride), int32(k.inDist),
			pout, int32(k.outStride), int32(k.outDist), k.typ, int32(k.batch), &size)
	})
	if err != nil {
		return err
	}
	if size > 0 {
		if p.State.work, err = ctx.Alloc(s, int(size)); err != nil {
			return err
		}
		wp, _ := cuda.DevicePtr[byte](p.State.work)
		if err := ctx.Locked(func() error { return cufftraw.SetWorkArea(p.Raw, unsafe.Pointer(wp)) }); err != nil {
			return err
		}
	}
	p.State.made = true
	stats.created.Add(1)
	return nil
}

// idlePlans returns the idle plans in ctx's cache (tests).
func idlePlans(ctx *cuda.Context) int { return plans.Idle(ctx) }

// streamPlans returns the number of ctx's plans that streams keep (tests).
func streamPlans(ctx *cuda.Context) int { return plans.Kept(ctx) }

// exec runs f with a plan of k in s's context, bound to s, through cuda.Enqueue: in
// is read (unless nil), every memory of written is written, and so is the plan's
// work area. The stream and memory are checked before a plan is made, so that a bad
// argument is reported before cuFFT is loaded.
func exec(op string, s *cuda.Stream, k planKey, f func(ctx cudaraw.CUcontext, p cufftraw.CufftHandle) error, in cuda.Memory, written ...cuda.Memory) error {
	fail := func(err error) error {
		return fmt.Errorf("cufft: %s of %v, batch %d: %w", op, k.sizes[:k.rank()], k.batch, err)
	}
	var uses [4]cuda.Use
	u := uses[:0]
	if in != nil {
		u = append(u, cuda.Reads(in))
	}
	for _, m := range written {
		u = append(u, cuda.Writes(m))
	}
	ctx := s.Context()
	if ctx == nil {
		return fail(cuda.CheckEnqueue(s)) // the nil stream's error
	}
	p, err := takePlan(ctx, s, k, u)
	if err != nil {
		return fail(err)
	}
	defer plans.Put(s, p)
	if p.State.work != nil {
		u = append(u, cuda.Writes(p.State.work))
	}
	err = cuda.Enqueue(s, func(c cudaraw.CUcontext, h cudaraw.CUstream) error {
		if _, err := p.Bind(c, h, cufftraw.SetStreamIn); err != nil {
			return err
		}
		return f(c, p.Raw)
	}, u...)
	if err != nil {
		return fail(err)
	}
	return nil
}
