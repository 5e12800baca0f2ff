package curand

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cudalib"
	"github.com/gocuda/gocuda/curand/curandraw"
	"github.com/gocuda/gocuda/internal/errs"
	"github.com/gocuda/gocuda/resource"
)

// Generator is a cuRAND generator of a context: one sequence of random numbers,
// which the generating functions (Uniform, Normal, LogNormal, Poisson, Uint32) draw
// from in call order, on whatever stream each call gives. Calls on different streams
// are ordered on the GPU (each waits for the generator's previous call), so the
// numbers are those one stream would draw; the output memory takes part in the cuda
// package's hand-off like any operation's.
//
// A Generator is safe for concurrent use (calls are serialized: a sequence has an
// order). Close gives the raw generator back to its context's cache (a cudalib pool
// keyed by the kind), reseeded by the next NewGenerator of its kind; a Generator
// dropped without Close goes back too. A raw generator the cache has no room for, or
// drops at every resource.Reclaim, is destroyed in resource.Reclaim:
// curandDestroyGenerator waits for the GPU and stalls other threads' launches
// (headers/curand.toml), so never elsewhere.
type Generator struct {
	ctx  *cuda.Context
	kind curandraw.CurandRngType

	mu    sync.Mutex
	g     *rawGen            // nil once closed; bound to the stream of its last call
	state *cuda.DeviceBuffer // stands for the generator's state in the hand-off
	reg   *resource.Registration
}

// rawGen is a cached raw generator of a kind: owned, and bound to a stream.
type rawGen = cudalib.Handle[Kind, curandraw.CurandGenerator, *curandraw.OwnedGenerator, struct{}]

// MaxIdleGenerators is how many idle raw generators a context's cache keeps.
const MaxIdleGenerators = 4

// generators are the idle raw generators, per context and kind. A Generator holds its
// raw generator for its life, whatever streams its calls use: they are taken and
// given back without a stream, and no stream keeps one.
var generators = cudalib.NewKeyedPool[Kind, curandraw.CurandGenerator, *curandraw.OwnedGenerator, struct{}](MaxIdleGenerators,
	func(kind Kind, g *curandraw.CurandGenerator) error { return curandraw.CreateGenerator(g, kind) }, curandraw.OwnGenerator, false)

// Kind is the algorithm of a generator: one of the pseudo-random kinds (PseudoDefault,
// XORWOW, MRG32k3a, MTGP32, MT19937, Philox) or quasi-random kinds (QuasiDefault,
// Sobol32, ScrambledSobol32, Sobol64, ScrambledSobol64).
type Kind = curandraw.CurandRngType

// Generator kinds.
const (
	PseudoDefault    Kind = curandraw.CURAND_RNG_PSEUDO_DEFAULT // XORWOW
	XORWOW           Kind = curandraw.CURAND_RNG_PSEUDO_XORWOW
	MRG32k3a         Kind = curandraw.CURAND_RNG_PSEUDO_MRG32K3A
	MTGP32           Kind = curandraw.CURAND_RNG_PSEUDO_MTGP32
	MT19937          Kind = curandraw.CURAND_RNG_PSEUDO_MT19937
	Philox           Kind = curandraw.CURAND_RNG_PSEUDO_PHILOX4_32_10 // Philox4x32-10
	QuasiDefault     Kind = curandraw.CURAND_RNG_QUASI_DEFAULT        // Sobol32
	Sobol32          Kind = curandraw.CURAND_RNG_QUASI_SOBOL32
	ScrambledSobol32 Kind = curandraw.CURAND_RNG_QUASI_SCRAMBLED_SOBOL32
	Sobol64          Kind = curandraw.CURAND_RNG_QUASI_SOBOL64
	ScrambledSobol64 Kind = curandraw.CURAND_RNG_QUASI_SCRAMBLED_SOBOL64
)

