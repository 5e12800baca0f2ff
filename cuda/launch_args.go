package cuda

import (
	"encoding/binary"
	"errors"
	"fmt"
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

// paramInfo is one kernel parameter as the driver reports it.
type paramInfo struct {
	offset, size uintptr
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
			if !m.fastOn(c, on, !read) {
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

// errParamsTooLarge reports that the arguments of a kernel whose layout is unknown
// do not fit the buffer; packArgs then returns the size they need.
var errParamsTooLarge = errors.New("cuda: kernel arguments exceed the parameter buffer")

// packArgs writes args into buf at the kernel's parameter offsets and returns the
// size of the parameter buffer; it holds the memory arguments in p (opPlan.hold),
// each once, written unless every argument that passes it is an Input: the caller
// plans, records and releases them. On error p holds nothing. With known false
// (the driver did not report the parameters) it lays the arguments out by their
// natural alignment, as C does, and checks nothing. ctx is the launch's context,
// which memory arguments must belong to (nil: not checked); name is the kernel's,
// for errors.
func packArgs(buf []byte, params []paramInfo, known bool, ctx *Context, name string, args []any, p *opPlan) (uintptr, error) {
	size, err := packHeld(buf, params, known, ctx, name, args, p)
	if err != nil {
		p.release()
		*p = opPlan{}
	}
	return size, err
}

// packHeld is packArgs, leaving what p holds to it on error.
func packHeld(buf []byte, params []paramInfo, known bool, ctx *Context, name string, args []any, p *opPlan) (size uintptr, err error) {
	if known && len(args) != len(params) {
		return 0, argError(argCount, name, len(args), args, uintptr(len(params)), 0, nil)
	}
	var cs *ctxState
	if ctx != nil {
		cs = ctx.ctxState
	}
	var end uintptr // unknown layout: end of the last argument
	tooLarge := false
	for i := range args {
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
				return 0, argError(argNil, name, i, args, 0, 0, nil)
			case deviceArg: // other than usualArg's
				mem = true
			default:
				t := reflect.TypeOf(x)
				if err := checkArgType(t); err != nil {
					return 0, argError(argType, name, i, args, 0, 0, err)
				}
				sz, align = t.Size(), uintptr(t.Align())
				// Not pointer-shaped (it holds no pointers), so the interface's data word
				// points at the value.
				src = dataWord(&args[i])
			}
		}
		if mem {
			m, read := argMem(&args[i])
			if err := p.hold(m, !read, cs); err != nil {
				if err == errWrongContext {
					return 0, argError(argContext, name, i, args, 0, 0, nil)
				}
				return 0, argError(argMemory, name, i, args, 0, 0, err)
			}
			sz, v = 8, uint64(m.ptr)
		}
		if align == 0 {
			align = sz
		}
		var off uintptr
		if known {
			p := params[i]
			if sz != p.size {
				return 0, argError(argSize, name, i, args, sz, p.size, nil)
			}
			if p.offset&(align-1) != 0 { // alignments are powers of 2
				return 0, argError(argAlign, name, i, args, align, p.offset, nil)
			}
			off = p.offset
		} else {
			off = (end + align - 1) &^ (align - 1)
			end = off + sz
		}
		if off+sz > uintptr(len(buf)) {
			if known {
				return 0, argError(argPast, name, i, args, off+sz, uintptr(len(buf)), nil)
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
	if !known {
		if tooLarge {
			return end, errParamsTooLarge
		}
		return end, nil
	}
	for _, p := range params {
		size = max(size, p.offset+p.size)
	}
	return size, nil
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
