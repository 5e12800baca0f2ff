package gonumblas

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/gocuda/gocuda/cublas"
	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/dl"
)

var (
	_ blas.Float32 = (*Implementation)(nil)
	_ blas.Float64 = (*Implementation)(nil)
)

// Implementation is a gonum BLAS implementation that runs the large calls of Ddot,
// Dnrm2, Daxpy, Dscal, Dgemv and Dgemm (and their float32 forms, Sdot ... Sgemm)
// with cuBLAS, and everything else, and every call below its threshold, with
// gonum's native code, which it embeds. It is safe for concurrent use.
//
// Make one with New. The zero Implementation is gonum's native implementation.
type Implementation struct {
	gonum.Implementation

	ctx     *cuda.Context
	stream  *cuda.Stream // nil: a pooled stream per call
	staged  Thresholds
	managed Thresholds
	k32     kernels[float32]
	k64     kernels[float64]
	ready   func() error // whether the kernels can run (cuBLAS loads)

	regMu   sync.Mutex // serializes Register and Unregister
	buffers atomic.Pointer[[]weak.Pointer[cuda.ManagedBuffer]]

	disabled atomic.Bool // cuBLAS cannot be loaded: every call stays native
	lastErr  atomic.Pointer[error]

	gpuCalls    atomic.Int64 // calls run on the GPU
	nativeCalls atomic.Int64 // accelerated routines answered by gonum's native code
	fallbacks   atomic.Int64 // of those, calls that the GPU failed
	inPlaceOps  atomic.Int64 // operands used in place (tests)
}

// Stats counts where the accelerated routines (Level 1 dot, nrm2, axpy, scal;
// gemv; gemm) ran. A routine below its threshold, with an argument gonum rejects,
// or with nothing to compute runs in gonum's native code; so does one that the GPU
// could not run (Fallbacks, whose last error Err returns).
type Stats struct {
	GPU       int64 // calls run on the GPU
	Native    int64 // calls run in gonum's native code, Fallbacks included
	Fallbacks int64 // calls that went native because the GPU failed
}

// Stats returns the counts since New.
func (impl *Implementation) Stats() Stats {
	return Stats{GPU: impl.gpuCalls.Load(), Native: impl.nativeCalls.Load(), Fallbacks: impl.fallbacks.Load()}
}

// native counts a call that runs in gonum's native code and returns that code.
func (impl *Implementation) native() gonum.Implementation {
	impl.nativeCalls.Add(1)
	return impl.Implementation
}

// Thresholds say from what problem size a routine runs on the GPU instead of in
// gonum's native code. 0 sends every call of a level to the GPU; Never keeps the
// level on the CPU.
type Thresholds struct {
	// Level1 is the vector length n from which Ddot, Dnrm2, Daxpy and Dscal (and
	// Sdot, Snrm2, Saxpy, Sscal) run on the GPU.
	Level1 int
	// Level2 is the number of elements of A, m·n, from which Dgemv and Sgemv run on
	// the GPU.
	Level2 int
	// Level3 is the size from which Dgemm and Sgemm run on the GPU, measured as
	// the harmonic mean of m, n and k, 3/(1/m + 1/n + 1/k): the order of a square
	// product, and at most three times the smallest dimension of a thin one, as it
	// bounds the flops per element moved (an outer product, k = 1, stays on the
	// CPU at any size).
	Level3 int
}

// Never is a threshold that no call reaches: the level stays in gonum's native code.
const Never = math.MaxInt

// The default thresholds, which New copies; WithStaged and WithManaged replace them.
// They are estimates for an H200 host, to be checked with BenchmarkDgemm4096.
//
// Staged calls copy ordinary Go slices over PCIe both ways. A Level 1 or Level 2
// routine does one or two flops per element it moves, so the copies alone take
// about as long as gonum reading the same memory on the CPU: those levels stay
// native. Gemm does about 2·order/3 flops per element moved; at order 128 gonum
// needs on the order of 100-200 µs on a many-core host, the three 128 KiB copies,
// the launch and the synchronization under 100 µs. In place, in registered managed
// memory that already lives on the GPU, nothing moves but the call (some 20 µs
// with the synchronization), which gonum spends on vectors of some 64K elements,
// 512×512 matrix-vector products or 64³ products.
var (
	// DefaultStaged applies to calls with an operand to copy.
	DefaultStaged = Thresholds{Level1: Never, Level2: Never, Level3: 128}
	// DefaultManaged applies to calls whose operands are all in registered managed
	// memory (Register).
	DefaultManaged = Thresholds{Level1: 1 << 16, Level2: 1 << 18, Level3: 64}
)