// NewGenerator returns a generator of the given kind in ctx, seeded with seed: a pseudo-random generator's seed, or
// a quasi-random generator's offset in its sequence (of one dimension). The same kind
// and seed give the same numbers.
func NewGenerator(ctx *cuda.Context, kind Kind, seed uint64) (*Generator, error) {
	if ctx == nil || ctx.Handle() == 0 {
		return nil, fmt.Errorf("curand: %w: nil or zero context", cuda.ErrInvalidArgument)
	}
	quasi := kind >= curandraw.CURAND_RNG_QUASI_DEFAULT && kind <= curandraw.CURAND_RNG_QUASI_SCRAMBLED_SOBOL64
	if !quasi && (kind < curandraw.CURAND_RNG_PSEUDO_DEFAULT || kind > curandraw.CURAND_RNG_PSEUDO_PHILOX4_32_10) {
		return nil, fmt.Errorf("curand: %w: generator kind %d", cuda.ErrInvalidArgument, int(kind))
	}
	// The state stand-in: one byte on a stream of the pool, used by every call.
	s, err := ctx.AcquireStream(context.Background())
	if err != nil {
		return nil, err
	}
	state, err := ctx.Alloc(s, 1)
	s.Close()
	if err != nil {
		return nil, err
	}
	rg, err := generators.Take(ctx, nil, kind)
	if err != nil {
		state.Close()
		return nil, fmt.Errorf("curand: generator: %w", err)
	}
	err = ctx.Locked(func() error {
		h := ctx.Handle()
		if quasi {
			if err := curandraw.SetQuasiRandomGeneratorDimensionsIn(h, rg.Raw, 1); err != nil {
				return err
			}
		} else if err := curandraw.SetPseudoRandomGeneratorSeedIn(h, rg.Raw, seed); err != nil {
			return err
		}
		if kind == curandraw.CURAND_RNG_PSEUDO_MTGP32 || kind == curandraw.CURAND_RNG_PSEUDO_MT19937 {
			return nil // no offsets (CURAND_STATUS_TYPE_ERROR): the seed resets them
		}
		// A cached generator has moved on: back to the start (or, quasi, to seed).
		off := uint64(0)
		if quasi {
			off = seed
		}
		return curandraw.SetGeneratorOffsetIn(h, rg.Raw, off)
	})
	if err != nil {
		generators.Put(nil, rg)
		state.Close()
		return nil, fmt.Errorf("curand: seeding: %w", err)
	}
	g := &Generator{ctx: ctx, kind: kind, g: rg, state: state}
	g.reg = resource.ResourceFinalizer((*Generator).release, g, false, resource.Kind("curand generator (to its cache)"))
	return g, nil
}

// idleGenerators returns the number of idle raw generators of ctx (tests).
func idleGenerators(ctx *cuda.Context) int { return generators.Idle(ctx) }

// Close gives the raw generator back to the cache. Closing again, or closing a nil
// Generator, returns an error matching cuda.ErrClosed and resource.ErrReleased.
func (g *Generator) Close() error {
	if g == nil || g.reg == nil {
		return errs.Closed("curand: generator")
	}
	err := g.reg.Release()
	runtime.KeepAlive(g)
	if err != nil {
		return errs.Closed("curand: generator")
	}
	return nil
}

// release is Close's (and a dropped Generator's) release: no CUDA call.
func (g *Generator) release() {
	g.mu.Lock()
	rg := g.g
	g.g = nil
	g.mu.Unlock()
	if rg != nil {
		generators.Put(nil, rg)
	}
	_ = g.state.Close()
}

// Float is an element type of the floating-point distributions. cuRAND generates
// float32 and float64; for cuda.Float16 (half precision, which cuRAND has no
// generator for) a call draws float32s into a temporary buffer from the device's
// pool and converts them on the GPU with a kernel of this package (round to nearest
// even, in PTX that it embeds: no NVRTC; loaded once per context), so it draws the same numbers as the float32 call, rounded,
// and costs a float32 buffer and one more kernel. Its mean and standard deviation
// are rounded to half precision too, as its arguments.
type Float interface {
	float32 | float64 | cuda.Float16
}

// Uniform fills the first n elements of out with numbers uniform in (0, 1], on s:
// curandGenerateUniform(Double).
func Uniform[T Float](g *Generator, s *cuda.Stream, out cuda.Memory, n int) error {
	r, err := precisionOf[T]("uniform")
	if err != nil {
		return err
	}
	if r.viaFloat32 {
		return viaFloat32(g, s, out, n, func(tmp cuda.Memory) error { return Uniform[float32](g, s, tmp, n) })
	}
	return generate[T](g, "uniform", s, out, n, false, func(ctx cudaraw.CUcontext, raw curandraw.CurandGenerator, p unsafe.Pointer, N uint64) error {
		return r.uniform(ctx, raw, (*T)(p), N)
	})
}

// Normal fills the first n elements of out with normally distributed numbers of the
// given mean and standard deviation, on s: curandGenerateNormal(Double). n must be
// even for pseudo-random generators (they draw pairs).
func Normal[T Float](g *Generator, s *cuda.Stream, out cuda.Memory, n int, mean, stddev T) error {
	r, err := precisionOf[T]("normal")
	if err != nil {
		return err
	}
	if r.viaFloat32 {
		return viaFloat32(g, s, out, n, func(tmp cuda.Memory) error {
			return Normal(g, s, tmp, n, toFloat32(mean), toFloat32(stddev))
		})
	}
	return generate[T](g, "normal", s, out, n, true, func(ctx cudaraw.CUcontext, raw curandraw.CurandGenerator, p unsafe.Pointer, N uint64) error {
		return r.normal(ctx, raw, (*T)(p), N, mean, stddev)
	})
}

