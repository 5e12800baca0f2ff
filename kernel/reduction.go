package kernel

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/gocuda/gocuda/cuda"
)

// Reduction folds the elements of an array of T into values of T: each element is
// mapped (Map, in which x names the element), the mapped values are combined
// pairwise (Combine, in which a and b name two partial results; it must be
// associative and commutative, as the order is the GPU's) starting from Identity,
// and the result goes through Post (in which a names it; empty: as it is).
//
//	sum, err := kernel.NewReduction[float32]("sum", kernel.ReductionOps{Identity: "0", Map: "x", Combine: "a + b"}, nil)
type Reduction[T Element] struct {
	name string
	ops  ReductionOps
	mods *modules
	src  string
}

// ReductionOps are a reduction's expressions, in CUDA C over values of its element
// type.
type ReductionOps struct {
	Identity string // the value that Combine leaves the other operand unchanged with: "0" for a sum
	Map      string // of x, an element: "x", "x * x", "fabsf(x)"; empty: "x"
	Combine  string // of a and b: "a + b", "max(a, b)"
	Post     string // of a, the result: "sqrtf(a)"; empty: "a"
}

// NewReduction makes a reduction named name (a C identifier) with ops; it is
// compiled on its first use in a context (cache: nil for DefaultCache).
func NewReduction[T Element](name string, ops ReductionOps, cache *Cache) (*Reduction[T], error) {
	if cache == nil {
		cache = DefaultCache
	}
	if !ident.MatchString(name) || strings.HasPrefix(name, "_") {
		return nil, fmt.Errorf("%w: kernel name %q is not a C identifier", cuda.ErrInvalidArgument, name)
	}
	if strings.TrimSpace(ops.Identity) == "" || strings.TrimSpace(ops.Combine) == "" {
		return nil, fmt.Errorf("%w: reduction %s needs an identity and a combine expression", cuda.ErrInvalidArgument, name)
	}
	if strings.TrimSpace(ops.Map) == "" {
		ops.Map = "x"
	}
	if strings.TrimSpace(ops.Post) == "" {
		ops.Post = "a"
	}
	ct, err := cType(reflect.TypeFor[T]())
	if err != nil {
		return nil, fmt.Errorf("reduction %s: %w", name, err)
	}
	src := reductionSource(name, ct, ops)
	return &Reduction[T]{name: name, ops: ops, src: src, mods: &modules{src: src, name: name, cache: cache}}, nil
}

// Source returns the CUDA C that the reduction compiles.
func (r *Reduction[T]) Source() string { return r.src }

// reduceThreads is the threads per block of a reduction; a power of two.
const reduceThreads = 256

// reduceBlocks is the most blocks of a reduction's first pass: enough to keep every
// multiprocessor of today's GPUs streaming.
const reduceBlocks = 1024

// reductionSource writes three kernels: NAME_partial, which reduces a grid-stride
// share of the n elements per block into partial[blockIdx.x]; NAME_final, which
// reduces the partials in one block and applies Post; and NAME_rows, one block per
// row of a rows×cols row-major matrix.
func reductionSource(name, ct string, ops ReductionOps) string {
	r := strings.NewReplacer("$NAME", name, "$TYPE", ct, "$THREADS", fmt.Sprint(reduceThreads),
		"$IDENTITY", ops.Identity, "$MAP", ops.Map, "$COMBINE", ops.Combine, "$POST", ops.Post)
	return preamble + r.Replace(`typedef $TYPE _T;
__device__ __forceinline__ _T $NAME_map(const _T x) { return ($MAP); }
__device__ __forceinline__ _T $NAME_combine(const _T a, const _T b) { return ($COMBINE); }
__device__ __forceinline__ _T $NAME_post(const _T a) { return ($POST); }

// $NAME_block combines v over the block's threads ($THREADS, a power of two) into the
// value thread 0 returns.
__device__ __forceinline__ _T $NAME_block(_T v) {
	__shared__ _T _s[$THREADS];
	_s[threadIdx.x] = v;
	__syncthreads();
	for (unsigned _k = $THREADS / 2; _k > 0; _k >>= 1) {
		if (threadIdx.x < _k) _s[threadIdx.x] = $NAME_combine(_s[threadIdx.x], _s[threadIdx.x + _k]);
		__syncthreads();
	}
	return _s[0];
}

extern "C" __global__ void $NAME_partial(const long long _n, const _T* _x, _T* _partial) {
	_T _acc = ($IDENTITY);
	for (long long _i = (long long)blockIdx.x * $THREADS + threadIdx.x; _i < _n; _i += (long long)$THREADS * gridDim.x)
		_acc = $NAME_combine(_acc, $NAME_map(_x[_i]));
	_acc = $NAME_block(_acc);
	if (threadIdx.x == 0) _partial[blockIdx.x] = _acc;
}

extern "C" __global__ void $NAME_final(const int _n, const _T* _partial, _T* _out) {
	_T _acc = ($IDENTITY);
	for (int _i = threadIdx.x; _i < _n; _i += $THREADS) _acc = $NAME_combine(_acc, _partial[_i]);
	_acc = $NAME_block(_acc);
	if (threadIdx.x == 0) _out[0] = $NAME_post(_acc);
}

extern "C" __global__ void $NAME_rows(const long long _cols, const _T* _x, _T* _out) {
	const _T* _row = _x + (long long)blockIdx.x * _cols;
	_T _acc = ($IDENTITY);
	for (long long _i = threadIdx.x; _i < _cols; _i += $THREADS) _acc = $NAME_combine(_acc, $NAME_map(_row[_i]));
	_acc = $NAME_block(_acc);
	if (threadIdx.x == 0) _out[blockIdx.x] = $NAME_post(_acc);
}
`)
}