// Option configures New.
type Option func(*Implementation)

// WithStream runs every call on s, instead of a stream taken from the context's
// pool for each call. Calls from several goroutines then share s (and wait for
// each other's work); s must be a stream of the context given to New.
func WithStream(s *cuda.Stream) Option { return func(impl *Implementation) { impl.stream = s } }

// WithStaged sets the thresholds of calls that copy an operand (DefaultStaged).
func WithStaged(t Thresholds) Option { return func(impl *Implementation) { impl.staged = t } }

// WithManaged sets the thresholds of calls whose operands are all in registered
// managed memory (DefaultManaged).
func WithManaged(t Thresholds) Option { return func(impl *Implementation) { impl.managed = t } }

// New returns an Implementation that runs its GPU calls in ctx. It does not load
// cuBLAS: where it cannot be loaded, every call runs natively and Err says why.
func New(ctx *cuda.Context, opts ...Option) (*Implementation, error) {
	if ctx == nil || ctx.Handle() == 0 {
		return nil, fmt.Errorf("gonumblas: %w: no context", cuda.ErrInvalidArgument)
	}
	impl := &Implementation{
		ctx:     ctx,
		staged:  DefaultStaged,
		managed: DefaultManaged,
		k32:     cuBLAS[float32]{},
		k64:     cuBLAS[float64]{},
		ready:   func() error { return cublasraw.Library().Open() },
	}
	for _, o := range opts {
		o(impl)
	}
	if impl.stream != nil && impl.stream.Context().Handle() != ctx.Handle() {
		return nil, fmt.Errorf("gonumblas: stream of another context: %w", cuda.ErrWrongContext)
	}
	return impl, nil
}

// Register lets cuBLAS use the buffers in place: an operand slice that starts at
// the start of a registered buffer (cuda.HostSlice of it, or a prefix) is not
// copied, and a call whose operands all are uses the managed thresholds. Vectors
// must have unit increment to be used in place; a slice that starts elsewhere in a
// buffer is copied like any other (the cuda package has no views of managed memory).
// Registration does not keep a buffer alive, and a closed buffer is ignored.
func (impl *Implementation) Register(bufs ...*cuda.ManagedBuffer) error {
	for _, b := range bufs {
		switch {
		case b == nil || b.Bytes() == nil:
			return fmt.Errorf("gonumblas: register: %w: nil or closed buffer", cuda.ErrInvalidArgument)
		case impl.ctx == nil || b.Context().Handle() != impl.ctx.Handle():
			return fmt.Errorf("gonumblas: register: buffer of another context: %w", cuda.ErrWrongContext)
		}
	}
	impl.update(func(b *cuda.ManagedBuffer) bool { return true }, bufs)
	return nil
}

// Unregister undoes Register: slices of the buffers are copied from then on.
func (impl *Implementation) Unregister(bufs ...*cuda.ManagedBuffer) {
	impl.update(func(b *cuda.ManagedBuffer) bool {
		for _, u := range bufs {
			if b == u {
				return false
			}
		}
		return true
	}, nil)
}

// update replaces the registered list with its buffers that are alive, open and
// kept, followed by add. Lookups read the list without a lock.
func (impl *Implementation) update(keep func(*cuda.ManagedBuffer) bool, add []*cuda.ManagedBuffer) {
	impl.regMu.Lock()
	defer impl.regMu.Unlock()
	var list []weak.Pointer[cuda.ManagedBuffer]
	if old := impl.buffers.Load(); old != nil {
		for _, w := range *old {
			if b := w.Value(); b != nil && b.Bytes() != nil && keep(b) {
				list = append(list, w)
			}
		}
	}
	for _, b := range add {
		list = append(list, weak.Make(b))
	}
	impl.buffers.Store(&list)
}

