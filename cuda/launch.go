package cuda

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"unsafe"

	"github.com/gocuda/gocuda/internal/calltrace"
)

// Kernel launches: Function.Launch, its fast path, and the launch's shape (Dim3)
// with its checks. The packing of the arguments is in launch_args.go, the calls into
// C in launch_c.go, the general path's hand-off in handoff_launch.go, and batches of
// launches in launch_batch.go.

// Dim3 is the shape of a grid (in blocks) or of a block (in threads). X must be
// positive; a zero Y or Z counts as 1, so Dim3{X: n} is D1(n).
type Dim3 struct {
	X, Y, Z int
}

// D1 returns the one-dimensional shape x×1×1.
func D1(x int) Dim3 { return Dim3{x, 1, 1} }

// D2 returns the two-dimensional shape x×y×1.
func D2(x, y int) Dim3 { return Dim3{x, y, 1} }

// D3 returns the shape x×y×z.
func D3(x, y, z int) Dim3 { return Dim3{x, y, z} }

// Blocks returns the number of blocks of size threads each that cover n elements:
// ⌈n/size⌉, for one-dimensional grids such as D1(Blocks(n, 256)). It returns 0 for
// a size or n that is not positive.
func Blocks(n, size int) int {
	if size <= 0 || n <= 0 {
		return 0
	}
	q := n / size // not (n+size-1)/size, which overflows near math.MaxInt
	if n%size != 0 {
		q++
	}
	return q
}

// Count returns X·Y·Z, with zero Y and Z counted as 1: the number of blocks of a
// grid or threads of a block. It returns 0 for a shape that no launch accepts (X not
// positive, a negative Y or Z, or a dimension of 2³² or more) and for a product that
// overflows int.
func (d Dim3) Count() int {
	x, y, z, err := d.dims("")
	if err != nil {
		return 0
	}
	hi, n := bits.Mul64(uint64(x)*uint64(y), uint64(z)) // x·y < 2⁶⁴
	if hi != 0 || n > math.MaxInt {
		return 0
	}
	return int(n)
}

// dims returns the shape as the driver takes it.
func (d Dim3) dims(what string) (x, y, z uint32, err error) {
	d = d.norm()
	if !d.fits() {
		return 0, 0, 0, dimsError(what, d)
	}
	return uint32(d.X), uint32(d.Y), uint32(d.Z), nil
}

// dimsError is dims's error, out of line so that dims stays cheap to call.
//
//go:noinline
func dimsError(what string, d Dim3) error {
	return fmt.Errorf("%w: %s %d×%d×%d: each dimension must be in [1, 2³²)", ErrInvalidArgument, what, d.X, d.Y, d.Z)
}

// deviceArg is memory that Launch takes as a kernel argument (every Memory, and
// Input): Launch holds it while the kernel is queued (a concurrent Close waits, a
// Close before fails the launch), passes its address, orders the kernel after the
// memory's conflicting uses on other streams and records the kernel's use.
type deviceArg interface {
	base() *memBase
}

// Input marks a kernel argument that the kernel only reads (see In).
type Input struct {
	m *memBase // one pointer: boxing an Input in an interface does not allocate
}

// In marks m as an argument that the kernel only reads: Launch then orders the kernel
// after m's last write on another stream only, so that kernels on different streams
// that read the same memory run at the same time. An unmarked memory argument counts
// as written: the kernel waits for every earlier use on other streams, and later uses
// wait for it. Marking memory that the kernel writes breaks that ordering.
func In(m Memory) Input {
	if m == nil {
		return Input{}
	}
	return Input{m.base()}
}

func (in Input) base() *memBase { return in.m }