// LogNormal fills the first n elements of out with log-normally distributed numbers
// whose logarithm has the given mean and standard deviation, on s:
// curandGenerateLogNormal(Double). n must be even for pseudo-random generators.
func LogNormal[T Float](g *Generator, s *cuda.Stream, out cuda.Memory, n int, mean, stddev T) error {
	r, err := precisionOf[T]("log-normal")
	if err != nil {
		return err
	}
	if r.viaFloat32 {
		return viaFloat32(g, s, out, n, func(tmp cuda.Memory) error {
			return LogNormal(g, s, tmp, n, toFloat32(mean), toFloat32(stddev))
		})
	}
	return generate[T](g, "log-normal", s, out, n, true, func(ctx cudaraw.CUcontext, raw curandraw.CurandGenerator, p unsafe.Pointer, N uint64) error {
		return r.logNormal(ctx, raw, (*T)(p), N, mean, stddev)
	})
}

// Poisson fills the first n elements of out (uint32) with Poisson-distributed
// numbers of mean lambda (positive), on s: curandGeneratePoisson.
func Poisson(g *Generator, s *cuda.Stream, out cuda.Memory, n int, lambda float64) error {
	if !(lambda > 0) {
		return fmt.Errorf("curand: poisson: %w: lambda %v", cuda.ErrInvalidArgument, lambda)
	}
	return generate[uint32](g, "poisson", s, out, n, false, func(ctx cudaraw.CUcontext, raw curandraw.CurandGenerator, p unsafe.Pointer, N uint64) error {
		return curandraw.GeneratePoissonIn(ctx, raw, (*uint32)(p), N, lambda)
	})
}

// Uint32 fills the first n elements of out with random 32-bit words, on s:
// curandGenerate.
func Uint32(g *Generator, s *cuda.Stream, out cuda.Memory, n int) error {
	return generate[uint32](g, "uint32", s, out, n, false, func(ctx cudaraw.CUcontext, raw curandraw.CurandGenerator, p unsafe.Pointer, N uint64) error {
		return curandraw.GenerateIn(ctx, raw, (*uint32)(p), N)
	})
}

// generate checks out for n elements of T and queues f on s with the generator bound
// to s, ordered after its previous call (the state stand-in is written by every
// call) and out's conflicting uses.
func generate[T Float | uint32](g *Generator, op string, s *cuda.Stream, out cuda.Memory, n int, pairs bool,
	f func(ctx cudaraw.CUcontext, raw curandraw.CurandGenerator, p unsafe.Pointer, n uint64) error) error {
	if n < 0 {
		return fmt.Errorf("curand: %s: %w: %d numbers", op, cuda.ErrInvalidArgument, n)
	}
	if out == nil {
		return fmt.Errorf("curand: %s: %w: nil memory", op, cuda.ErrInvalidArgument)
	}
	p, err := cuda.DevicePtr[T](out)
	if err != nil {
		return fmt.Errorf("curand: %s: %w", op, err)
	}
	if size := int(unsafe.Sizeof(*new(T))); out.Size()/size < n {
		return fmt.Errorf("curand: %s: %w: %d numbers into memory for %d", op, cuda.ErrInvalidArgument, n, out.Size()/size)
	}
	if g == nil {
		return fmt.Errorf("curand: %s: %w: nil generator", op, cuda.ErrInvalidArgument)
	}
	quasi := g.kind >= curandraw.CURAND_RNG_QUASI_DEFAULT
	if pairs && !quasi && n%2 != 0 {
		return fmt.Errorf("curand: %s: %w: %d numbers: pseudo-random generators draw pairs (an even count)", op, cuda.ErrInvalidArgument, n)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	rg := g.g
	if rg == nil {
		return fmt.Errorf("curand: %s: generator: %w", op, cuda.ErrClosed)
	}
	if n == 0 {
		return nil
	}
	err = cuda.Enqueue(s, func(ctx cudaraw.CUcontext, h cudaraw.CUstream) error {
		if _, err := rg.Bind(ctx, h, curandraw.SetStreamIn); err != nil {
			return err
		}
		return f(ctx, rg.Raw, unsafe.Pointer(p), uint64(n))
	}, cuda.Writes(out), cuda.Writes(g.state))
	if err != nil {
		return fmt.Errorf("curand: %s: %w", op, err)
	}
	return nil
}