// ReduceTo reduces every element of in into out[0], on s, without waiting: out must
// hold at least one T. An empty in gives Post(Identity).
func (r *Reduction[T]) ReduceTo(s *cuda.Stream, in, out cuda.Memory) error {
	n, err := r.check(s, in, out, 1)
	if err != nil {
		return err
	}
	ctx := s.Context()
	part, err := r.mods.function(ctx, r.name+"_partial")
	if err != nil {
		return err
	}
	final, err := r.mods.function(ctx, r.name+"_final")
	if err != nil {
		return err
	}
	blocks := max(1, min((n+reduceThreads-1)/reduceThreads, reduceBlocks))
	partials, err := cuda.AllocFor[T](s, blocks)
	if err != nil {
		return fmt.Errorf("reduction %s: %w", r.name, err)
	}
	defer partials.Close() // freed after the final pass, in stream order
	if err := part.Launch(s, cuda.D1(blocks), cuda.D1(reduceThreads), 0, int64(n), cuda.In(in), partials); err != nil {
		return err
	}
	return final.Launch(s, cuda.D1(1), cuda.D1(reduceThreads), 0, int32(blocks), cuda.In(partials), out)
}

// Reduce reduces every element of in on s and returns the result, waiting for it.
func (r *Reduction[T]) Reduce(s *cuda.Stream, in cuda.Memory) (T, error) {
	var zero T
	if s == nil {
		return zero, fmt.Errorf("%w: reduction %s: nil stream", cuda.ErrInvalidArgument, r.name)
	}
	out, err := cuda.AllocFor[T](s, 1)
	if err != nil {
		return zero, fmt.Errorf("reduction %s: %w", r.name, err)
	}
	defer out.Close()
	if err := r.ReduceTo(s, in, out); err != nil {
		return zero, err
	}
	got, err := cuda.ToSlice[T](s, out)
	if err != nil {
		return zero, err
	}
	return got[0], nil
}

// maxGrid bounds ReduceRows's rows (one block each).
const maxGrid = 1 << 20

// ReduceRows reduces each row of in, a rows×cols matrix in row-major order, into
// out[row], on s, without waiting: the reduction along the last axis.
func (r *Reduction[T]) ReduceRows(s *cuda.Stream, in cuda.Memory, rows, cols int, out cuda.Memory) error {
	if rows < 1 || cols < 1 || rows > maxGrid {
		return fmt.Errorf("%w: reduction %s: %d×%d rows", cuda.ErrInvalidArgument, r.name, rows, cols)
	}
	n, err := r.check(s, in, out, rows)
	if err != nil {
		return err
	}
	if n != rows*cols {
		return fmt.Errorf("%w: reduction %s: %d elements for %d×%d", cuda.ErrInvalidArgument, r.name, n, rows, cols)
	}
	f, err := r.mods.function(s.Context(), r.name+"_rows")
	if err != nil {
		return err
	}
	return f.Launch(s, cuda.D1(rows), cuda.D1(reduceThreads), 0, int64(cols), cuda.In(in), out)
}

// check checks a reduction's stream and memory (out holding at least outs T) and
// returns in's element count.
func (r *Reduction[T]) check(s *cuda.Stream, in, out cuda.Memory, outs int) (int, error) {
	if r == nil {
		return 0, fmt.Errorf("%w: nil *kernel.Reduction", cuda.ErrInvalidArgument)
	}
	if s == nil || in == nil || out == nil {
		return 0, fmt.Errorf("%w: reduction %s: nil stream or memory", cuda.ErrInvalidArgument, r.name)
	}
	for _, m := range []cuda.Memory{in, out} {
		if _, err := cuda.DevicePtr[T](m); err != nil {
			return 0, fmt.Errorf("reduction %s: %w", r.name, err)
		}
	}
	size := int(reflect.TypeFor[T]().Size())
	if out.Size()/size < outs {
		return 0, fmt.Errorf("%w: reduction %s: out holds %d values, %d needed", cuda.ErrInvalidArgument, r.name, out.Size()/size, outs)
	}
	return in.Size() / size, nil
}

// Close unloads the reduction's modules, after the work already queued.
func (r *Reduction[T]) Close() error { return r.mods.close() }