// Launch queues the kernel on s with grid×block threads, sharedMem bytes of dynamic
// shared memory and args as its parameters, in order. It does not wait for the kernel.
//
// Arguments may be Go scalars (int8 to int64, uint8 to uint64, int, uint, uintptr,
// float32, float64, bool: one byte), memory (any Memory: *DeviceBuffer and its views,
// *HostBuffer, *ManagedBuffer, *WrappedBuffer, passed as its address and ordered by
// the hand-off as written; In(m) marks memory the kernel only reads), raw device
// addresses (cudaraw.CUdeviceptr, which nothing orders), and any other fixed-size value free of Go pointers (structs, arrays, named scalar
// types), passed by value with its Go layout, which matches C's for the same fields.
// Go's int and uint are 8 bytes: pass int32(n) to a kernel's int. Where the driver
// reports the kernel's parameters (CUDA 12.4 and later drivers), a wrong argument
// count, a size that differs from the parameter's, or an alignment the parameter's
// offset does not meet returns an error matching ErrInvalidArgument, and nothing is
// queued. Older drivers do not report them (Function.Params is not ok): the
// arguments are then packed by their Go types, each at its natural alignment as C
// lays parameters out, as for any kernel of unknown layout, and nothing checks them
// against the kernel, so a wrong count or type reaches it.
//
// Launch fails with ErrClosed if the stream, the module or a buffer argument was
// closed, with ErrWrongContext if they belong to different contexts, and with
// ErrInvalidArgument for a nil stream or a bad shape. It does not allocate for
// kernels whose parameters fit in 256 bytes.
func (f *Function) Launch(s *Stream, grid, block Dim3, sharedMem int, args ...any) error {
	if h := calltrace.Load(); h != nil { // a timeline runs (cupti): it names the Go call behind the work
		defer h.End(h.Begin("Launch"))
	}
	d, err := f.launchDims(grid, block, sharedMem)
	if err != nil {
		return err
	}
	if err := f.enterLaunch(s, d); err != nil {
		return err
	}
	// The usual launch, outside a capture: packed under the module's and the
	// stream's read locks, which keep its memory arguments (fastUse), and queued at
	// once, when each one's use on the stream needs no wait and no record.
	// The usual kernel's parameters fit in smallParams: a few words to clear, not
	// inlineParams bytes.
	if f.argSize <= smallParams && s.stream.planless() {
		var small [smallParams / 8]uint64 // 8-byte aligned
		if done, err := f.launchFast(s, d, unsafe.Slice((*byte)(unsafe.Pointer(&small)), smallParams), args); done {
			return f.launched(s, err)
		}
	}
	return f.launchMore(s, d, args, nil)
}

// enterLaunch checks that s is a stream of f's context, enters the context and,
// for a launch of more than 48 KiB of dynamic shared memory, raises f's limit: what
// every launch does first. The caller exits the context.
func (f *Function) enterLaunch(s *Stream, d launchShape) error {
	if err := checkStream(s); err != nil {
		return err
	}
	c := f.mod.ctx.ctxState
	if s.cs != c {
		return f.launchError(errLaunchContext, s)
	}
	if err := c.enter(); err != nil {
		return err
	}
	if d.shm > maxDefaultSharedMem {
		if err := f.raiseSharedMem(int(d.shm)); err != nil {
			c.exit()
			return err
		}
	}
	return nil
}

// launched ends a launch that launchFast queued: it exits the context Launch
// entered and names the kernel in the driver's error.
func (f *Function) launched(s *Stream, err error) error {
	s.cs.exit()
	if err != nil {
		return f.launchError(err, s)
	}
	return nil
}

// launchMore is the rest of Launch, in the context Launch entered (out of line, so
// that the usual launch runs through less code): the fast path for parameters past
// smallParams (or of an unknown layout that did not fit), else the general path:
// device-memory arguments are held from here until the kernel is queued, each once,
// and their uses planned. A configured launch (LaunchWith: ex not nil) takes the
// general path.
//
//go:noinline
func (f *Function) launchMore(s *Stream, d launchShape, args []any, ex *launchAttrs) error {
	var buf []byte
	switch {
	case f.known && f.argSize == 0:
		// No parameters: no buffer.
	case f.known && f.argSize > inlineParams:
		buf = make([]byte, f.argSize)
	default:
		var inline [inlineParams / 8]uint64 // 8-byte aligned
		buf = unsafe.Slice((*byte)(unsafe.Pointer(&inline)), inlineParams)
	}
	if ex == nil && (f.argSize > smallParams || !f.known) && s.stream.planless() {
		if done, err := f.launchFast(s, d, buf, args); done {
			return f.launched(s, err)
		}
	}
	var p opPlan
	m := f.mod
	size, err := packArgs(buf, f.params, f.known, m.ctx, f.name, args, &p)
	if err != nil && errors.Is(err, errParamsTooLarge) { // unknown layout, more than inlineParams
		buf = make([]byte, size)
		size, err = packArgs(buf, f.params, f.known, m.ctx, f.name, args, &p)
	}
	if err != nil {
		s.cs.exit()
		return err
	}
	if streamCheck.on.Load() {
		// After the launch's own hand-off, which may order the raw addresses too.
		if err = f.launchPlanned(s, d, buf[:size], &p, ex); err == nil {
			checkLaunch(args, s.stream, "a launch of "+f.name)
		}
		return err
	}
	return f.launchPlanned(s, d, buf[:size], &p, ex)
}

