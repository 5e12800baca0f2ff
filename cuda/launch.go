package cuda

/*
#cgo noescape gocuda_launch_batch
#cgo nocallback gocuda_launch_batch
#cgo noescape gocuda_launch_after
#cgo nocallback gocuda_launch_after
#cgo noescape gocuda_launch
#cgo nocallback gocuda_launch
#include <stddef.h>
#include <stdint.h>
#include "current.h"

typedef int32_t (*gocuda_launch_fn)(uintptr_t, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t,
	uint32_t, uint32_t, uintptr_t, void**, void**);

// gocuda_launch_after makes ctx current and launches f with its parameters packed in
// one buffer, passed through cuLaunchKernel's extra array, which is built here on the
// C stack (size 0: a kernel without parameters). Before, for a hand-off, for each of
// the n events it records it on from[i] (unless from[i] is 0: an event recorded
// already) and makes stream wait for it: one call into C for what a C program does
// in 2n+1 calls. The result is the CUresult of the failed call or the launch, or
// gocuda_make_current's failure.
static int64_t gocuda_launch_after(uintptr_t fn, uintptr_t record, uintptr_t wait, uintptr_t get, uintptr_t set,
		uintptr_t ctx, const uint64_t* evs, const uint64_t* from, size_t n,
		uintptr_t f, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t bx, uint32_t by, uint32_t bz,
		uint32_t shmem, uintptr_t stream, const uint64_t* buf, size_t size) {
	int64_t c = gocuda_make_current(get, set, ctx);
	if (c) return c;
	for (size_t i = 0; i < n; i++) {
		int32_t s = 0;
		if (from[i]) s = ((int32_t (*)(uintptr_t, uintptr_t))record)((uintptr_t)evs[i], (uintptr_t)from[i]);
		if (!s) s = ((int32_t (*)(uintptr_t, uintptr_t, uint32_t))wait)(stream, (uintptr_t)evs[i], 0);
		if (s) return (uint32_t)s;
	}
	void* extra[5] = {(void*)1, (void*)buf, (void*)2, &size, (void*)0};
	return (uint32_t)((gocuda_launch_fn)fn)(f, gx, gy, gz, bx, by, bz, shmem, stream, NULL, size ? extra : NULL);
}

// gocuda_shape is a launch's grid, block and dynamic shared memory (launchShape).
typedef struct {
	uint32_t gx, gy, gz, bx, by, bz, shm;
} gocuda_shape;

// gocuda_launch is gocuda_launch_after without a hand-off, the usual launch: fewer
// arguments to pass (the shape by address).
static int64_t gocuda_launch(uintptr_t fn, uintptr_t get, uintptr_t set, uintptr_t ctx, uintptr_t f,
		const gocuda_shape* sh, uintptr_t stream, const uint64_t* buf, size_t size) {
	int64_t c = gocuda_make_current(get, set, ctx);
	if (c) return c;
	void* extra[5] = {(void*)1, (void*)buf, (void*)2, &size, (void*)0};
	return (uint32_t)((gocuda_launch_fn)fn)(f, sh->gx, sh->gy, sh->gz, sh->bx, sh->by, sh->bz, sh->shm, stream,
		NULL, size ? extra : NULL);
}

// gocuda_batch_rec is one launch of a LaunchBatch: its parameters are size bytes at
// byte offset off of the batch's parameter buffer.
typedef struct {
	uintptr_t f;
	uint32_t gx, gy, gz, bx, by, bz, shmem, pad;
	uint64_t off, size;
} gocuda_batch_rec;

// gocuda_launch_batch makes ctx current, then launches the n records in order on
// stream, stopping at the first failure; *done is the number launched. The result
// is that of gocuda_launch_packed.
static int64_t gocuda_launch_batch(uintptr_t fn, uintptr_t get, uintptr_t set, uintptr_t ctx,
		uintptr_t stream, const gocuda_batch_rec* recs, size_t n, const uint64_t* args, size_t* done) {
	*done = 0;
	int64_t c = gocuda_make_current(get, set, ctx);
	if (c) return c;
	for (size_t i = 0; i < n; i++) {
		const gocuda_batch_rec* r = &recs[i];
		size_t size = r->size;
		void* extra[5] = {(void*)1, (void*)((const char*)args + r->off), (void*)2, &size, (void*)0};
		int32_t s = ((gocuda_launch_fn)fn)(r->f, r->gx, r->gy, r->gz, r->bx, r->by, r->bz, r->shmem,
			stream, NULL, size ? extra : NULL);
		if (s != 0) return (uint32_t)s;
		*done = i + 1;
	}
	return 0;
}
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"reflect"
	"sync"
	"unsafe"

	"github.com/gocuda/gocuda/cuda/cudaraw"
)

// How arguments reach the driver
//
// cuLaunchKernel takes the arguments either as kernelParams, an array of pointers to
// each argument, or as extra, one buffer holding all of them at the offsets the
// kernel expects (CU_LAUNCH_PARAM_BUFFER_POINTER, CU_LAUNCH_PARAM_BUFFER_SIZE). Launch
// uses the buffer:
//
//   - kernelParams from Go is an array of Go pointers passed to C, which cgo allows
//     only when every pointee is pinned (runtime.Pinner: an allocation and a pin per
//     argument per launch) or copied to C memory (a malloc and free per launch).
//   - One buffer holds no pointers, so passing it breaks no cgo rule and needs no
//     pinning. It lives on Launch's stack (up to inlineParams bytes; larger ones are
//     allocated), and cgo's noescape annotation keeps it there: no allocation per
//     launch. It is passed as a uint64_t*, a pointer to a pointer-free type, so cgo
//     skips its run-time pointer check too. The extra array that points at it is
//     built in C, on the C stack, in the same cgo call that makes the context current
//     and launches.
//   - Arguments are boxed in the caller's ...any, on the caller's stack as long as
//     Launch lets none of them escape (see detach): Launch allocates nothing.
//   - The offsets come from the driver (cuFuncGetParamInfo), so each argument's size
//     and alignment are checked against the kernel before anything is queued; a wrong
//     count or size is an error, never a kernel reading garbage. Drivers before CUDA
//     12.4 lack it: there the layout is unknown, and the arguments are packed by
//     their Go types at C's natural alignment, unchecked.

// inlineParams is the parameter buffer that Launch keeps on its stack: kernels whose
// parameters take more (up to the driver's 32 KiB) get an allocated buffer.
const inlineParams = 256

// smallParams is the buffer that Launch clears for kernels whose parameters the
// driver reports to fit in it.
const smallParams = 64

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

// paramInfo is one kernel parameter as the driver reports it.
type paramInfo struct {
	offset, size uintptr
}

// Launch queues the kernel on s with grid×block threads, sharedMem bytes of dynamic
// shared memory and args as its parameters, in order. It does not wait for the kernel.
//
// Arguments may be Go scalars (int8 to int64, uint8 to uint64, int, uint, uintptr,
// float32, float64, bool: one byte), device pointers (CUdeviceptr, *DeviceBuffer), and
// any other fixed-size value free of Go pointers (structs, arrays, named scalar
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
	d, err := f.launchDims(grid, block, sharedMem)
	if err != nil {
		return err
	}
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
	// The usual launch, outside a capture: packed under the module's and the
	// stream's read locks, which keep its memory arguments (fastUse), and queued at
	// once, when each one's use on the stream needs no wait and no record.
	// The usual kernel's parameters fit in smallParams: a few words to clear, not
	// inlineParams bytes.
	if f.argSize <= smallParams && s.stream.capture.Load() == nil && !streamCheck.on.Load() {
		var small [smallParams / 8]uint64 // 8-byte aligned
		if done, err := f.launchFast(s, d, unsafe.Slice((*byte)(unsafe.Pointer(&small)), smallParams), args); done {
			return f.launched(s, err)
		}
	}
	return f.launchMore(s, d, args)
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
// and their uses planned.
//
//go:noinline
func (f *Function) launchMore(s *Stream, d launchShape, args []any) error {
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
	if (f.argSize > smallParams || !f.known) && s.stream.capture.Load() == nil && !streamCheck.on.Load() {
		if done, err := f.launchFast(s, d, buf, args); done {
			return f.launched(s, err)
		}
	}
	var held argHeld
	m := f.mod
	size, err := packInto(buf, f.params, f.known, m.ctx, f.name, args, &held)
	if err != nil && errors.Is(err, errParamsTooLarge) { // unknown layout, more than inlineParams
		buf = make([]byte, size)
		size, err = packInto(buf, f.params, f.known, m.ctx, f.name, args, &held)
	}
	if err == nil && streamCheck.on.Load() {
		checkLaunch(args, s.stream)
	}
	if err != nil {
		s.cs.exit()
		return err
	}
	return f.launchPlanned(s, d, buf[:size], &held, args)
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
		err = launchPacked(s.cs.h, f.h, d, st.h, buf[:size])
	}
	st.mu.RUnlock()
	m.mu.RUnlock()
	return ok, err
}

// packFast is launchFast's packing, under on's read lock: when every argument is of
// a usual type (a 4- or 8-byte scalar, a CUdeviceptr, or memory of the kernel's
// context that the launch may use without holding it, see memBase.fastUse) and fits
// its parameter, it writes them into buf and returns the size of the parameters.
// Anything else it declines (ok false), leaving errors to the general path.
func (f *Function) packFast(buf []byte, args []any, on *stream) (size uintptr, ok bool) {
	if f.known && len(args) != len(f.params) {
		return 0, false
	}
	c := f.mod.ctx.ctxState
	var end uintptr // unknown layout: end of the last argument
	for i := range args {
		sz, v, _ := usualArg(args, i)
		if sz == 0 { // memory, or another type: argMem returns nil for it, declined
			m, read := argMem(&args[i])
			if m == nil || m.ctx == nil || m.root != nil || m.ctx.ctxState != c || !m.fastUse(on, !read) {
				return 0, false
			}
			sz, v = 8, uint64(m.ptr)
		}
		off := (end + sz - 1) &^ (sz - 1)
		if f.known {
			p := f.params[i]
			if p.size != sz || p.offset&(sz-1) != 0 {
				return 0, false
			}
			off = p.offset
		}
		end = off + sz
		if end > uintptr(len(buf)) {
			return 0, false
		}
		if sz == 4 {
			binary.NativeEndian.PutUint32(buf[off:], uint32(v))
		} else {
			binary.NativeEndian.PutUint64(buf[off:], v)
		}
	}
	if f.known {
		return f.argSize, true
	}
	return end, true
}

// launchPlanned is Launch's general path, after packArgs held the memory arguments
// once each (held): it plans their uses and queues the launch.
func (f *Function) launchPlanned(s *Stream, d launchShape, params []byte, held *argHeld, args []any) error {
	var p launchPlan
	if held.any() {
		p.ms = planArgs(args, held, s.stream, &p.plans, &p.wait)
		if p.wait.n > maxFused {
			// Rare: more streams to wait for than one call takes.
			if err := p.ms.handOff(&p.wait, s.stream); err != nil {
				releaseArgs(args, held, nil, nil)
				s.cs.exit()
				return errHandOff(err)
			}
			p.wait.n = 0
		}
	}
	return f.queue(s, d, params, held, args, &p)
}

// launchPlan is the plan of a launch's uses (planArgs): the uses to wait for, of
// memory of ms, and the plan of each held argument, for the record.
type launchPlan struct {
	ms    *memState
	wait  deps
	plans argPlans
}

// queue launches f on s under the module's read lock and then the stream's (s.use,
// without its closure), so that neither can be closed meanwhile: after p's uses to
// wait for on the GPU, recording the uses p planned. It releases the held arguments
// and exits the context that Launch entered.
func (f *Function) queue(s *Stream, d launchShape, params []byte, held *argHeld, args []any, p *launchPlan) error {
	m, c := f.mod, s.cs
	plans := &p.plans
	var err error
	var used *stream
	m.mu.RLock()
	if m.closed {
		err = errLaunchModuleClosed
	} else {
		st := s.stream
		if st.capture.Load() != nil { // the test in line: every launch makes it
			leaseModuleIfCapturing(st, m)
		}
		if p.wait.n > 0 {
			// A hand-off: the waits and the launch in one call.
			if err = launchAfter(p.ms, &p.wait, s, c.h, f.h, d, params); err == nil {
				used = st
			}
		} else if err = lockOpen(s, st); err == nil {
			if err = launchPacked(c.h, f.h, d, st.h, params); err == nil {
				used = st
			}
			if held.any() {
				releaseArgs(args, held, used, plans)
				held.mask = 0 // released
			}
			st.mu.RUnlock()
		}
		if held.any() && used != nil {
			releaseArgs(args, held, used, plans)
			held.mask = 0
		}
	}
	m.mu.RUnlock()
	if held.any() {
		releaseArgs(args, held, nil, nil)
	}
	c.exit()
	if err != nil {
		return f.launchError(err, s)
	}
	return nil
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

// launchPacked launches f with the packed parameter buffer params, in one cgo call
// that also makes ctx current.
func launchPacked(ctx cudaraw.CUcontext, f cudaraw.CUfunction, sh launchShape, s cudaraw.CUstream, params []byte) error {
	fn, err := cudaraw.ProcLaunchKernel.Addr()
	if err != nil {
		return err
	}
	get, set, err := cudaraw.CtxSwitchProcs()
	if err != nil {
		return err
	}
	r := int64(C.gocuda_launch(C.uintptr_t(fn), C.uintptr_t(get), C.uintptr_t(set), C.uintptr_t(ctx), C.uintptr_t(f),
		(*C.gocuda_shape)(unsafe.Pointer(&sh)), C.uintptr_t(s), paramsArg(params), C.size_t(len(params))))
	return launchResult(r)
}

// paramsArg passes a launch's parameter buffer to C as a pointer to a pointer-free C
// type, which cgo does not check at run time (nil for no parameters).
func paramsArg(params []byte) *C.uint64_t {
	if len(params) == 0 {
		return nil
	}
	return (*C.uint64_t)(unsafe.Pointer(&params[0]))
}

// launchResult is the error of a launch's C call: the failure of its make-current
// (bit 32 set, see gocuda_make_current) or the CUresult of its driver calls.
func launchResult(r int64) error {
	if r>>32 != 0 {
		return cudaraw.Result(int32(r))
	}
	return cudaraw.Result(r).Err()
}

// launchShape and C's gocuda_shape are the same seven uint32s (a compile-time check).
var (
	_ = [1]struct{}{}[unsafe.Sizeof(launchShape{})-unsafe.Sizeof(C.gocuda_shape{})]
	_ = [1]struct{}{}[unsafe.Offsetof(launchShape{}.shm)-unsafe.Offsetof(C.gocuda_shape{}.shm)]
)

// errParamsTooLarge reports that the arguments of a kernel whose layout is unknown
// do not fit the buffer; packArgs then returns the size they need.
var errParamsTooLarge = errors.New("cuda: kernel arguments exceed the parameter buffer")

// packArgs writes args into buf at the kernel's parameter offsets and returns the
// size of the parameter buffer and the device-memory arguments, which it holds
// (deviceArg.holdArg): the caller releases them with releaseArgs. On error nothing
// stays held. With
// known false (the driver did not report the parameters) it lays the arguments out
// by their natural alignment, as C does, and checks nothing. ctx is the launch's
// context, which device-memory arguments must belong to (nil: not checked); name is
// the kernel's, for errors.
func packArgs(buf []byte, params []paramInfo, known bool, ctx *Context, name string, args []any) (size uintptr, held argHeld, err error) {
	size, err = packInto(buf, params, known, ctx, name, args, &held)
	return size, held, err
}

// packInto is packArgs with the held arguments in *held (Launch's, on its stack:
// an argHeld returned by value is copied at each return).
func packInto(buf []byte, params []paramInfo, known bool, ctx *Context, name string, args []any, held *argHeld) (uintptr, error) {
	*held = argHeld{}
	size, done, err := packHeld(buf, params, known, ctx, name, args, held)
	if err != nil && held.any() {
		releaseArgs(args[:done], held, nil, nil)
		*held = argHeld{}
	}
	return size, err
}

// argMask marks arguments of a launch: bit i for args[i], and the top bit for every
// argument from the 64th on (found again by type), so that going over them looks at
// no other argument.
type argMask uint64

func maskOf(i int) argMask { return 1 << min(i, 63) }

// argHeld is the memory arguments a launch holds (mask), the Inputs among those of
// the first 63 arguments (inputs), and the Inputs it writes all the same, because the
// same memory is passed unmarked too (written); and the memory of the first few, in
// order (mem[k] is the k-th held argument's), so that the launch looks each
// argument's type up once.
type argHeld struct {
	mask, written, inputs argMask
	n                     int
	mem                   [4]*memBase
}

// memOf returns the memory of args[i], the k-th held argument.
func (h *argHeld) memOf(args []any, i, k int) *memBase {
	if k < len(h.mem) {
		return h.mem[k]
	}
	return argBase(&args[i])
}

func (h *argHeld) any() bool { return h.mask != 0 }

// packHeld is packInto; when it fails, held marks what args[:done] hold.
func packHeld(buf []byte, params []paramInfo, known bool, ctx *Context, name string, args []any, held *argHeld) (size uintptr, done int, err error) {
	if known && len(args) != len(params) {
		return 0, 0, argError(argCount, name, len(args), args, uintptr(len(params)), 0, nil)
	}
	var end uintptr // unknown layout: end of the last argument
	tooLarge := false
	for i := range args {
		done = i
		var (
			sz, align uintptr
			v         uint64         // the value of a scalar
			src       unsafe.Pointer // the value of anything else, sz bytes
		)
		// The usual arguments first (usualArg): the type switch below finds a case by
		// the type's hash, a load from its descriptor and an indirect jump, both likely
		// to miss after the last driver call.
		sz, v, mem := usualArg(args, i)
		if sz == 0 && !mem { // not one of usualArg's types
			switch x := args[i].(type) {
			case int8:
				sz, v = 1, uint64(uint8(x))
			case uint8:
				sz, v = 1, uint64(x)
			case bool:
				sz = 1
				if x {
					v = 1
				}
			case int16:
				sz, v = 2, uint64(uint16(x))
			case uint16:
				sz, v = 2, uint64(x)
			case nil:
				return 0, done, argError(argNil, name, i, args, 0, 0, nil)
			case deviceArg: // other than usualArg's
				mem = true
			default:
				t := reflect.TypeOf(x)
				if err := checkArgType(t); err != nil {
					return 0, done, argError(argType, name, i, args, 0, 0, err)
				}
				sz, align = t.Size(), uintptr(t.Align())
				// Not pointer-shaped (it holds no pointers), so the interface's data word
				// points at the value.
				src = dataWord(&args[i])
			}
		}
		if mem {
			m, read := argMem(&args[i])
			p, c, again := heldAgain(args, held, i, m, read)
			if !again {
				var err error
				if p, c, err = m.holdArg(); err != nil {
					return 0, done, argError(argMemory, name, i, args, 0, 0, err)
				}
				held.mask |= maskOf(i)
				if read && i < 63 {
					held.inputs |= maskOf(i)
				}
				if held.n < len(held.mem) {
					held.mem[held.n] = m
				}
				held.n++
				done = i + 1
			}
			if ctx != nil && (c == nil || c.ctxState != ctx.ctxState) {
				return 0, done, argError(argContext, name, i, args, 0, 0, nil)
			}
			sz, v = 8, uint64(p)
		}
		if align == 0 {
			align = sz
		}
		var off uintptr
		if known {
			p := params[i]
			if sz != p.size {
				return 0, done, argError(argSize, name, i, args, sz, p.size, nil)
			}
			if p.offset&(align-1) != 0 { // alignments are powers of 2
				return 0, done, argError(argAlign, name, i, args, align, p.offset, nil)
			}
			off = p.offset
		} else {
			off = (end + align - 1) &^ (align - 1)
			end = off + sz
		}
		if off+sz > uintptr(len(buf)) {
			if known {
				return 0, done, argError(argPast, name, i, args, off+sz, uintptr(len(buf)), nil)
			}
			tooLarge = true
			continue
		}
		dst := buf[off : off+sz]
		switch {
		case src != nil:
			copy(dst, unsafe.Slice((*byte)(src), sz))
		case sz == 1:
			dst[0] = byte(v)
		case sz == 2:
			binary.NativeEndian.PutUint16(dst, uint16(v))
		case sz == 4:
			binary.NativeEndian.PutUint32(dst, uint32(v))
		default:
			binary.NativeEndian.PutUint64(dst, v)
		}
	}
	done = len(args)
	if !known {
		if tooLarge {
			return end, done, errParamsTooLarge
		}
		return end, done, nil
	}
	for _, p := range params {
		size = max(size, p.offset+p.size)
	}
	return size, done, nil
}

// usualArg reads args[i] if it is of a usual type, each found by a comparison of its
// type word: memory as a *DeviceBuffer or Input (mem), or a 4- or 8-byte scalar,
// whose size and value it returns. For any other type it returns zeros.
func usualArg(args []any, i int) (sz uintptr, v uint64, mem bool) {
	switch a := args[i]; {
	case isType[*DeviceBuffer](a), isType[Input](a):
		return 0, 0, true
	case isType[int32](a), isType[float32](a), isType[uint32](a): // the value's four bytes
		return 4, uint64(*(*uint32)(dataWord(&args[i]))), false
	case isType[cudaraw.CUdeviceptr](a), isType[int64](a), isType[uint64](a), isType[float64](a),
		isType[int](a), isType[uint](a), isType[uintptr](a):
		return 8, *(*uint64)(dataWord(&args[i])), false
	}
	return 0, 0, false
}

// isType reports whether a holds a T, by its type word alone (no type descriptor is
// read).
func isType[T any](a any) bool {
	_, ok := a.(T)
	return ok
}

// dataWord returns the data word of *a: for a value that is not pointer-shaped, the
// address of the value.
func dataWord(a *any) unsafe.Pointer { return (*[2]unsafe.Pointer)(unsafe.Pointer(a))[1] }

// argFault is what argError reports.
type argFault int

const (
	argCount   argFault = iota // x parameters, i arguments
	argNil                     // args[i] is nil
	argMemory                  // args[i]'s memory: err
	argContext                 // args[i] is memory of another context
	argType                    // args[i]'s type: err
	argSize                    // args[i] is x bytes, the parameter y
	argAlign                   // args[i] needs x-byte alignment, the parameter is at offset y
	argPast                    // parameter i ends at x, past the y-byte buffer
)

// argError is packHeld's error for kernel name's argument i (out of line, so that
// packHeld's frame, which every launch sets up, holds no formatting).
//
//go:noinline
func argError(what argFault, name string, i int, args []any, x, y uintptr, err error) error {
	switch what {
	case argCount:
		return fmt.Errorf("%w: kernel %s takes %d parameters, got %d arguments", ErrInvalidArgument, name, x, i)
	case argNil:
		return fmt.Errorf("%w: kernel %s argument %d is nil", ErrInvalidArgument, name, i)
	case argMemory:
		return fmt.Errorf("cuda: kernel %s argument %d: %w", name, i, err)
	case argContext:
		return fmt.Errorf("%w: kernel %s argument %d is memory of another context", ErrWrongContext, name, i)
	case argType:
		return fmt.Errorf("%w: kernel %s argument %d: %v", ErrInvalidArgument, name, i, err)
	case argSize:
		return fmt.Errorf("%w: kernel %s argument %d: %s is %d bytes, the parameter is %d bytes",
			ErrInvalidArgument, name, i, reflect.TypeOf(args[i]), x, y)
	case argAlign:
		return fmt.Errorf("%w: kernel %s argument %d: %s needs %d-byte alignment, the parameter is at offset %d",
			ErrInvalidArgument, name, i, reflect.TypeOf(args[i]), x, y)
	default:
		return fmt.Errorf("%w: kernel %s parameter %d ends at %d, past the %d-byte buffer", ErrInvalidArgument, name, i, x, y)
	}
}

// heldAgain reports whether args[i], memory m (an Input if read), is memory that an
// earlier argument holds already (a buffer passed twice, as input and output): one
// hold covers both, and its address and context are returned. An earlier Input of
// memory that args[i] passes unmarked becomes written.
func heldAgain(args []any, held *argHeld, i int, m *memBase, read bool) (cudaraw.CUdeviceptr, *Context, bool) {
	if i >= 63 || held.mask == 0 || m == nil {
		return 0, nil, false
	}
	k := 0
	for h := held.mask & (maskOf(i) - 1); h != 0; h, k = h&(h-1), k+1 {
		j := bits.TrailingZeros64(uint64(h))
		if held.memOf(args, j, k) != m {
			continue
		}
		if !read {
			held.written |= maskOf(j)
		}
		return m.ptr, m.ctx, true
	}
	return 0, nil, false
}

// argMem returns the memory of a memory argument, and whether it is an Input (read
// only). It goes through detach so that the call does not make the caller's
// arguments escape.
func argMem(a *any) (*memBase, bool) {
	switch d := detach(a).(type) {
	case *DeviceBuffer:
		return d.base(), false
	case Input:
		return d.m, true
	case deviceArg:
		return d.base(), false
	}
	return nil, false
}

// argBase returns the memory of a memory argument.
func argBase(a *any) *memBase {
	m, _ := argMem(a)
	return m
}

// writes reports whether the launch writes the memory of args[i] (held).
func (h *argHeld) writes(args []any, i int) bool {
	if i < 63 {
		return h.inputs&maskOf(i) == 0 || h.written&maskOf(i) != 0
	}
	_, read := argMem(&args[i])
	return !read
}

// argPlans is the plans of a launch's memory arguments, in argument order, on the
// stack for the first few.
type argPlans struct {
	n      int
	inline [8]planned
	more   []planned
}

func (p *argPlans) add(x planned) {
	if p.n < len(p.inline) {
		p.inline[p.n] = x
	} else {
		p.more = append(p.more, x)
	}
	p.n++
}

func (p *argPlans) at(k int) planned {
	if k < len(p.inline) {
		return p.inline[k]
	}
	return p.more[k-len(p.inline)]
}

// forHeld calls f for each memory argument in held, in order, with its index i in
// args, its memory and whether the launch writes it.
func forHeld(args []any, held *argHeld, f func(i int, m *memBase, write bool)) {
	k := 0
	for h := held.mask; h != 0; h &= h - 1 {
		i := bits.TrailingZeros64(uint64(h))
		if i == 63 { // the 64th argument and every one after it
			for j := 63; j < len(args); j++ {
				if m := argBase(&args[j]); m != nil {
					f(j, m, held.writes(args, j))
				}
			}
			return
		}
		// memOf and writes, inlined for the first few.
		var m *memBase
		if k < len(held.mem) {
			m = held.mem[k]
		} else {
			m = argBase(&args[i])
		}
		f(i, m, held.inputs&maskOf(i) == 0 || held.written&maskOf(i) != 0)
		k++
	}
}

// planArgs plans the uses of a launch's memory arguments on t (memBase.plan),
// putting the uses to wait for in d, and returns the arguments' memory state.
func planArgs(args []any, held *argHeld, t *stream, plans *argPlans, d *deps) *memState {
	var ms *memState
	forHeld(args, held, func(_ int, m *memBase, write bool) {
		ms = m.ms
		plans.add(m.plan(t, write, d))
	})
	return ms
}

// maxFused is the most streams a launch waits for in its one call into C.
const maxFused = 4

// launchAfter launches f on s after waiting, on the device, for the uses in d (at
// most maxFused): it read-locks the streams of the uses and s, in address order
// (so that two launches handing off in opposite directions cannot deadlock against
// a Close), takes an event per use, and makes one call into C that records each on
// its stream (a closed stream's final event is recorded already), makes s wait for
// them and launches.
func launchAfter(ms *memState, d *deps, s *Stream, ctx cudaraw.CUcontext, f cudaraw.CUfunction, sh launchShape, params []byte) error {
	n := d.n
	var evs, from [maxFused]uint64
	var lock [maxFused + 1]*stream
	for i := range n {
		ev, err := ms.getHandoffEvent()
		if err != nil {
			for j := range i {
				ms.putHandoffEvent(cudaraw.CUevent(evs[j]))
			}
			return err
		}
		evs[i] = uint64(ev)
		lock[i] = d.at(i).s
	}
	pooled := evs
	put := func() {
		for i := range n {
			ms.putHandoffEvent(cudaraw.CUevent(pooled[i]))
		}
	}
	st := s.stream
	lock[n] = st
	locks := lock[:n+1]
	for i := 1; i < len(locks); i++ { // insertion sort by address: a few entries
		for j := i; j > 0 && uintptr(unsafe.Pointer(locks[j])) < uintptr(unsafe.Pointer(locks[j-1])); j-- {
			locks[j], locks[j-1] = locks[j-1], locks[j]
		}
	}
	unlock := func(k int) {
		for _, x := range locks[:k] {
			x.mu.RUnlock()
		}
	}
	for i, x := range locks {
		if x == st {
			if err := lockOpen(s, st); err != nil {
				unlock(i)
				put()
				return err
			}
			continue
		}
		x.mu.RLock()
	}
	for i := range n {
		u := d.at(i)
		switch {
		case !u.s.closed.Load():
			from[i] = uint64(u.s.h)
		case u.s.final != nil:
			evs[i] = uint64(u.s.final.h) // the stream's end, recorded when it closed
		default:
			// The closed stream has no final event (its creation failed): wait for
			// the whole context, holding no lock, and retry.
			unlock(len(locks))
			put()
			if err := cudaraw.CtxSynchronizeIn(ctx); err != nil {
				return err
			}
			return launchAfter(ms, d.without(i), s, ctx, f, sh, params)
		}
	}
	st.waits.Add(int64(n))
	err := launchAfterC(ctx, evs[:n], from[:n], f, sh, st.h, params)
	unlock(len(locks))
	put() // the waits are queued: the events may be recorded again
	return err
}

// launchAfterC makes launchAfter's call: the event records and waits, then the launch.
func launchAfterC(ctx cudaraw.CUcontext, evs, from []uint64, f cudaraw.CUfunction, sh launchShape, s cudaraw.CUstream, params []byte) error {
	fn, err := cudaraw.ProcLaunchKernel.Addr()
	if err != nil {
		return err
	}
	get, set, err := cudaraw.CtxSwitchProcs()
	if err != nil {
		return err
	}
	var record, wait uintptr
	var pe, pf *C.uint64_t
	if len(evs) > 0 {
		if record, err = cudaraw.ProcEventRecord.Addr(); err != nil {
			return err
		}
		if wait, err = cudaraw.ProcStreamWaitEvent.Addr(); err != nil {
			return err
		}
		pe, pf = (*C.uint64_t)(unsafe.Pointer(&evs[0])), (*C.uint64_t)(unsafe.Pointer(&from[0]))
	}
	r := int64(C.gocuda_launch_after(C.uintptr_t(fn), C.uintptr_t(record), C.uintptr_t(wait), C.uintptr_t(get), C.uintptr_t(set),
		C.uintptr_t(ctx), pe, pf, C.size_t(len(evs)),
		C.uintptr_t(f), C.uint32_t(sh.gx), C.uint32_t(sh.gy), C.uint32_t(sh.gz), C.uint32_t(sh.bx), C.uint32_t(sh.by), C.uint32_t(sh.bz),
		C.uint32_t(sh.shm), C.uintptr_t(s), paramsArg(params), C.size_t(len(params))))
	return launchResult(r)
}

// releaseArgs ends the holds of packArgs on the arguments in held, recording first
// each one's use on s (planned in plans) unless s is nil.
func releaseArgs(args []any, held *argHeld, s *stream, plans *argPlans) {
	k := 0
	forHeld(args, held, func(_ int, m *memBase, write bool) {
		if s != nil {
			if p := plans.at(k); !p.fast {
				m.record(s, write, p)
			}
		}
		k++
		m.leave()
	})
}

// detach returns a copy of *a that escape analysis does not trace back to a.
//
// Launch calls methods of deviceArg arguments through the interface, and the compiler
// cannot see what such a call does with its receiver, so it would conclude that the
// contents of args leak: every caller would then box its scalar arguments on the heap
// (an allocation per argument per launch) instead of on its stack. Nothing here
// retains an argument past the call, so the copy is made word by word as integers,
// which escape analysis does not follow. The values stay reachable through args,
// which the caller keeps alive for the duration of the call.
func detach(a *any) any {
	var out any
	*(*[2]uintptr)(unsafe.Pointer(&out)) = *(*[2]uintptr)(unsafe.Pointer(a))
	return out
}

// argTypes caches pointerFree's verdict per type: nil or the error.
var argTypes sync.Map // reflect.Type → error

// checkArgType accepts fixed-size types free of Go pointers: they can be copied into
// the parameter buffer byte for byte, and held in GPU memory.
func checkArgType(t reflect.Type) error {
	if v, ok := argTypes.Load(t); ok {
		if v == nil {
			return nil
		}
		return v.(error)
	}
	err := pointerFree(t, t)
	argTypes.Store(t, err)
	return err
}

// pointerFree is the one walk of a type for Go pointers (kernel arguments, element
// types of buffers and copies). A zero-length array holds nothing, whatever its
// element type.
func pointerFree(top, t reflect.Type) error {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return nil
	case reflect.Array:
		if t.Len() == 0 {
			return nil
		}
		return pointerFree(top, t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if err := pointerFree(top, t.Field(i).Type); err != nil {
				return err
			}
		}
		return nil
	}
	if top == t {
		return fmt.Errorf("%s cannot be a kernel argument or element type (pass device memory as CUdeviceptr or *DeviceBuffer, sizes as fixed-size integers)", t)
	}
	return fmt.Errorf("%s cannot be a kernel argument or element type: it contains %s, a Go pointer or a variable-size value", top, t)
}

// batchRec is a launch of a LaunchBatch as gocuda_launch_batch reads it.
type batchRec = C.gocuda_batch_rec

// newBatchRec returns the record of a launch of f with shape d, whose parameters are
// size bytes at byte offset off of the batch's buffer.
func newBatchRec(f cudaraw.CUfunction, d launchShape, off, size uintptr) batchRec {
	return batchRec{
		f:  C.uintptr_t(f),
		gx: C.uint32_t(d.gx), gy: C.uint32_t(d.gy), gz: C.uint32_t(d.gz),
		bx: C.uint32_t(d.bx), by: C.uint32_t(d.by), bz: C.uint32_t(d.bz),
		shmem: C.uint32_t(d.shm),
		off:   C.uint64_t(off), size: C.uint64_t(size),
	}
}

// launchBatch launches recs on s with one cgo call that also makes ctx current, and
// returns how many were launched.
func launchBatch(ctx cudaraw.CUcontext, s cudaraw.CUstream, recs []batchRec, args []uint64) (int, error) {
	fn, err := cudaraw.ProcLaunchKernel.Addr()
	if err != nil {
		return 0, err
	}
	get, set, err := cudaraw.CtxSwitchProcs()
	if err != nil {
		return 0, err
	}
	var a *C.uint64_t
	if len(args) > 0 {
		a = (*C.uint64_t)(unsafe.Pointer(&args[0]))
	}
	var done C.size_t
	r := int64(C.gocuda_launch_batch(C.uintptr_t(fn), C.uintptr_t(get), C.uintptr_t(set), C.uintptr_t(ctx),
		C.uintptr_t(s), &recs[0], C.size_t(len(recs)), a, &done))
	return int(done), launchResult(r) // done is 0 when making ctx current failed
}