// inPlace returns the registered buffer that data starts, or nil.
func inPlace[T any](impl *Implementation, data []T) cuda.Memory {
	list := impl.buffers.Load()
	if list == nil || len(data) == 0 {
		return nil
	}
	p := unsafe.Pointer(unsafe.SliceData(data))
	size := len(data) * int(unsafe.Sizeof(data[0]))
	for _, w := range *list {
		b := w.Value()
		if b == nil {
			continue
		}
		if mem := b.Bytes(); len(mem) >= size && unsafe.Pointer(unsafe.SliceData(mem)) == p {
			return b
		}
	}
	return nil
}

// Err returns the error of the last call that could not run on the GPU and ran in
// gonum's native code instead, or nil. A call that fails after it may have written
// its output panics instead, since its result is lost.
func (impl *Implementation) Err() error {
	if p := impl.lastErr.Load(); p != nil {
		return *p
	}
	return nil
}

// setErr records the error of a call that the GPU failed and that runs native.
func (impl *Implementation) setErr(err error) {
	impl.fallbacks.Add(1)
	impl.lastErr.Store(&err)
}

// gpuCall is one call on the GPU: its stream and the device buffers it staged.
type gpuCall struct {
	impl   *Implementation
	op     string
	s      *cuda.Stream
	pooled bool
	bufs   []*cuda.DeviceBuffer
	// touched: the caller's memory may have been written, so an error can no
	// longer fall back to the native code.
	touched bool
}

// start begins a call on the GPU, or returns nil where it cannot run there.
func (impl *Implementation) start(op string) *gpuCall {
	if impl.disabled.Load() {
		impl.fallbacks.Add(1) // cuBLAS could not be loaded (Err says why)
		return nil
	}
	if err := impl.ready(); err != nil {
		// Loading is tried once per process: stop paying for the check.
		if errors.Is(err, dl.ErrLibraryNotFound) || errors.Is(err, dl.ErrSymbolNotFound) {
			impl.disabled.Store(true)
		}
		impl.setErr(fmt.Errorf("gonumblas: %s: %w", op, err))
		return nil
	}
	c := &gpuCall{impl: impl, op: op, s: impl.stream}
	if c.s == nil {
		s, err := impl.ctx.AcquireStream(context.Background())
		if err != nil {
			impl.setErr(fmt.Errorf("gonumblas: %s: %w", op, err))
			return nil
		}
		c.s, c.pooled = s, true
	}
	return c
}

// end finishes the call: it waits for its work, releases its buffers and stream,
// and reports whether the result is in the caller's memory. With an error, it
// records it and returns false (the caller runs the native code) or, if the
// caller's memory may have been written, panics.
func (c *gpuCall) end(err error) bool {
	if serr := c.s.Synchronize(); err == nil {
		err = serr
	}
	for _, b := range c.bufs {
		_ = b.Close() // back to the stream's cache; the error is of no use here
	}
	if c.pooled {
		_ = c.s.Close()
	}
	if err != nil {
		if errors.Is(err, dl.ErrLibraryNotFound) || errors.Is(err, dl.ErrSymbolNotFound) {
			c.impl.disabled.Store(true)
		}
		err = fmt.Errorf("gonumblas: %s: %w", c.op, err)
		if c.touched {
			panic(fmt.Errorf("%w (the output may be partly written)", err))
		}
		c.impl.setErr(err)
		return false
	}
	c.impl.gpuCalls.Add(1)
	return true
}

// alloc returns a device buffer of n elements of T, closed by end.
func alloc[T cublas.Real](c *gpuCall, n int) (*cuda.DeviceBuffer, error) {
	b, err := cuda.AllocFor[T](c.s, n)
	if err != nil {
		return nil, err
	}
	c.bufs = append(c.bufs, b)
	return b, nil
}