// launchFast is Launch's usual path, in the context Launch entered: under the
// module's read lock and then the stream's, it packs args into buf (packFast)
// without holding the memory, and queues the launch if every argument is of a
// usual type and every memory argument an allocation whose one use is on the
// stream, as the launch's (fastUse). It reports whether it did (done), with the
// driver's error. Otherwise it queued nothing and Launch takes the general path,
// which reports the errors of the arguments, then of a closed module or stream.
func (f *Function) launchFast(s *Stream, d launchShape, buf []byte, args []any) (done bool, err error) {
	// No defers: nothing here panics or calls code of the caller's, and each defer
	// would be a call at every launch.
	m, st := f.mod, s.stream
	m.mu.RLock()
	// Closed: the general path reports it, after the arguments' errors.
	if m.closed || lockOpen(s, st) != nil {
		m.mu.RUnlock()
		return false, nil
	}
	size, ok := f.packFast(buf, args, st)
	if ok {
		if err = launchPacked(s.cs.h, f.h, d, st.h, buf[:size]); err == nil {
			st.kernel.Store(f)
		}
	}
	st.mu.RUnlock()
	m.mu.RUnlock()
	return ok, err
}

// errLaunchModuleClosed and errLaunchContext are launchError's causes for a closed
// module and a stream of another context than the module's.
var (
	errLaunchModuleClosed = fmt.Errorf("module: %w", ErrClosed)
	errLaunchContext      = errors.New("module and stream of different contexts")
)

// launchError is a launch's error, out of line so that Launch and queue, which
// every launch runs, set up no formatting.
//
//go:noinline
func (f *Function) launchError(err error, s *Stream) error {
	if err == errLaunchContext {
		return fmt.Errorf("%w: launching %s (module of context %p) on a stream of context %p",
			ErrWrongContext, f.name, f.mod.ctx, s.ctx)
	}
	if err = s.cs.faulted(err, f.name, s.stream); errors.Is(err, ErrFaulted) {
		return err
	}
	return fmt.Errorf("cuda: launching %s: %w", f.name, err)
}

// launchShape is a launch's grid, block and dynamic shared memory as the driver
// takes them.
type launchShape struct {
	gx, gy, gz, bx, by, bz, shm uint32
}

// launchDims checks f and a launch's shape. The checks are made in line and the
// errors out of line (launchDimsError): every launch runs them.
func (f *Function) launchDims(grid, block Dim3, sharedMem int) (launchShape, error) {
	g, b := grid.norm(), block.norm()
	if f == nil || f.mod == nil || !g.fits() || !b.fits() || uint(sharedMem) > math.MaxUint32 {
		return launchShape{}, launchDimsError(f, grid, block, sharedMem)
	}
	return launchShape{uint32(g.X), uint32(g.Y), uint32(g.Z), uint32(b.X), uint32(b.Y), uint32(b.Z), uint32(sharedMem)}, nil
}

// norm returns d with a zero Y or Z made 1.
func (d Dim3) norm() Dim3 {
	if d.Y == 0 {
		d.Y = 1
	}
	if d.Z == 0 {
		d.Z = 1
	}
	return d
}

// fits reports whether each dimension of d (norm'd) is in [1, 2³²).
func (d Dim3) fits() bool {
	return uint(d.X-1) < math.MaxUint32 && uint(d.Y-1) < math.MaxUint32 && uint(d.Z-1) < math.MaxUint32
}

// launchDimsError is launchDims's error.
//
//go:noinline
func launchDimsError(f *Function, grid, block Dim3, sharedMem int) error {
	if f == nil || f.mod == nil {
		return fmt.Errorf("%w: nil *cuda.Function", ErrInvalidArgument)
	}
	if _, _, _, err := grid.dims("grid"); err != nil {
		return err
	}
	if _, _, _, err := block.dims("block"); err != nil {
		return err
	}
	return fmt.Errorf("%w: shared memory %d bytes", ErrInvalidArgument, sharedMem)
}
